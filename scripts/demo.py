"""berth's demo, run by ``scripts/run.sh``: the whole system on this machine.

    python scripts/demo.py start    # start everything, show placements and a move
    python scripts/demo.py stop     # stop what start left running

A three-member etcd cluster, the three berth processes (two replicas each),
three Kubernetes API servers standing for clusters in three locations with
different shares of renewable energy (a static metrics provider), and four
applications: one placed by labels and that metric, one on two clusters spread
over locations (PickN), one needing a custom resource only one cluster has,
one pinned by label. Each Kubernetes cluster works like one without a
container runtime (``testkit/berth_testkit/servers/kube.py``: kube-controller-manager,
kube-scheduler and kwok's kubelets beside the API server), so the
Deployments get Pods, which become Ready three seconds after they are
scheduled. Then the metric changes and the first application moves without
going down: the timeline shows the new Pods scheduled and Ready on the new
cluster, and only then the old copy removed. Last, a fifth application,
``shop``, on every cluster, gets a new generation through a staged rollout
(helsinki, then dresden, then paris) whose Pods never become Ready in
dresden (the annotation ``kwok.berth.dev/crash-on-dresden`` tells that
cluster's kwok kubelet so, standing for a bad regional setting): the rollout
halts at its deadline before paris is reached, and rolls helsinki back on
its own. ``berth console`` shows it all in a browser (its URL is printed, its
token in ``console-token`` beside the state). Everything keeps running; the
state (pids, directories) is in ``$BERTH_DEMO_DIR`` (default ``demo`` in
setup's cache, ``$BERTH_CACHE`` or ``~/.cache/berth``).
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import requests
import yaml

from berth.store import EtcdConfig, Store, keys
from berth.store.documents import ApplicationState, ApplicationStatus
from berth_testkit.servers.etcd import EtcdCluster
from berth_testkit.servers.kube import KubeCluster

ROOT = Path(__file__).resolve().parents[1]
STATE = Path(os.environ.get("BERTH_DEMO_DIR") or Path(  # in the cache setup.sh used
    os.environ.get("BERTH_CACHE") or Path.home() / ".cache" / "berth") / "demo")
CLUSTERS = {"dresden": "DE", "paris": "FR", "helsinki": "FI"}
PULL = {"helsinki"}  # reached by its agent, which dials etcd (docs/agents.md); no credential
SHARE = {"dresden": 0.3, "paris": 0.8, "helsinki": 0.5}  # renewable share: higher is better
CRD = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
       "metadata": {"name": "crontabs.stable.example.com"},
       "spec": {"group": "stable.example.com", "scope": "Namespaced",
                "names": {"plural": "crontabs", "singular": "crontab", "kind": "CronTab"},
                "versions": [{"name": "v1", "served": True, "storage": True, "schema": {
                    "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields":
                                        True}}}]}}
T0 = time.monotonic()


def say(text: str) -> None:
    print(f"demo [{time.monotonic() - T0:5.1f} s] {text}", flush=True)


def berth(*args: str, etcd: str) -> str:
    done = subprocess.run([sys.executable, "-m", "berth.cli.main", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "BERTH_ETCD": etcd})
    if done.returncode not in (0, 1):
        raise RuntimeError(f"berth {' '.join(args)}: {done.stderr}")
    return done.stdout


def show(title: str, *args: str, etcd: str) -> None:
    print(f"\n$ berth {' '.join(args)}    # {title}")
    print(berth(*args, etcd=etcd).rstrip())


def documents(kube: dict[str, KubeCluster]) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = [
        {"api": "core", "kind": "GlobalMetricsProvider", "metadata": {"name": "energy"},
         "spec": {"type": "static", "static": {"metrics": {
             f"renewable_{c}": v for c, v in SHARE.items()}}}}]
    for c, location in CLUSTERS.items():
        docs.append({"api": "core", "kind": "GlobalMetric", "metadata": {"name": f"renewable_{c}"},
                     "spec": {"min": 0, "max": 1,
                              "provider": {"name": "energy", "metric": f"renewable_{c}"}}})
        reach: dict[str, Any] = {"mode": "Pull"} if c in PULL else {
            "kubeconfig": kube[c].kubeconfig()}
        docs.append({"api": "kubernetes", "kind": "Cluster",
                     "metadata": {"name": c, "namespace": "default",
                                  "labels": {"location": location}},
                     "spec": {**reach,
                              "metrics": [{"name": f"renewable_{c}", "weight": 1.0}],
                              "custom_resources": (["crontabs.stable.example.com"]
                                                   if c == "dresden" else [])}})

    def app(name: str, spec: dict[str, Any], *extra: dict[str, Any]) -> dict[str, Any]:
        manifest = [{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
                     "spec": {"replicas": 2, "selector": {"matchLabels": {"app": name}},
                              "template": {"metadata": {"labels": {"app": name}}, "spec": {
                                  "containers": [{"name": name, "image": "nginx:1.27"}]}}}},
                    *extra]
        return {"api": "kubernetes", "kind": "Application",
                "metadata": {"name": name, "namespace": "default", "labels": {"app": name}},
                "spec": {"manifest": manifest, **spec}}

    docs += [
        app("web", {"constraints": {"cluster": {"labels": ["location in (DE, FR)"]}}}),
        app("api", {"placement": {"policy": "PickN", "numberOfClusters": 2,
                                  "topologySpreadConstraints": [
                                      {"maxSkew": 1, "topologyKey": "location"}]}}),
        app("reports", {"constraints": {"cluster": {"custom_resources": [
            "crontabs.stable.example.com"]}}},
            {"apiVersion": "stable.example.com/v1", "kind": "CronTab",
             "metadata": {"name": "nightly"}, "spec": {"cronSpec": "0 3 * * *"}}),
        app("batch", {"constraints": {"cluster": {"labels": ["location is FI"]}}}),
    ]
    return docs


def session(server: KubeCluster) -> requests.Session:
    s = requests.Session()
    s.trust_env = False
    s.verify = str(server.workdir / "certs" / "apiserver.crt")
    s.headers["Authorization"] = f"Bearer {server.token}"
    return s


def watch(cluster: str, server: KubeCluster, path: str, params: dict[str, str],
          events: queue.Queue[tuple[float, str, str, dict[str, Any]]],
          stop: threading.Event) -> None:
    """Put (time, cluster, event type, object) for what ``path`` holds on ``server`` into
    ``events``: a Kubernetes watch, so no change is missed between two looks."""
    s = session(server)
    with contextlib.suppress(requests.RequestException), \
            s.get(f"{server.url}{path}", params={"watch": "1", "timeoutSeconds": "120",
                                                 **params}, stream=True, timeout=(5, 130)) as r:
        for line in r.iter_lines():
            if stop.is_set():
                return
            event = json.loads(line)
            events.put((time.monotonic(), cluster, event.get("type", ""),
                        event.get("object") or {}))


def web_timeline(kube: dict[str, KubeCluster], change: Callable[[], object],
                 timeout: float = 120.0) -> tuple[bool, int]:
    """Watch web's Deployment and Pods on dresden and paris while ``change`` moves it;
    print each step. Returns whether it ended on dresden alone, and the fewest replicas
    available in all after the change."""
    events: queue.Queue[tuple[float, str, str, dict[str, Any]]] = queue.Queue()
    stop_watching = threading.Event()
    for c in ("dresden", "paris"):
        for path, params in (("/apis/apps/v1/namespaces/default/deployments",
                              {"fieldSelector": "metadata.name=web"}),
                             ("/api/v1/namespaces/default/pods", {"labelSelector": "app=web"})):
            threading.Thread(target=watch, args=(c, kube[c], path, params, events,
                                                 stop_watching), daemon=True).start()
    available: dict[str, int] = {}  # cluster → web's available replicas there
    ready: dict[tuple[str, str], bool] = {}
    with contextlib.suppress(queue.Empty):  # the watches first list what is there now
        while True:
            _, c, _, obj = events.get(timeout=2)
            if obj.get("kind") == "Deployment":
                available[c] = (obj.get("status") or {}).get("availableReplicas", 0)
    print("  before: Deployment web available on "
          + ", ".join(f"{c} {n}/2" for c, n in sorted(available.items())))
    t_change = time.monotonic()
    change()
    fewest = sum(available.values())
    while set(available) != {"dresden"} or available.get("dresden", 0) < 2:
        try:
            at, c, kind, obj = events.get(timeout=max(0.1, timeout - (time.monotonic()
                                                                     - t_change)))
        except queue.Empty:
            print(f"demo: web did not move to dresden within {timeout:.0f} s", file=sys.stderr)
            break
        meta, st = obj.get("metadata") or {}, obj.get("status") or {}
        line = ""
        if obj.get("kind") == "Deployment":
            if kind == "DELETED":
                available.pop(c, None)
                line = "Deployment web removed"
            else:
                n = st.get("availableReplicas", 0)
                if c not in available:
                    line = "Deployment web created"
                elif n != available[c]:
                    line = f"Deployment web {n}/2 available"
                available[c] = n
        elif obj.get("kind") == "Pod" and kind != "DELETED":
            name = meta.get("name", "?")
            is_ready = any(x.get("type") == "Ready" and x.get("status") == "True"
                           for x in st.get("conditions") or [])
            node = (obj.get("spec") or {}).get("nodeName")
            was = ready.get((c, name))
            if node and was is None:
                line = f"Pod {name} scheduled on {node}"
                ready[(c, name)] = False
            if is_ready and not was:
                line = f"Pod {name} Ready"
                ready[(c, name)] = True
        if line:
            fewest = min(fewest, sum(available.values()))
            total = sum(available.values())
            print(f"  +{at - t_change:5.2f} s  {c:8} {line:44} available in all: {total} "
                  "(2 wanted)")
    stop_watching.set()
    return set(available) == {"dresden"}, fewest


def statuses(store: Store) -> dict[str, ApplicationState]:
    """Each application's status, as the propagator wrote it."""
    out = {}
    for kv in store.list_prefix(keys.status_prefix("Application"))[0]:
        st = msgspec.json.decode(kv.value, type=ApplicationStatus)
        out[st.metadata.name] = st.status
    return out


