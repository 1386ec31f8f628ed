"""A working Kubernetes cluster on loopback, without a container runtime.

``scripts/install-kube.sh`` builds kube-apiserver, kube-controller-manager and
kube-scheduler from one k8s.io/kubernetes release and kwok (cached in
``~/.cache/berth``). A :class:`KubeCluster` runs them together:

* kube-apiserver with its own etcd (3.6: Debian's 3.4 is below what current
  Kubernetes supports), as controller-runtime's envtest runs it: a secure
  port on 127.0.0.1, a self-signed serving certificate, a static admin token
  (group ``system:masters``), a service-account key and issuer;
* kube-controller-manager with the workload controllers (Deployments,
  ReplicaSets, StatefulSets, DaemonSets, Jobs and their TTL), the garbage
  collector and the namespace controller;
* kube-scheduler, which binds Pods to Nodes as in any cluster;
* kwok, which plays every kubelet: it brings the Nodes the cluster is made
  with to Ready and runs each Pod through its lifecycle — Running and Ready
  ``ready_delay`` seconds after it was bound (a Job's Pods then Succeeded),
  deleted when asked. A Pod whose template carries the annotation
  ``kwok.berth.dev/crash`` (or every Pod, with ``pods="crash"``), or
  ``kwok.berth.dev/crash-on-<the cluster's name>`` on that cluster only, runs
  but never becomes Ready: its container waits in ``CrashLoopBackOff``. A Job's
  Pod annotated ``kwok.berth.dev/runs`` runs Ready and never completes.

So a Deployment applied there gets Pods, and they become Ready: what berth
calls available can be observed, not assumed. ``stop`` and ``start`` keep the
ports and the data; ``nodes=0`` makes a bare API server (objects stored,
nothing run).
"""

from __future__ import annotations

import base64
import json
import secrets
import shutil
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from functools import cached_property
from pathlib import Path
from typing import Any

import urllib3

from berth_testkit.servers.etcd import (
    ROOT,
    EtcdServer,
    ServerUnavailable,
    free_port,
    stop_process,
    tail,
)
from berth_testkit.servers.launch import spawn

INSTALL = ROOT / "scripts" / "install-kube.sh"
HOW = ("a Kubernetes control plane and kwok are needed: run scripts/install-kube.sh "
       "(builds them from source with Go, about six minutes the first time)")
CRASH = "kwok.berth.dev/crash"  # a Pod annotated so runs, but never becomes Ready
CRASH_ON = CRASH + "-on-"  # + a cluster's name: ... on that cluster only
RUNS = "kwok.berth.dev/runs"  # a Job's Pod annotated so runs Ready and never completes
# a list as the objects' metadata alone (what a sampler that reads names needs)
METADATA = "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"
CONTROLLERS = ("deployment-controller", "replicaset-controller", "statefulset-controller",
               "daemonset-controller", "job-controller", "ttl-after-finished-controller",
               "garbage-collector-controller", "namespace-controller",
               "pod-garbage-collector-controller", "disruption-controller")
_bindir: Path | None = None


def kube_bindir() -> Path:
    global _bindir
    if _bindir is None:
        try:
            out = subprocess.run(["bash", str(INSTALL)], check=True, capture_output=True,
                                 text=True, timeout=3600)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
            raise ServerUnavailable(
                f"{INSTALL.name} failed: {str(getattr(exc, 'stderr', ''))[-2000:]}\n{HOW}") from None
        _bindir = Path(out.stdout.strip().splitlines()[-1])
    return _bindir


