"""A key built by hand, or a string where a reachability or a health belongs, does not
type-check: mypy (strict, as the project runs it) is asked about a module that tries."""

from __future__ import annotations

from pathlib import Path

from mypy import api

PROBE = '''
from berth.store import Put, Store, keys
from berth.store.documents import ClusterApplied, ClusterState, HealthState, Reachability


def wrong(store: Store) -> None:
    store.get("/berth/v1/applications/default/web")
    store.list_prefix(keys.ROOT + "applications/")
    Put(keys.ROOT + "x", b"")
    ClusterState(state="ONLINE")
    ClusterApplied(generation=1, health="Healthy")


def right(store: Store) -> None:
    store.get(keys.resource_key("Application", "web", "default"))
    store.list_prefix(keys.resource_prefix("Application"))
    Put(keys.status_key("Cluster", "default", "a"), b"")
    ClusterState(state=Reachability.ONLINE)
    ClusterApplied(generation=1, health=HealthState.HEALTHY)
'''


def test_hand_built_keys_and_bare_strings_fail_mypy(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE)
    out, err, status = api.run(["--strict", "--no-incremental", "--config-file", "",
                                "--python-version", "3.11", str(probe)])
    errors = sorted(int(line.split(":")[1]) for line in out.splitlines()
                    if line.startswith(str(probe)) and ": error:" in line)
    assert status == 1, out + err
    assert errors == [7, 8, 9, 10, 11], out  # every line of wrong(), none of right()