def shop(generation: int) -> dict[str, Any]:
    """The rolled-out application: generation 2's Pods never become Ready in dresden."""
    template: dict[str, Any] = {"labels": {"app": "shop"}}
    if generation == 2:
        template["annotations"] = {"kwok.berth.dev/crash-on-dresden": "yes"}
    return {"api": "kubernetes", "kind": "Application",
            "metadata": {"name": "shop", "namespace": "default"},
            "spec": {"placement": {"policy": "PickAll"},
                     "rollout": {"strategy": "Staged", "progressDeadline": "15s",
                                 "onFailure": "Rollback", "stages": [
                                     {"name": "canary", "clusters": {"names": ["helsinki"]},
                                      "soak": "5s"},
                                     {"name": "germany", "clusters": {"matchLabels": {
                                         "location": "DE"}}},
                                     {"name": "france", "clusters": {"names": ["paris"]}}]},
                     "manifest": [{"apiVersion": "apps/v1", "kind": "Deployment",
                                   "metadata": {"name": "shop"},
                                   "spec": {"replicas": 2,
                                            "selector": {"matchLabels": {"app": "shop"}},
                                            "template": {"metadata": template, "spec": {
                                                "containers": [{"name": "shop", "image":
                                                                f"nginx:1.{26 + generation}"}
                                                               ]}}}}]}}


