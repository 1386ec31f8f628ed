"""The demo as README.md gives it: ``scripts/run.sh`` on a machine the suite has set
up, then ``scripts/run.sh --stop``. It must start everything, place the four
applications where their constraints and metrics say, show web's move made before
broken, leave everything running, and stop all of it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest
import requests

from berth.store import EtcdConfig, Store, keys, ledger
from berth.store.documents import ApplicationStatus
from berth_testkit.servers.etcd import ROOT


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie (exited, not yet reaped by its parent) counts as gone
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] != "Z"


def run(*args: str, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(ROOT / "scripts" / "run.sh"), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def demo_env(tmp_path: Path) -> Iterator[dict[str, str]]:
    env = {**os.environ, "BERTH_DEMO_DIR": str(tmp_path / "demo"),
           "BERTH_SETUP_LOG": str(tmp_path / "setup.log")}
    yield env
    run("--stop", env=env, timeout=120)  # whatever the test left, even when it failed


def test_help_and_unknown_arguments(demo_env: dict[str, str]) -> None:
    done = run("--help", env=demo_env, timeout=30)
    assert done.returncode == 0
    assert "scripts/run.sh --stop" in done.stdout and "set -euo" not in done.stdout
    done = run("--frobnicate", env=demo_env, timeout=30)
    assert done.returncode == 2 and "--help" in done.stderr


def test_the_demo_places_moves_and_stops(demo_env: dict[str, str]) -> None:
    done = run(env=demo_env, timeout=900)
    print(done.stdout)  # the demo's output, in the test log
    print(done.stderr)
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert "all four applications RUNNING" in out
    assert "scripts/run.sh --stop" in out.splitlines()[-1]
    # one progress line per setup step; the tools' own output went to the log file
    steps = [line for line in done.stderr.splitlines() if line.startswith("setup: ")]
    assert steps and all(line.endswith(" s)") or "done" in line for line in steps), steps
    assert "Collecting" not in done.stderr and "go: downloading" not in done.stderr

    state = json.loads((Path(demo_env["BERTH_DEMO_DIR"]) / "state.json").read_text())
    pids: list[int] = state["pids"]
    # etcd members; per cluster its etcd, API server, controller manager, scheduler and
    # kwok; berth's processes
    assert len(pids) == 3 + 3 * 5 + 6 + 1 + 1  # the console, helsinki's agent
    assert all(alive(p) for p in pids), "the demo leaves everything running"

    # where each application runs, as the propagator recorded it, with the reasons
    # the demo's documents give (web moved to dresden when its metric went up)
    store = Store(EtcdConfig(url=state["etcd"]))
    running = {}
    for kv in store.list_prefix(keys.status_prefix("Application"))[0]:
        st = msgspec.json.decode(kv.value, type=ApplicationStatus)
        running[st.metadata.name] = (st.status.state, sorted(r.name for r in st.status.running_on))
    assert running["web"] == ("RUNNING", ["dresden"])
    assert running["reports"] == ("RUNNING", ["dresden"])  # the only one with the CRD
    assert running["batch"] == ("RUNNING", ["helsinki"])
    # helsinki is a pull cluster: no credential of it in etcd, its agent's heartbeat and
    # work there, and the staged rollout below went through it all the same
    assert store.get(keys.secrets_key("Cluster", "helsinki", "default")) is None
    assert store.get(keys.heartbeat_key("default/helsinki")) is not None
    assert store.list_prefix(keys.work_prefix("default/helsinki"))[0]
    assert "helsinki in Pull mode, reached by its agent alone" in out
    state_api, on_api = running["api"]
    assert state_api == "RUNNING" and len(on_api) == 2  # two locations, spread
    # the move as the demo watched it on both clusters: the new Pods scheduled and Ready
    # on dresden, then the old copy removed from paris; never fewer than 2 available
    timeline = [line.split("s  ", 1)[1].split("available in all")[0].split()
                for line in out.splitlines() if "available in all:" in line]
    steps = [" ".join(words) for words in timeline]
    removed = steps.index("paris Deployment web removed")
    assert steps[0] == "dresden Deployment web created"
    assert "dresden Deployment web 2/2 available" in steps[:removed]
    assert sum(1 for step in steps[:removed] if step.startswith("dresden Pod")
               and step.endswith("Ready")) == 2
    assert all(int(line.rsplit(": ", 1)[1].split()[0]) >= 2
               for line in out.splitlines() if "available in all:" in line)
    assert "never down: at least 2/2 replicas of web were available" in out
    # the staged rollout: generation 2 reached helsinki, failed in dresden, never reached
    # paris, and was rolled back without anyone acting
    assert "rolled back: every cluster runs generation 1 again" in out
    rollout = [line for line in out.splitlines() if "rollout of generation 2" in line]
    assert any("helsinki 2" in line for line in rollout), rollout
    assert not any("paris 2" in line for line in rollout), rollout
    assert running["shop"] == ("DEGRADED", ["dresden", "helsinki", "paris"])
    # the ledger remembers web's move with its trigger, the Binding names that decision
    # (what the propagator annotated the objects on dresden with), and the propagator's
    # records say the copy on paris went once the one on dresden was healthy
    found, problems = ledger.history(store, "Application", "default", "web")
    assert problems == []
    moves = [(e, r) for e, r in found if e.by == "scheduler" and r.event == "Moved"]
    assert moves and [t.name for t in moves[-1][1].targets] == ["dresden"], found
    assert moves[-1][1].trigger == "metrics"
    kv = store.get(keys.binding_key("Application", "default", "web"))
    assert kv is not None and moves[-1][0].id in kv.value.decode()
    health = [(c.cluster, c.now) for e, r in found if e.by == "propagator" for c in r.changes
              if c.what == "health"]
    assert health.index(("default/paris", "removed")) > health.index(
        ("default/dresden", "Healthy")), health
    # kubectl's READY, summed over the clusters
    apps = out.split("# where each application runs, and how much of it is available")[1]
    assert "READY" in apps.splitlines()[1]
    assert any(line.split()[0] == "api" and "4/4" in line for line in apps.splitlines()[2:7])

    # the console the demo printed serves the fleet, with the token it left beside its state
    url = re.findall(r"demo: the console: (http://\S+/)", out)[0]
    token = (Path(demo_env["BERTH_DEMO_DIR"]) / "console-token").read_text().strip()
    assert oct((Path(demo_env["BERTH_DEMO_DIR"]) / "console-token").stat().st_mode)[-3:] == "600"
    assert requests.get(url + "api/fleet", timeout=10).status_code == 401
    fleet = requests.get(url + "api/fleet", headers={"Authorization": f"Bearer {token}"},
                         timeout=10).json()
    assert fleet["count"] == 3 and fleet["states"] == {"ONLINE": 3}
    web = requests.get(url + "api/applications/default/web",
                       headers={"Authorization": f"Bearer {token}"}, timeout=10).json()
    assert web["decision"]["targets"][0]["name"] == "dresden"
    assert any(r["event"] == "Moved" for r in web["ledger"])

    stopped = run("--stop", env=demo_env, timeout=120)
    assert stopped.returncode == 0, stopped.stderr
    assert not any(alive(p) for p in pids)
    assert not (Path(demo_env["BERTH_DEMO_DIR"]) / "state.json").exists()
    assert all(not Path(d).exists() for d in state["dirs"])
