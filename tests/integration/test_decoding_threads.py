"""The propagator that died at start with a segmentation fault: the cause, and its fix.

msgspec builds what it knows of a Struct class the first time a decoder for it is made
(or ``decode(..., type=)``/``convert`` is called) and caches it on the class; for a
class written with ``from __future__ import annotations`` that means evaluating its
annotations — Python code, between whose bytecodes another thread can run. Two threads
doing it for the same class at once use a half-built cache and crash the process. The
propagator's probes (a pool of threads, each decoding the cluster's answers for the
first time while the others do TLS) did exactly that. berth builds every decoder through
``berth.store.codec.decoder``, under one lock (``codec.py``).
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from berth.store import EtcdConfig, Store, encode, keys
from berth_testkit.scheduler_env import PropagatorProcess
from berth_testkit.servers.etcd import ROOT, EtcdServer
from berth_testkit.servers.kube import KubeCluster
from berth_testkit.servers.serving import serving

MODELS = "\n".join(["from __future__ import annotations", "import msgspec", *(
    f"class L{j}(msgspec.Struct):\n    a: int = 0\n    b: list[str] = []\n"
    f"    c: dict[str, int] = {{}}\n    d: L{j + 1} | None = None\n    e: list[L{j + 1}] = []"
    for j in range(30)), "class L30(msgspec.Struct):\n    z: int = 0",
    "class Top(msgspec.Struct):\n    items: list[L0] = []\n    meta: dict[str, L5] = {}"]) + "\n"

# ``once()`` run by 8 threads released together
ALL_AT_ONCE = """
go = threading.Event()
def work():
    go.wait()
    once()
threads = [threading.Thread(target=work) for _ in range(8)]
for t in threads:
    t.start()
go.set()
for t in threads:
    t.join()
"""

RACE = """
import sys, threading
sys.setswitchinterval(1e-6)  # switch threads as often as possible: the race shows
sys.path[:0] = [sys.argv[2], sys.argv[3]]
import msgspec
from models import Top
from berth.store.codec import typed
data = msgspec.json.encode({"items": [{"a": 1, "d": {"a": 2}}], "meta": {"x": {"a": 3}}})
def once():
    if sys.argv[1] == "codec":
        typed(data, Top)
    else:
        msgspec.json.decode(data, type=Top)
""" + ALL_AT_ONCE


def crashes(tmp_path: Path, mode: str, runs: int, *, until_one: bool = False) -> int:
    """How many of ``runs`` runs crashed (``until_one``: stop at the first that does)."""
    (tmp_path / "models.py").write_text(MODELS)
    (tmp_path / "race.py").write_text(RACE)
    out = 0
    for _ in range(runs):
        done = subprocess.run([sys.executable, "-X", "faulthandler", str(tmp_path / "race.py"),
                               mode, str(tmp_path), str(ROOT)], capture_output=True, text=True,
                              timeout=60)
        assert "Error" not in done.stderr or "Fatal Python error" in done.stderr, done.stderr
        out += done.returncode != 0
        if out and until_one:
            break
    return out


def test_first_decodes_of_a_class_from_threads_crash_msgspec(tmp_path: Path) -> None:
    """The cause, still there in the msgspec berth pins (if this fails, msgspec fixed it:
    the lock in codec.py may go)."""
    assert crashes(tmp_path, "msgspec", 20, until_one=True) > 0


def test_never_through_berths_codec(tmp_path: Path) -> None:
    assert crashes(tmp_path, "codec", 40) == 0


KUBECONFIGS = """
import sys, threading
sys.setswitchinterval(1e-6)
sys.path[:0] = [sys.argv[2]]
if sys.argv[1] == "berth":
    import berth.controllers.propagator.kube  # builds lightkube's kubeconfig types once
from lightkube import KubeConfig
kc = {"apiVersion": "v1", "kind": "Config", "current-context": "c",
      "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
      "clusters": [{"name": "k", "cluster": {"server": "https://127.0.0.1:1"}}],
      "users": [{"name": "u", "user": {"token": "t"}}]}
def once():
    KubeConfig.from_dict(kc)
""" + ALL_AT_ONCE


def kubeconfig_crashes(tmp_path: Path, mode: str, runs: int, *, until_one: bool = False
                       ) -> int:
    """How many of ``runs`` runs crashed (``until_one``: stop at the first that does)."""
    (tmp_path / "kubeconfigs.py").write_text(KUBECONFIGS)
    out = 0
    for _ in range(runs):
        out += subprocess.run([sys.executable, str(tmp_path / "kubeconfigs.py"), mode,
                               str(ROOT)], capture_output=True, timeout=60).returncode != 0
        if out and until_one:
            break
    return out


def test_lightkube_reads_kubeconfigs_from_threads_only_once_berth_built_its_types(
        tmp_path: Path) -> None:
    """lightkube reads a kubeconfig with msgspec.convert into its own types: the
    observer's probe threads reading their clusters' kubeconfigs at start crashed the
    propagator (seen in the fault table, 2026-11-27; 30 of 40 runs of this reproducer
    crash without berth). Importing berth's kube module builds those types first."""
    assert kubeconfig_crashes(tmp_path, "lightkube", 20, until_one=True) > 0  # still there
    assert kubeconfig_crashes(tmp_path, "berth", 40) == 0


@pytest.fixture(scope="module")
def kube() -> object:
    yield from serving(lambda: KubeCluster("probes", nodes=0))


def test_the_propagator_starts_against_ten_clusters_again_and_again(
        etcd_server: EtcdServer, tmp_path: Path, kube: KubeCluster) -> None:
    """The propagator as it died: ten clusters probed at once from its start, under
    ``-X faulthandler``; every start must reach every cluster ONLINE and stop cleanly."""
    store = Store(EtcdConfig(url=etcd_server.url))
    store.call("kv/deleterange", {"key": "AA==", "range_end": "AA=="}, "wipe")
    for i in range(10):
        store.create(keys.resource_key("Cluster", f"c{i}", "default"), encode({
            "api": "kubernetes", "kind": "Cluster",
            "metadata": {"name": f"c{i}", "namespace": "default"},
            "spec": {"kubeconfig": kube.kubeconfig()}}))
    config = "probe_interval: 0.5\nprobe_concurrency: 10\n"
    for run in range(20):
        for i in range(10):  # each run observes from scratch
            kv = store.get(keys.status_key("Cluster", "default", f"c{i}"))
            if kv is not None:
                store.delete(kv.key)
        p = PropagatorProcess(etcd_server.url, tmp_path, config=config, name=f"r{run}",
                              env={"PYTHONFAULTHANDLER": "1"})
        p.start()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            online = sum(1 for i in range(10) if (kv := store.get(
                keys.status_key("Cluster", "default", f"c{i}"))) and b'"ONLINE"' in kv.value)
            if online == 10 or (p.proc is not None and p.proc.poll() is not None):
                break
            time.sleep(0.1)
        code = p.stop()
        assert "Fatal Python error" not in p.output(), p.output()[-3000:]
        assert online == 10 and code == 0, f"run {run}: {online}/10 ONLINE, exit {code}"
    store.close()