def staged_rollout(store: Store, etcd: str) -> bool:
    """shop on every cluster, then a new generation staged over them that fails in the
    second stage: it halts there and rolls back, with no one acting."""
    print("\nA staged rollout: shop runs everywhere; its generation 2 goes to helsinki, "
          "then dresden, then paris, and fails in dresden.")
    path = STATE / "shop.yaml"
    path.write_text(yaml.safe_dump(shop(1), sort_keys=False))
    print(berth("apply", "-f", str(path), etcd=etcd).rstrip())
    deadline = time.monotonic() + 120
    while not ((st := statuses(store).get("shop")) and st.state == "RUNNING"
               and len(st.running_on) == 3):
        if time.monotonic() > deadline:
            print("demo: shop not RUNNING on the three clusters in 120 s", file=sys.stderr)
            return False
        time.sleep(1)
    say("shop RUNNING generation 1 on dresden, helsinki and paris")
    path.write_text(yaml.safe_dump(shop(2), sort_keys=False))
    print(berth("apply", "-f", str(path), etcd=etcd).rstrip())
    last = ""
    deadline = time.monotonic() + 180
    while True:
        st = statuses(store)["shop"]
        r = st.rollout
        where = ", ".join(f"{c.split('/')[1]} {a.generation}"
                          for c, a in sorted(st.applied.items()))
        now = f"{r.phase if r else '-'}: {where}" + (f" ({r.reason})" if r and r.reason
                                                      else "")
        if now != last:
            say(f"rollout of generation 2 {now}")
            last = now
        if r is not None and r.generation == 2 and r.phase == "RolledBack" and all(
                a.generation == 1 and a.health == "Healthy" for a in st.applied.values()):
            break
        if time.monotonic() > deadline:
            print(f"demo: the rollout did not roll back in 180 s: {now}", file=sys.stderr)
            return False
        time.sleep(0.5)
    say("halted at dresden's deadline before paris was reached, and rolled back: every "
        "cluster runs generation 1 again")
    show("the rollout, per stage and cluster", "rollout", "status", "default/shop",
         etcd=etcd)
    show("the manifests kept", "rollout", "history", "default/shop", etcd=etcd)
    return True