def _stage(name: str, kind: str, match: list[dict[str, Any]], status: str, *,
           delay_ms: int = 0, jitter_ms: int = 0, delete: bool = False,
           empty_finalizers: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {"resourceRef": {"apiGroup": "v1", "kind": kind},
                            "selector": {"matchExpressions": match}, "next": {}}
    if delay_ms or jitter_ms:
        spec["delay"] = {"durationMilliseconds": delay_ms,
                         "jitterDurationMilliseconds": delay_ms + jitter_ms}
    if status:
        spec["next"]["statusTemplate"] = status
    if empty_finalizers:
        spec["next"]["finalizers"] = {"empty": True}
    if delete:
        spec["next"]["delete"] = True
    return {"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Stage",
            "metadata": {"name": name}, "spec": spec}


def _is(key: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": "In", "values": list(values)}


def _has(key: str) -> dict[str, Any]:
    return {"key": key, "operator": "Exists"}


def _lacks(key: str) -> dict[str, Any]:
    return {"key": key, "operator": "DoesNotExist"}


_READY = "'.status.conditions.[] | select( .type == \"Ready\" ) | .status'"[1:-1]

_NODE_UP = """\
{{ $now := Now }}
conditions:
{{ range NodeConditions }}
- lastHeartbeatTime: {{ $now | Quote }}
  lastTransitionTime: {{ $now | Quote }}
  message: {{ .message | Quote }}
  reason: {{ .reason | Quote }}
  status: {{ .status | Quote }}
  type: {{ .type | Quote }}
{{ end }}
addresses:
- address: {{ NodeIP | Quote }}
  type: InternalIP
- address: {{ .metadata.name | Quote }}
  type: Hostname
allocatable:
{{ YAML .status.allocatable 1 }}
capacity:
{{ YAML .status.capacity 1 }}
nodeInfo:
  architecture: amd64
  kubeletVersion: fake
  operatingSystem: linux
phase: Running
"""

_NODE_BEAT = """\
{{ $now := Now }}
conditions:
{{ range .status.conditions }}
- lastHeartbeatTime: {{ $now | Quote }}
  lastTransitionTime: {{ .lastTransitionTime | Quote }}
  message: {{ .message | Quote }}
  reason: {{ .reason | Quote }}
  status: {{ .status | Quote }}
  type: {{ .type | Quote }}
{{ end }}
"""


def _pod_status(ready: bool) -> str:
    """Running; Ready, or with every container waiting in CrashLoopBackOff."""
    flag = '"True"' if ready else '"False"'
    state = ("running:\n      startedAt: {{ $now | Quote }}" if ready else
             "waiting:\n      reason: CrashLoopBackOff\n      message: back-off 10s "
             "restarting failed container {{ $c.name }}")
    return f"""\
{{{{ $now := Now }}}}
conditions:
- {{type: Initialized, status: "True", lastTransitionTime: {{{{ $now | Quote }}}}}}
- {{type: Ready, status: {flag}, lastTransitionTime: {{{{ $now | Quote }}}}}}
- {{type: ContainersReady, status: {flag}, lastTransitionTime: {{{{ $now | Quote }}}}}}
- {{type: PodScheduled, status: "True", lastTransitionTime: {{{{ $now | Quote }}}}}}
containerStatuses:
{{{{ range $c := .spec.containers }}}}
- image: {{{{ $c.image | Quote }}}}
  name: {{{{ $c.name | Quote }}}}
  ready: {"true" if ready else "false"}
  restartCount: {"0" if ready else "3"}
  started: {"true" if ready else "false"}
  state:
    {state}
{{{{ end }}}}
hostIP: {{{{ NodeIPWith .spec.nodeName | Quote }}}}
podIP: {{{{ PodIPWith .spec.nodeName false .metadata.uid .metadata.name .metadata.namespace | Quote }}}}
phase: Running
startTime: {{{{ $now | Quote }}}}
"""


_POD_DONE = """\
{{ $now := Now }}
conditions:
- {type: Ready, status: "False", reason: PodCompleted, lastTransitionTime: {{ $now | Quote }}}
- {type: ContainersReady, status: "False", reason: PodCompleted, lastTransitionTime: {{ $now | Quote }}}
containerStatuses:
{{ range $c := .spec.containers }}
- image: {{ $c.image | Quote }}
  name: {{ $c.name | Quote }}
  ready: false
  restartCount: 0
  started: false
  state:
    terminated: {exitCode: 0, reason: Completed, startedAt: {{ $now | Quote }}, finishedAt: {{ $now | Quote }}}
{{ end }}
phase: Succeeded
"""


def stages(ready_delay: float, pods: str, name: str = "") -> list[dict[str, Any]]:
    """kwok's Stages: what happens to Nodes and Pods, and after how long."""
    delay = int(ready_delay * 1000)
    bound = [_lacks(".metadata.deletionTimestamp"), _has(".spec.nodeName"),
             _is(".status.phase", "Pending")]
    crash = [_has(f'.metadata.annotations["{CRASH}"]')]
    crash_here = [_has(f'.metadata.annotations["{CRASH_ON}{name}"]')]
    fine = [_lacks(f'.metadata.annotations["{CRASH}"]'),
            _lacks(f'.metadata.annotations["{CRASH_ON}{name}"]')]
    out = [
        _stage("node-up", "Node", [{"key": _READY, "operator": "NotIn", "values": ["True"]}],
               _NODE_UP),
        _stage("node-heartbeat", "Node", [_is(".status.phase", "Running"), _is(_READY, "True")],
               _NODE_BEAT, delay_ms=30_000, jitter_ms=10_000),
        _stage("pod-crash", "Pod", bound + ([] if pods == "crash" else crash),
               _pod_status(False), delay_ms=delay),
        _stage("pod-crash-here", "Pod", bound + crash_here, _pod_status(False),
               delay_ms=delay),
        _stage("pod-delete", "Pod", [_has(".metadata.deletionTimestamp")], "",
               delay_ms=100, delete=True, empty_finalizers=True),
        _stage("pod-complete", "Pod", [
            _lacks(".metadata.deletionTimestamp"), _is(".status.phase", "Running"),
            _is(_READY, "True"), _is(".metadata.ownerReferences.[].kind", "Job"),
            _lacks(f'.metadata.annotations["{RUNS}"]')],
            _POD_DONE, delay_ms=1000),
    ]
    if pods != "crash":
        out.append(_stage("pod-ready", "Pod", bound + fine, _pod_status(True), delay_ms=delay))
    return out


class KubeCluster:
    """A control plane, its controllers and scheduler, and ``nodes`` kwok Nodes."""

    def __init__(self, name: str = "cluster", *, nodes: int = 2, ready_delay: float = 1.0,
                 pods: str = "ready", node_cpu: str = "16", node_memory: str = "64Gi",
                 node_pods: int = 110, node_gpus: int = 0) -> None:
        if pods not in ("ready", "crash"):
            raise ValueError(f"pods: 'ready' or 'crash', not {pods!r}")
        self.name = name
        bindir = kube_bindir()
        self.binary = bindir / "kube-apiserver"
        self.bindir = bindir
        self.workdir = Path(tempfile.mkdtemp(prefix=f"berth-kube-{name}-"))
        self.port = free_port()
        self.url = f"https://127.0.0.1:{self.port}"
        self.token = secrets.token_hex(16)
        self.nodes, self.ready_delay, self.pods = nodes, ready_delay, pods
        self.node_resources = {"cpu": node_cpu, "memory": node_memory, "pods": str(node_pods)}
        if node_gpus:
            self.node_resources["nvidia.com/gpu"] = str(node_gpus)
        (self.workdir / "tokens.csv").write_text(f'{self.token},admin,admin,"system:masters"\n')
        subprocess.run(["openssl", "genrsa", "-out", str(self.workdir / "sa.key"), "2048"],
                       check=True, capture_output=True)
        subprocess.run(["openssl", "rsa", "-in", str(self.workdir / "sa.key"), "-pubout",
                        "-out", str(self.workdir / "sa.pub")], check=True, capture_output=True)
        self.etcd = EtcdServer(progress_interval="5s").start()
        self.proc: subprocess.Popen[bytes] | None = None  # kube-apiserver
        self.others: dict[str, subprocess.Popen[bytes]] = {}  # controllers, scheduler, kwok

    # -- running ---------------------------------------------------------------------

    def start(self, timeout: float = 90.0) -> KubeCluster:
        """Start whatever is not running; return once the API serves and the Nodes
        are Ready."""
        began = time.monotonic()
        if self.etcd.proc is None or self.etcd.proc.poll() is not None:
            self.etcd.start()
        if self.proc is None or self.proc.poll() is not None:
            self._start_apiserver(timeout)
        if self.nodes:
            self._write_kubeconfig()
            for name, args in self._component_args().items():
                proc = self.others.get(name)
                if proc is None or proc.poll() is not None:
                    with open(self.workdir / f"{name}.log", "ab") as log:
                        self.others[name] = spawn(args, stdout=log,
                                                             stderr=subprocess.STDOUT)
            for i in range(self.nodes):  # again after a restart: its data may be gone
                self.add_node(f"{self.name}-node-{i}")
            # kwok first waits for the API server to be ready: on a loaded machine that
            # can take a while after the API server said so to us
            self._wait_nodes_ready(max(began + timeout, time.monotonic() + 60))
        return self

    def _start_apiserver(self, timeout: float) -> None:
        w = self.workdir
        args = [
            str(self.binary), f"--etcd-servers={self.etcd.url}",
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
            f"--secure-port={self.port}", f"--cert-dir={w / 'certs'}",
            f"--token-auth-file={w / 'tokens.csv'}", "--authorization-mode=RBAC",
            f"--service-account-key-file={w / 'sa.pub'}",
            f"--service-account-signing-key-file={w / 'sa.key'}",
            "--service-account-issuer=https://kubernetes.default.svc",
            "--service-cluster-ip-range=10.0.0.0/16", "--allow-privileged=true",
            "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition", "--v=0",
        ]
        with open(w / "kube-apiserver.log", "ab") as log:
            self.proc = spawn(args, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ServerUnavailable(f"kube-apiserver exited:\n{self.log_tail()}")
            if self.ready():
                return
            time.sleep(0.3)
        self.stop()
        raise ServerUnavailable(f"kube-apiserver not ready in {timeout}s:\n{self.log_tail()}")

    def _write_kubeconfig(self) -> None:
        (self.workdir / "kubeconfig").write_text(json.dumps(self.kubeconfig()))
        (self.workdir / "stages.yaml").write_text("\n---\n".join(
            json.dumps(s) for s in stages(self.ready_delay, self.pods, self.name)))

    def _component_args(self) -> dict[str, list[str]]:
        kc = str(self.workdir / "kubeconfig")
        b = self.bindir
        return {
            "kube-controller-manager": [
                str(b / "kube-controller-manager"), f"--kubeconfig={kc}",
                "--leader-elect=false", "--secure-port=0",
                f"--controllers={','.join(CONTROLLERS)}",
                "--concurrent-deployment-syncs=10", "--concurrent-replicaset-syncs=10",
                "--kube-api-qps=200", "--kube-api-burst=400", "--v=0"],
            "kube-scheduler": [
                str(b / "kube-scheduler"), f"--kubeconfig={kc}", "--leader-elect=false",
                "--secure-port=0", "--kube-api-qps=200", "--kube-api-burst=400", "--v=0"],
            "kwok": [
                str(b / "kwok"), f"--kubeconfig={kc}", f"--config={self.workdir / 'stages.yaml'}",
                "--manage-all-nodes=true", "--node-ip=10.1.0.1", "--cidr=10.2.0.0/16",
                "--server-address=", "--node-lease-duration-seconds=0"],
        }

    def add_node(self, name: str, **resources: str) -> None:
        """A Node kwok keeps Ready, offering the cluster's node resources (or these:
        ``cpu="4", memory="8Gi"``)."""
        offers = {**self.node_resources, **resources}
        node = {"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "labels": {
                    "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                    "type": "kwok"}, "annotations": {"kwok.x-k8s.io/node": "fake"}},
                "status": {"allocatable": offers, "capacity": offers}}
        self.request("POST", "/api/v1/nodes", node, ok=(201, 409))

    def _wait_nodes_ready(self, deadline: float) -> None:
        while True:
            for name, proc in self.others.items():
                if proc.poll() is not None:
                    raise ServerUnavailable(f"{name} exited:\n{tail(self.workdir / f'{name}.log')}")
            listed = self.request("GET", "/api/v1/nodes")
            ready = sum(1 for n in listed.get("items", []) if any(
                c.get("type") == "Ready" and c.get("status") == "True"
                for c in n.get("status", {}).get("conditions", [])))
            if ready >= self.nodes:
                return
            if time.monotonic() > deadline:
                self.stop()
                raise ServerUnavailable(
                    f"cluster {self.name}: {ready}/{self.nodes} Nodes Ready in time; kwok:\n"
                    f"{tail(self.workdir / 'kwok.log')}")
            time.sleep(0.2)

    # -- talking to it ----------------------------------------------------------------

    def _context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        return ctx

    @cached_property
    def _pool(self) -> urllib3.PoolManager:
        """Kept-alive connections to the API, shared by the test's threads: samplers call
        it many times a second, and a TLS handshake each time cost the API server and the
        test more CPU than the calls themselves. The API server's own certificate (made
        at its first start, kept across restarts) is the one trusted. A connection the
        server dropped (it was stopped and started) is noticed when taken from the pool,
        and an idempotent call on one that dies under it is made once more."""
        tls = ssl.create_default_context(cafile=str(self.workdir / "certs" / "apiserver.crt"))
        return urllib3.PoolManager(num_pools=2, maxsize=8, ssl_context=tls,
                                   retries=urllib3.Retry(total=1, connect=1, read=1,
                                                         redirect=0, status=0))

    def request(self, method: str, path: str, body: dict[str, Any] | None = None,
                ok: tuple[int, ...] = (200, 201), content: str = "json",
                accept: str = "application/json") -> dict[str, Any]:
        """One call to the API as the admin; the answer decoded. ``content="merge"``: the
        body is a merge patch; ``accept``: :data:`METADATA` lists names and labels alone.
        An API that does not answer raises OSError (as a refused connection does), one
        that refuses the call :class:`ServerUnavailable`."""
        data = json.dumps(body).encode() if body is not None else None
        kind = "application/merge-patch+json" if content == "merge" else "application/json"
        try:
            r = self._pool.request(method, f"{self.url}{path}", body=data, timeout=10,
                                   headers={"Authorization": f"Bearer {self.token}",
                                            "Content-Type": kind, "Accept": accept})
        except urllib3.exceptions.HTTPError as exc:  # no answer: as urllib said it
            raise urllib.error.URLError(f"{method} {path}: {exc}") from exc
        if r.status >= 300:
            if r.status in ok:
                return {}
            raise ServerUnavailable(f"{method} {path}: HTTP {r.status}: {r.data[:300]!r}")
        return dict(json.loads(r.data or b"{}"))

    def watch(self, path: str, resource_version: str, timeout: float = 60.0
              ) -> Iterator[dict[str, Any]]:
        """The events of a watch on ``path`` (a list's path, with its query if any) from
        ``resource_version``, as the API server streams them, for at most ``timeout``
        seconds (then it ends, as a watch does). A dropped connection raises OSError; a
        refused watch (410 Gone: the version was compacted) :class:`ServerUnavailable`."""
        join = "&" if "?" in path else "?"  # a path may carry its own query
        try:
            r = self._pool.request(
                "GET", f"{self.url}{path}{join}watch=1&resourceVersion={resource_version}"
                f"&allowWatchBookmarks=true&timeoutSeconds={int(timeout)}",
                headers={"Authorization": f"Bearer {self.token}"}, preload_content=False,
                timeout=urllib3.Timeout(connect=5, read=timeout + 10), retries=False)
        except urllib3.exceptions.HTTPError as exc:
            raise urllib.error.URLError(f"WATCH {path}: {exc}") from exc
        try:
            if r.status != 200:
                raise ServerUnavailable(f"WATCH {path}: HTTP {r.status}: {r.read()[:300]!r}")
            rest = b""
            for chunk in r.stream(None):  # events are lines; a chunk may hold part of one
                *lines, rest = (rest + chunk).split(b"\n")
                for line in lines:
                    if not line.strip():
                        continue
                    event = json.loads(line)
                    if event.get("type") == "ERROR":
                        raise ServerUnavailable(f"WATCH {path}: {event.get('object')}")
                    yield dict(event)
        except urllib3.exceptions.HTTPError as exc:
            raise urllib.error.URLError(f"WATCH {path}: {exc}") from exc
        finally:
            r.release_conn()

    def watches(self, resource: str) -> int:
        """How many watches of ``resource`` (a plural: "pods") the API server holds open
        now, by its own gauge ``apiserver_longrunning_requests`` (every client's)."""
        req = urllib.request.Request(f"{self.url}/metrics",
                                     headers={"Authorization": f"Bearer {self.token}"})
        with urllib.request.urlopen(req, timeout=10, context=self._context()) as r:
            text = r.read().decode()
        return sum(int(float(line.rsplit(" ", 1)[1])) for line in text.splitlines()
                   if line.startswith("apiserver_longrunning_requests{")
                   and f'resource="{resource}"' in line and 'verb="WATCH"' in line
                   and 'subresource=""' in line)

    def ready(self) -> bool:
        req = urllib.request.Request(f"{self.url}/readyz",
                                     headers={"Authorization": f"Bearer {self.token}"})
        try:
            with urllib.request.urlopen(req, timeout=2, context=self._context()) as r:
                return bool(r.status == 200)
        except OSError:
            return False

    def kubeconfig(self) -> dict[str, Any]:
        """A kubeconfig for berth's Cluster spec (the serving CA embedded)."""
        crt = (self.workdir / "certs" / "apiserver.crt").read_bytes()
        return {
            "apiVersion": "v1", "kind": "Config", "current-context": self.name,
            "clusters": [{"name": self.name, "cluster": {
                "server": self.url,
                "certificate-authority-data": base64.b64encode(crt).decode()}}],
            "users": [{"name": "admin", "user": {"token": self.token}}],
            "contexts": [{"name": self.name, "context": {"cluster": self.name,
                                                          "user": "admin"}}],
        }

    def log_tail(self) -> str:
        return tail(self.workdir / "kube-apiserver.log")

    def pids(self) -> dict[str, int]:
        """Every process of the cluster that runs now, by name (for measurements)."""
        procs = {"etcd": self.etcd.proc, "kube-apiserver": self.proc, **self.others}
        return {n: p.pid for n, p in procs.items() if p is not None and p.poll() is None}

    # -- stopping ---------------------------------------------------------------------

    def stop(self) -> None:
        """Stop the API server and everything that talks to it (the data stays, in its
        etcd). The API server has 3 s to end on its own, then is killed: it waits for the
        watches still open to drain before it ends, 20 s and more with a client's watch
        open (a benchmark's stop took 40 s so), and there is nothing of its own to save."""
        for proc in self.others.values():
            proc.terminate()
        stop_process(self.proc, timeout=3)
        for proc in self.others.values():
            stop_process(proc, timeout=10)

    def cleanup(self) -> None:
        self.stop()
        self.etcd.cleanup()
        shutil.rmtree(self.workdir, ignore_errors=True)