def start() -> int:
    if (STATE / "state.json").exists():
        print(f"demo: already running (state in {STATE}); scripts/run.sh --stop first",
              file=sys.stderr)
        return 1
    STATE.mkdir(parents=True, exist_ok=True)
    logs = STATE / "logs"
    logs.mkdir(exist_ok=True)
    state: dict[str, Any] = {"pids": [], "dirs": []}

    def remember() -> None:
        (STATE / "state.json").write_text(json.dumps(state))

    etcd = EtcdCluster(3)
    etcd.start()
    state["pids"] += [m.proc.pid for m in etcd.members if m.proc]
    state["dirs"] += [str(m.workdir) for m in etcd.members]
    state["etcd"] = etcd.url
    remember()
    say(f"etcd: three members up ({etcd.url})")

    kube: dict[str, KubeCluster] = {}
    failed: list[str] = []

    def up(name: str) -> None:
        try:
            kube[name] = KubeCluster(name, ready_delay=3.0).start()
        except Exception as exc:
            failed.append(f"{name}: {exc}")
    threads = [threading.Thread(target=up, args=(c,)) for c in CLUSTERS]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for server in kube.values():
        state["pids"] += list(server.pids().values())
        state["dirs"] += [str(server.workdir), str(server.etcd.workdir)]
    remember()
    if failed:
        print("demo: a Kubernetes API server did not start: " + "; ".join(failed),
              file=sys.stderr)
        return 1
    say("Kubernetes clusters up (API server, controllers, scheduler, two kwok nodes each): "
        + ", ".join(
        f"{c} ({CLUSTERS[c]}) {kube[c].url}" for c in CLUSTERS))
    s = session(kube["dresden"])
    s.post(f"{kube['dresden'].url}/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
           json=CRD, timeout=10).raise_for_status()
    say("custom resource crontabs.stable.example.com installed on dresden only")

    # untracked_after: the CronTab has no condition to judge it by (docs/propagator.md "Health")
    configs = {"scheduler": "", "propagator": "probe_interval: 2\nuntracked_after: 5\n",
               "metrics-cache": "poll_interval: 2\n"}
    for process, config in configs.items():
        path = STATE / f"{process}.yaml"
        path.write_text(config)
        for replica in (1, 2):
            with open(logs / f"{process}-{replica}.log", "ab") as out:
                proc = subprocess.Popen(
                    [sys.executable, "-m", "berth.cli.main", "--log-level", "INFO", process,
                     "--etcd", etcd.url, "--http", "127.0.0.1:0", "--config", str(path)],
                    stdout=out, stderr=subprocess.STDOUT, cwd=ROOT, start_new_session=True)
            state["pids"].append(proc.pid)
    for c in sorted(PULL):  # its agent, with the cluster's own credentials alone
        kubeconfig = STATE / f"{c}.kubeconfig"
        fd = os.open(kubeconfig, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(kube[c].kubeconfig(), f)
        path = STATE / "agent.yaml"
        path.write_text("probe_interval: 2\nuntracked_after: 5\n")
        with open(logs / f"agent-{c}.log", "ab") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "berth.cli.main", "--log-level", "INFO", "agent",
                 "--cluster", f"default/{c}", "--kubeconfig", str(kubeconfig),
                 "--etcd", etcd.url, "--http", "127.0.0.1:0", "--config", str(path)],
                stdout=out, stderr=subprocess.STDOUT, cwd=ROOT, start_new_session=True)
        state["pids"].append(proc.pid)
    remember()
    say(f"berth: scheduler, propagator, metrics-cache, two replicas each; "
        f"{', '.join(sorted(PULL))} in Pull mode, reached by its agent alone (logs in {logs})")
    console_url = start_console(etcd.url, logs, state)
    remember()
    say(f"berth console: {console_url} (its token, for approvals: {STATE / 'console-token'})")

    seed = STATE / "demo.yaml"
    fd = os.open(seed, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # holds tokens
    with os.fdopen(fd, "w") as f:
        yaml.safe_dump_all(documents(kube), f, sort_keys=False)
    print(berth("apply", "-f", str(seed), etcd=etcd.url).rstrip())
    say("applied the demo's documents (credentials stored apart, under secrets/)")
    store = Store(EtcdConfig(url=etcd.url))
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        now = statuses(store)
        if len(now) == 4 and all(v.state == "RUNNING" for v in now.values()):
            break
        time.sleep(1)
    else:
        print("demo: not all applications RUNNING after 180 s: "
              + ", ".join(f"{k} {v.state}" for k, v in now.items())
              + f"; the processes' logs are in {logs}; stop with: scripts/run.sh --stop",
              file=sys.stderr)
        return 1
    say("all four applications RUNNING")
    show("the clusters, as the observer sees them", "get", "clusters", "-o", "wide",
         etcd=etcd.url)
    show("where each application runs, and how much of it is available", "get", "apps",
         etcd=etcd.url)
    show("... per cluster", "get", "apps", "-o", "wide", etcd=etcd.url)
    show("why web runs where it does", "explain", "application", "default/web",
         etcd=etcd.url)

    before = [r.name for r in statuses(store)["web"].running_on]
    print(f"\nThe sun comes out over Dresden: renewable_dresden 0.3 → 0.95 "
          f"(web runs on {', '.join(before)}).")
    SHARE["dresden"] = 0.95
    provider = documents(kube)[0]
    (STATE / "energy.yaml").write_text(yaml.safe_dump(provider, sort_keys=False))
    moved, fewest = web_timeline(kube, lambda: berth(
        "apply", "-f", str(STATE / "energy.yaml"), etcd=etcd.url))
    if moved:
        print(f"  never down: at least {fewest}/2 replicas of web were available at every "
              "step; the old copy went only once the new one was available")
    show("after the move", "get", "app", "web", "-o", "wide", etcd=etcd.url)
    if not staged_rollout(store, etcd.url):
        return 1
    remember()
    if "BERTH_RUN_STARTED" in os.environ:  # set by scripts/run.sh: the time with setup
        took = time.time() - float(os.environ["BERTH_RUN_STARTED"])
        print(f"\ndemo: {took:.0f} s from the start of scripts/run.sh, setup included")
    print(f"\ndemo: the console: {console_url} (paste the token in "
          f"{STATE / 'console-token'} to approve, pause or resume a rollout)")
    print(f"\ndemo: everything keeps running (BERTH_ETCD={etcd.url}); try `berth get apps` "
          f"with it.\ndemo: stop it all with: scripts/run.sh --stop")
    return 0


def start_console(etcd: str, logs: Path, state: dict[str, Any]) -> str:
    """``berth console`` on 127.0.0.1:9190 (any free port if that one is taken), with a
    new token (mode 0600) that lets the reader act; its URL."""
    token = STATE / "console-token"
    fd = os.open(token, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_urlsafe(24) + "\n")
    log = logs / "console.log"
    for listen in ("127.0.0.1:9190", "127.0.0.1:0"):
        began = log.stat().st_size if log.exists() else 0
        with open(log, "ab") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "berth.cli.main", "console", "--etcd", etcd,
                 "--listen", listen, "--token-file", str(token)],
                stdout=out, stderr=subprocess.STDOUT, cwd=ROOT, start_new_session=True)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and proc.poll() is None:
            with open(log, "rb") as f:
                f.seek(began)
                found = re.findall(r"berth console: (http://\S+/)", f.read().decode(
                    errors="replace"))
            if found:
                state["pids"].append(proc.pid)
                return str(found[0])
            time.sleep(0.1)
        if proc.poll() is None:
            proc.kill()
    raise SystemExit(f"demo: the console did not start (its log: {log})")


def _gone(pid: int, until: float) -> bool:
    """Wait until process ``pid`` has ended (or is a zombie), at most until ``until``."""
    while True:
        try:
            os.kill(pid, 0)
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except (ProcessLookupError, FileNotFoundError):
            return True
        if time.monotonic() >= until:
            return False
        time.sleep(0.1)


def stop() -> int:
    path = STATE / "state.json"
    if not path.exists():
        print("demo: nothing is running", file=sys.stderr)
        return 0
    state = json.loads(path.read_text())
    for pid in state["pids"]:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 20
    for pid in state["pids"]:
        if not _gone(pid, deadline):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            _gone(pid, time.monotonic() + 10)  # a kill takes effect a moment later
    for d in state["dirs"]:
        shutil.rmtree(d, ignore_errors=True)
    path.unlink()
    print(f"demo: stopped {len(state['pids'])} processes and removed their data", file=sys.stderr)
    return 0


if __name__ == "__main__":
    if sys.argv[1:] == ["start"]:
        sys.exit(start())
    if sys.argv[1:] == ["stop"]:
        sys.exit(stop())
    print(__doc__, file=sys.stderr)
    sys.exit(2)
