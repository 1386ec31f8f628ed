"""A whole berth on real servers, for the fault table.

Three kube-apiservers (clusters ``a``, ``b``, ``c``; ``b`` in Pull mode, reached by
two replicas of its agent alone), Prometheus with a
Pushgateway and a Kafka broker as metric providers, berth's own three-member etcd
cluster (every process is given all three members), and two
replicas of each berth process. 2,000 applications, each one ConfigMap, with
five kinds of cluster constraint so that some can go anywhere and some only
to one cluster. Every Binding and application status ever written is
recorded from a watch, so a fault's window can be read back: moves, moves
back and forth, and decisions written twice.

:meth:`System.converged` checks the whole truth, not berth's word for it:
each application's Binding obeys its constraint and targets a cluster that
is up, its status is RUNNING there at its current generation, and the
ConfigMap is on exactly that cluster with that generation's data (read from
the kube-apiservers themselves).
"""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import msgspec
from lightkube import Client, KubeConfig

from berth.controllers.propagator.shard import CLAIMS
from berth.store import (
    MAX_TXN_OPS,
    Conflict,
    EtcdConfig,
    Put,
    Store,
    Unavailable,
    Watch,
    encode,
    keys,
)
from berth.store.documents import ApplicationStatus, Binding, MetricPicture
from berth_testkit.mirror import Mirror, Objects, mirrored
from berth_testkit.scheduler_env import (
    AgentProcess,
    BerthProcess,
    MetricsCacheProcess,
    PropagatorProcess,
    SchedulerProcess,
    put,
    stop_all,
)
from berth_testkit.servers.etcd import EtcdCluster
from berth_testkit.servers.kafka import KafkaServer, produce
from berth_testkit.servers.kube import CRASH, KubeCluster
from berth_testkit.servers.prometheus import PrometheusServer

N_APPS = 2000
LABELS = {"a": {"zone": "z1", "tier": "gold"}, "b": {"zone": "z2", "tier": "gold"},
          "c": {"zone": "z2", "tier": "silver"}}
# (constraint, the clusters it allows): application i has the (i % 5)th.
RULES: list[tuple[list[str], frozenset[str]]] = [
    ([], frozenset("abc")),
    (["tier is gold"], frozenset("ab")),
    (["zone is z2"], frozenset("bc")),
    (["zone is z1"], frozenset("a")),
    (["tier is silver"], frozenset("c")),
]
METRICS = {"a": ("price_a", "prom"), "b": ("price_b", "prom"), "c": ("wind_c", "kafka")}
MANAGED: dict[str, Any] = {"app.kubernetes.io/managed-by": "berth"}
MANAGED_SELECTOR = quote(",".join(f"{k}={v}" for k, v in MANAGED.items()), safe="")
CONFIGMAPS = f"/api/v1/namespaces/default/configmaps?labelSelector={MANAGED_SELECTOR}"
READ_EVERY = 10.0  # seconds: converge reads the whole truth at least this often

SCHEDULER = ""
MOVE_TIMEOUT = 15.0
# grace: a pull cluster without a heartbeat for 8 s is OFFLINE — more than its agents
# take to start again on this loaded machine (a CI run saw 5 s from kill -9 to leading
# with grace 2, 1 s after the 2 s lease, every copy on b moved; a run on two workers took
# longer than 5 s, and 194 copies moved); the defaults keep the same order (30 s against
# a 15 s lease)
PROPAGATOR = ("probe_interval: 0.5\nprobe_timeout: 1\ngrace: 16\nrequest_timeout: 3\n"
              "retry_base_delay: 0.2\nretry_max_delay: 2\nresync_interval: 600\n"
              f"move_timeout: {MOVE_TIMEOUT}\n")
METRICS_CACHE = "poll_interval: 0.5\nlease_ttl: 3\nstale_after: 60\ntimeout: 1\nretries: 0\n"
PULL = "b"  # reached by its agents alone (docs/agents.md): every fault meets both modes
AGENT = ("probe_interval: 0.5\nprobe_timeout: 1\nrequest_timeout: 3\nretry_base_delay: 0.2\n"
         "retry_max_delay: 2\nresync_interval: 600\ncapacity_interval: 0.5\n"
         "delete_share: 0.25\ndelete_least: 5\ndelete_window: 2\n")


def app_name(i: int) -> str:
    return f"app-{i:04d}"


def allowed(name: str) -> frozenset[str]:
    return RULES[int(name.rsplit("-", 1)[1]) % len(RULES)][1]


@dataclass
class Row:
    """A line of the fault table."""

    fault: str
    figure: str
    held: bool


ROWS: list[Row] = []  # filled by the tests, printed at the end of the run


@dataclass
class Record:
    """One write seen by the recorder."""

    revision: int
    name: str  # the application
    essence: tuple[Any, ...] | None  # what an observer compares; None for a delete
    term: int = 0  # a Binding's: the scheduler leader's term it was written in
    decision: str = ""  # a Binding's: the id of the decision it carries (its ledger record)


@dataclass
class History:
    """Every Binding and status write, in revision order, from a live watch."""

    bindings: list[Record] = field(default_factory=list)
    statuses: list[Record] = field(default_factory=list)
    # the scheduler's election key: (revision, its create revision then; 0: deleted)
    terms: list[tuple[int, int]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def term_at(self, revision: int) -> int:
        """The scheduler leader's term in force at ``revision`` (0: nobody led)."""
        with self.lock:
            now = 0
            for rev, term in self.terms:
                if rev > revision:
                    break
                now = term
            return now

    def since(self, revision: int) -> tuple[list[Record], list[Record]]:
        with self.lock:
            return ([r for r in self.bindings if r.revision > revision],
                    [r for r in self.statuses if r.revision > revision])


def _decoded(value: bytes, kind: type[Any]) -> Any:
    """``value`` as ``kind`` (None: it is not one)."""
    try:
        return msgspec.json.decode(value, type=kind)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


def _term(doc: Any) -> tuple[int, str]:
    """A Binding's leader term and decision id (0 and "" for one that did not decode)."""
    if not isinstance(doc, Binding):
        return 0, ""
    return doc.status.term, doc.spec.decision


def _essence(doc: Any) -> tuple[Any, ...]:
    """What an observer compares of a Binding or a status (``("garbage",)``: it did not
    decode)."""
    if isinstance(doc, Binding):
        return (tuple(t.name for t in doc.spec.targets), doc.spec.generation,
                doc.status.state,
                doc.status.reason if not doc.status.reason.startswith("Scheduled") else "")
    if isinstance(doc, ApplicationStatus):
        return (msgspec.json.encode(doc.status),)
    return ("garbage",)


@dataclass
class Window:
    """What berth wrote during one fault."""

    moves: int  # Binding target changes
    movers: set[str]
    flaps: list[str]  # applications that went back to targets they had left
    binding_twice: list[str]  # the same decision written again
    status_twice: list[str]  # the same status written again


def window(history: History, revision: int, before: dict[str, tuple[str, ...]]) -> Window:
    """Read a fault's writes (after ``revision``; ``before``: each application's targets
    when it began) of the 2,000 applications (the workload rows check theirs apart)."""
    bindings, statuses = history.since(revision)
    bindings = [r for r in bindings if r.name.startswith("app-")]
    statuses = [r for r in statuses if r.name.startswith("app-")]
    seen: dict[str, list[tuple[str, ...]]] = {}
    last: dict[str, tuple[Any, ...] | None] = {}
    twice: list[str] = []
    for r in bindings:
        if r.essence is None or r.essence == ("garbage",):
            last.pop(r.name, None)
            continue
        if last.get(r.name) == r.essence:
            twice.append(r.name)
        last[r.name] = r.essence
        # A path of target sets: a first placement (from none) is not a move.
        path = seen.setdefault(r.name, [before[r.name]] if before.get(r.name) else [])
        if r.essence[0] and (not path or r.essence[0] != path[-1]):
            path.append(r.essence[0])
    moves = sum(max(0, len(p) - 1) for p in seen.values())
    movers = {n for n, p in seen.items() if len(p) > 1}
    flaps = [n for n, p in seen.items() if len(set(p)) < len(p)]
    st_last: dict[str, tuple[Any, ...] | None] = {}
    st_twice: list[str] = []
    for r in statuses:
        if r.essence is not None and r.essence != ("garbage",) and st_last.get(r.name) == r.essence:
            st_twice.append(r.name)
        st_last[r.name] = r.essence
    return Window(moves, movers, flaps, twice, st_twice)


class System:
    def __init__(self, workdir: Path, log: Callable[[str], None] = print) -> None:
        self.workdir = workdir
        self.log = log
        self.etcd = EtcdCluster(3)
        self.clusters: dict[str, KubeCluster] = {}
        self.prometheus = PrometheusServer()
        self.kafka = KafkaServer()
        self.store: Store | None = None
        self.kube: dict[str, Client] = {}
        self.procs: dict[str, list[BerthProcess]] = {}
        self.history = History()
        self.generation: dict[str, int] = {}
        self._watches: list[Watch] = []
        # The last seen by the watches (owned by history.lock): each application's
        # (key, Binding or status; None: not one), each cluster's ConfigMaps' generations.
        self._bindings: dict[str, tuple[str, Any]] = {}
        self._statuses: dict[str, tuple[str, Any]] = {}
        self._held: dict[str, dict[str, str]] = {}
        self._mirrors: list[Mirror] = []
        self._bump = 0

    # -- setup ------------------------------------------------------------------------

    def start(self) -> System:
        t0 = time.monotonic()
        self.etcd.start()
        # The harness (the "user") is given the members in the other order: faults of the
        # member berth's processes talk to are berth's to survive, not the harness's.
        # (30 s a call: a compaction waits for the whole history to go, which took
        # over 10 s on a loaded machine, and the row failed on the harness's own timeout)
        self.store = Store(EtcdConfig(url=",".join(m.url for m in reversed(self.etcd.members)),
                                      timeout=30))
        for name in LABELS:
            self.clusters[name] = KubeCluster(f"fault-{name}").start()
            self.kube[name] = self._client(name)
        self.prometheus.start()
        self.kafka.start()
        self.log(f"servers up in {time.monotonic() - t0:.0f} s")
        self.prometheus.push(price_a=2, price_b=2)
        self.prometheus.wait_value("price_a", 2)
        produce(self.kafka.bootstrap, "energy", [("wind_c", b"4")])  # c scores best
        self._seed()
        self._record()
        self._mirror()
        url = self.etcd.url
        for command, cls, config in (("scheduler", SchedulerProcess, SCHEDULER),
                                     ("propagator", PropagatorProcess, PROPAGATOR),
                                     ("metrics-cache", MetricsCacheProcess, METRICS_CACHE)):
            self.procs[command] = [cls(url, self.workdir, config=config, name=str(i)).start()
                                   for i in range(2)]
        self.procs["agent"] = [AgentProcess(
            url, self.workdir, cluster=f"default/{PULL}", config=AGENT, name=str(i),
            kubeconfig=self.clusters[PULL].kubeconfig()).start() for i in range(2)]
        # As in a running fleet, the metric values are whole before applications come
        # (else the first placements are made without them, and corrected once).
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            kv = self.db.get(keys.METRIC_PICTURE)
            if kv is not None and msgspec.json.decode(kv.value, type=MetricPicture).complete:
                break
            time.sleep(0.2)
        else:
            raise AssertionError("the metrics-cache never published a complete picture")
        return self

    def _client(self, name: str) -> Client:
        return Client(KubeConfig.from_dict(self.clusters[name].kubeconfig()), trust_env=False)

    @property
    def db(self) -> Store:
        assert self.store is not None
        return self.store

    def _seed(self) -> None:
        db = self.db
        put(db, keys.resource_key("GlobalMetricsProvider", "prom"), encode({
            "api": "core", "kind": "GlobalMetricsProvider", "metadata": {"name": "prom"},
            "spec": {"type": "prometheus", "prometheus": {"url": self.prometheus.url}}}))
        put(db, keys.resource_key("GlobalMetricsProvider", "kafka"), encode({
            "api": "core", "kind": "GlobalMetricsProvider", "metadata": {"name": "kafka"},
            "spec": {"type": "kafka", "kafka": {"bootstrap_servers": self.kafka.bootstrap,
                                                "topic": "energy", "group_id": "berth"}}}))
        for name, (metric, provider) in METRICS.items():
            put(db, keys.resource_key("GlobalMetric", metric), encode({
                "api": "core", "kind": "GlobalMetric", "metadata": {"name": metric},
                "spec": {"min": 0, "max": 5, "provider": {"name": provider, "metric": metric}}}))
            reach: dict[str, Any] = {"mode": "Pull"} if name == PULL else {
                "kubeconfig": self.clusters[name].kubeconfig()}
            put(db, keys.resource_key("Cluster", name, "default"), encode({
                "api": "kubernetes", "kind": "Cluster",
                "metadata": {"name": name, "namespace": "default", "labels": LABELS[name]},
                "spec": {**reach, "metrics": [{"name": metric, "weight": 1.0}]}}))

    def _record(self) -> None:
        start = self.db.revision() + 1
        for prefix, target, kind, view in (
            (keys.binding_prefix("Application"), self.history.bindings, Binding,
             self._bindings),
            (keys.status_prefix("Application"), self.history.statuses, ApplicationStatus,
             self._statuses),
        ):
            watch = Watch(self.db, prefix, start)
            self._watches.append(watch)

            def run(w: Watch = watch, out: list[Record] = target, kind: type = kind,
                    view: dict[str, tuple[str, Any]] = view) -> None:
                for batch in w:
                    records = []
                    now: dict[str, tuple[str, Any] | None] = {}  # None: deleted
                    for ev in batch.events:
                        name = ev.key.rsplit("/", 1)[1]
                        doc = _decoded(ev.value, kind) if ev.type == "PUT" else None
                        records.append(Record(
                            ev.mod_revision, name,
                            _essence(doc) if ev.type == "PUT" else None,
                            *(_term(doc) if kind is Binding else (0, ""))))
                        if not keys.problem(ev.key):  # outside berth's layout: not one
                            now[name] = (ev.key, doc) if ev.type == "PUT" else None
                    with self.history.lock:
                        out.extend(records)
                        for name, seen in now.items():
                            if seen is None:
                                view.pop(name, None)
                            else:
                                view[name] = seen

            threading.Thread(target=run, daemon=True, name=f"record {prefix}").start()
        election = Watch(self.db, keys.lease_key("scheduler"), start)
        self._watches.append(election)

        def terms() -> None:
            for batch in election:
                with self.history.lock:
                    self.history.terms.extend(
                        (ev.mod_revision, ev.create_revision if ev.type == "PUT" else 0)
                        for ev in batch.events)

        threading.Thread(target=terms, daemon=True, name="record terms").start()

    def _mirror(self) -> None:
        """berth's ConfigMaps on each cluster, kept current by a watch (docs/development.md,
        "Samplers"): what :meth:`converge` looks at between its reads."""

        def on_change(cluster: str, objects: Objects, changed: set[str]) -> None:
            with self.history.lock:
                held = self._held.setdefault(cluster, {})
                for name in changed:
                    obj = objects.get(name)
                    if obj is None:
                        held.pop(name, None)
                    else:
                        held[name] = (obj.get("data") or {}).get("generation", "")

        self._mirrors = [Mirror(name, server, CONFIGMAPS, on_change)
                         for name, server in self.clusters.items()]
        mirrored(self._mirrors)

    def stop(self) -> None:
        """Stop everything; what ended a mirror early is raised once all is stopped."""
        stop_all(p for procs in self.procs.values() for p in procs)
        for w in self._watches:
            w.close()
        failed: list[BaseException] = []
        for m in self._mirrors:
            try:
                m.stop()
            except Exception as exc:
                failed.append(exc)
        for c in self.kube.values():
            c.close()
        if self.store is not None:
            self.store.close()
        for server in self.clusters.values():
            server.cleanup()
        self.prometheus.cleanup()
        self.kafka.cleanup()
        self.etcd.cleanup()
        if failed:
            raise failed[0]

    # -- load -------------------------------------------------------------------------

    def create_apps(self) -> None:
        """All 2,000 applications at once (a few transactions)."""
        ops = []
        for i in range(N_APPS):
            name = app_name(i)
            self.generation[name] = 1
            ops.append(Put(keys.resource_key("Application", name, "default"),
                           self._app(name, 1)))
        self._commit(ops)

    def _app(self, name: str, generation: int) -> bytes:
        labels = RULES[int(name.rsplit("-", 1)[1]) % len(RULES)][0]
        return encode({
            "api": "kubernetes", "kind": "Application",
            "metadata": {"name": name, "namespace": "default", "generation": generation},
            "spec": {"constraints": {"cluster": {"labels": labels}},
                     "manifest": [{"apiVersion": "v1", "kind": "ConfigMap",
                                   "metadata": {"name": name, "namespace": "default"},
                                   "data": {"generation": str(generation)}}]}})

    def workload(self, name: str, generation: int, prefer: str, *, crash: bool = False) -> None:
        """An application of the workload rows: a Deployment of 2 replicas that Pods run,
        on a gold cluster (a or b), preferring the zone ``prefer`` (z1: a, z2: b);
        ``crash``: its Pods never become Ready."""
        template: dict[str, Any] = {"labels": {"app": name}}
        if crash:
            template["annotations"] = {CRASH: "yes"}
        put(self.db, keys.resource_key("Application", name, "default"), encode({
            "api": "kubernetes", "kind": "Application",
            "metadata": {"name": name, "namespace": "default", "generation": generation},
            "spec": {"constraints": {"cluster": {"labels": ["tier is gold"]}},
                     "affinity": {"clusterAffinity": {
                         "preferredDuringSchedulingIgnoredDuringExecution": [
                             {"weight": 100, "preference": {"matchExpressions": [
                                 {"key": "zone", "operator": "In", "values": [prefer]}]}}]}},
                     "manifest": [{"apiVersion": "apps/v1", "kind": "Deployment",
                                   "metadata": {"name": name, "namespace": "default"},
                                   "spec": {"replicas": 2,
                                            "selector": {"matchLabels": {"app": name}},
                                            "template": {"metadata": template, "spec": {
                                                "containers": [{"name": "c", "image": "x:1",
                                                                "resources": {"requests": {
                                                                    "cpu": "10m"}}}]}}}}]}}))

    def status(self, name: str) -> ApplicationStatus | None:
        kv = self.db.get(keys.status_key("Application", "default", name))
        return msgspec.json.decode(kv.value, type=ApplicationStatus) if kv else None

    def taint(self, cluster: str, on: bool) -> None:
        """Every Node of ``cluster`` tainted ``NoSchedule`` (or not): the Kubernetes
        scheduler places no new Pod of berth's there, so they stay Pending.

        Not a cordon: berth counts a cordoned Node's resources out of the cluster's
        capacity, so whether a decision made right after a cordon still picks the
        cluster would depend on whether a probe fell in between. A taint is what berth
        does not see (it reads no Node taint), so the cluster looks fine and its Pods
        never become Ready."""
        server = self.clusters[cluster]
        taints = [{"key": "berth.dev/fault", "value": "stuck", "effect": "NoSchedule"}]
        for node in server.request("GET", "/api/v1/nodes").get("items", []):
            server.request("PATCH", f"/api/v1/nodes/{node['metadata']['name']}",
                           {"spec": {"taints": taints if on else None}}, content="merge")

    def _commit(self, ops: list[Put]) -> None:
        """Write ``ops`` in chunks as an etcd client must while a member dies: a chunk that
        failed Unavailable is tried again; a Conflict then means its first try landed
        (checked: every key holds the value written)."""
        for start in range(0, len(ops), MAX_TXN_OPS):
            chunk = ops[start : start + MAX_TXN_OPS]
            retried = False
            while True:
                try:
                    self.db.commit(chunk)
                    break
                except Unavailable:
                    retried = True
                    time.sleep(0.2)
                except Conflict:
                    if not retried:
                        raise
                    now = self.db.get_many([op.key for op in chunk])
                    assert all(now[op.key].value == op.value for op in chunk), "half a chunk"
                    break

    def bump(self, n: int = 200) -> None:
        """A new generation for ``n`` applications (the next ones in turn): work for the
        scheduler and the propagator while a fault happens."""
        revisions = {kv.key: kv.mod_revision for kv in
                     self.db.list_prefix(keys.resource_prefix("Application", "default"))[0]}
        ops, names = [], []
        for _ in range(n):
            name = app_name(self._bump % N_APPS)
            self._bump += 1
            key = keys.resource_key("Application", name, "default")
            ops.append(Put(key, self._app(name, self.generation[name] + 1), revisions[key]))
            names.append(name)
        self._commit(ops)
        for name in names:  # only once they are in etcd
            self.generation[name] += 1

    # -- faults -----------------------------------------------------------------------

    def leader(self, command: str) -> BerthProcess:
        """The replica holding ``command``'s lease (waits for one); for the propagator,
        whose replicas all work, the one serving cluster a."""
        deadline = time.monotonic() + 30
        lease = (CLAIMS + "default/a" if command == "propagator" else
                 keys.heartbeat_key(f"default/{PULL}") if command == "agent"
                 else keys.lease_key(command))
        while time.monotonic() < deadline:
            kv = self.db.get(lease)
            if kv is not None:
                doc = msgspec.json.decode(kv.value, type=dict[str, Any])
                holder = doc["status"]["agent"] if command == "agent" else doc["holder"]
                pid = int(str(holder).rsplit("-", 1)[1])
                for p in self.procs[command]:
                    if p.proc is not None and p.proc.pid == pid and p.proc.poll() is None:
                        return p
            time.sleep(0.1)
        raise AssertionError(f"no live {command} replica leads")

    def restart_dead(self, command: str) -> None:
        for p in self.procs[command]:
            if p.proc is None or p.proc.poll() is not None:
                p.start()

    def cluster_down(self, name: str) -> None:
        """Stop the cluster's API server; return once berth's observer says so."""
        self.clusters[name].stop()
        key = keys.status_key("Cluster", "default", name)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            kv = self.db.get(key)
            if kv is not None and b'"OFFLINE"' in kv.value:
                return
            time.sleep(0.2)
        raise AssertionError(f"the observer never said {name} is OFFLINE")

    def cluster_up(self, name: str, *, empty: bool = False) -> None:
        server = self.clusters[name]
        if empty:  # its etcd's data gone: the API server comes back with nothing berth put
            server.stop()
            server.etcd.kill()
            shutil.rmtree(server.etcd.workdir / "data", ignore_errors=True)
        server.start()
        self.kube[name].close()
        self.kube[name] = self._client(name)

    # -- the truth ----------------------------------------------------------------------

    def targets(self) -> dict[str, tuple[str, ...]]:
        out: dict[str, tuple[str, ...]] = {}
        for kv in self.db.list_prefix(keys.binding_prefix("Application"))[0]:
            try:
                b = msgspec.json.decode(kv.value, type=Binding)
            except (msgspec.DecodeError, msgspec.ValidationError):
                continue
            out[b.metadata.name] = tuple(t.name for t in b.spec.targets)
        return out

    def wrong(self, down: frozenset[str] = frozenset()) -> list[str]:
        """Every way the system differs from what it should be (empty: converged), read
        now from etcd and the clusters. ``down``: clusters whose API is stopped (not
        read; their applications are expected to stay bound there only when no other
        cluster is allowed)."""
        problems: list[str] = []
        bindings: dict[str, tuple[str, Any]] = {}
        for kv in self.db.list_prefix(keys.binding_prefix("Application"))[0]:
            if not keys.problem(kv.key):  # else written by hand outside berth's layout
                bindings[kv.key.rsplit("/", 1)[1]] = (kv.key, _decoded(kv.value, Binding))
        statuses: dict[str, tuple[str, Any]] = {}
        for kv in self.db.list_prefix(keys.status_prefix("Application"))[0]:
            if not keys.problem(kv.key):
                statuses[kv.key.rsplit("/", 1)[1]] = (kv.key, _decoded(kv.value,
                                                                       ApplicationStatus))
        held: dict[str, dict[str, str]] = {}  # cluster → ConfigMap name → generation
        for name, server in self.clusters.items():
            if name in down:
                continue
            try:  # as JSON: read every second, 2,000 objects as lightkube's took a core
                listed = server.request("GET", CONFIGMAPS)
                held[name] = {cm["metadata"]["name"]: (cm.get("data") or {}).get(
                    "generation", "") for cm in listed.get("items") or []}
            except Exception as exc:  # a cluster still starting
                problems.append(f"cluster {name}: {exc}")
                held[name] = {}
        return problems + self._judge(bindings, statuses, held, down)

    def seems_wrong(self, down: frozenset[str] = frozenset()) -> list[str]:
        """:meth:`wrong` as the watches have it: what the recorder saw last of each
        Binding and status, and each cluster's ConfigMaps as its mirror has them. Each
        a moment behind, in its own way: an empty answer is confirmed by :meth:`wrong`."""
        with self.history.lock:
            bindings, statuses = dict(self._bindings), dict(self._statuses)
            held = {name: dict(self._held.get(name, {})) for name in self.clusters
                    if name not in down}
        return self._judge(bindings, statuses, held, down)

    def _judge(self, bindings: dict[str, tuple[str, Any]],
               statuses: dict[str, tuple[str, Any]], held: dict[str, dict[str, str]],
               down: frozenset[str]) -> list[str]:
        """What is wrong in what was seen: each application's (key, Binding) and (key,
        status) — None where the value did not decode — and each cluster's ConfigMaps
        that are up (name → the generation in its data)."""
        out = [f"{key}: not a Binding" for key, b in bindings.values() if b is None]
        out += [f"{key}: not a status" for key, s in statuses.values() if s is None]
        for name, (_, doc) in bindings.items():
            if doc is not None and name.startswith("app-") and name not in self.generation:
                out.append(f"{name}: a Binding survives its application")
        for name, gen in self.generation.items():
            b = bindings.get(name, ("", None))[1]
            if b is None:
                out.append(f"{name}: no Binding")
                continue
            on = [t.name for t in b.spec.targets]
            ok = allowed(name)
            if len(on) != 1 or on[0] not in ok:
                out.append(f"{name}: bound to {on}, allowed {sorted(ok)}")
                continue
            target = on[0]
            if b.spec.generation != gen:
                out.append(f"{name}: Binding of generation {b.spec.generation}, not {gen}")
            if target in down:
                if ok - down:
                    out.append(f"{name}: still on {target}, which is down")
                continue
            s = statuses.get(name, ("", None))[1]
            running = [r.name for r in s.status.running_on] if s else []
            # Moved off a cluster that is down: made before broken, the old copy is
            # removed when that cluster answers again.
            leaving = (s is not None and s.status.state == "MIGRATING" and target in running
                       and all(c == target or c in down for c in running))
            if not leaving and (s is None or s.status.state != "RUNNING"
                                or s.status.generation != gen or running != [target]):
                out.append(f"{name}: status {s.status.state if s else None} "
                           f"{s.status.reason if s else ''}")
            for cname, objs in held.items():
                have = objs.get(name)
                if cname == target and have != str(gen):
                    out.append(f"{name}: on {cname} {'missing' if have is None else 'gen ' + have}")
                elif cname != target and have is not None:
                    out.append(f"{name}: left behind on {cname}")
        return out

    def converge(self, timeout: float, down: frozenset[str] = frozenset()) -> tuple[float, list[str]]:
        """Seconds until :meth:`wrong` is empty (and what was still wrong at the timeout).

        Looked at every second as the watches have it (:meth:`seems_wrong`), and read
        whole only when that looks right, or every ``READ_EVERY`` seconds all the same
        (a watch that fell behind delays the verdict, never makes it): reading 2,000
        Bindings, statuses and ConfigMaps a second cost the run a third of a core."""
        t0 = time.monotonic()
        last: list[str] = []
        read = t0
        while time.monotonic() - t0 < timeout:
            if not self.seems_wrong(down) or time.monotonic() - read >= READ_EVERY:
                read = time.monotonic()
                last = self.wrong(down)
                if not last:
                    return time.monotonic() - t0, []
            time.sleep(1.0)
        return time.monotonic() - t0, self.wrong(down)

    def etcd_members(self) -> dict[str, str]:
        """The etcd member each live berth process talks to (its ``berth_etcd_member``)."""
        out: dict[str, str] = {}
        for procs in self.procs.values():
            for p in procs:
                if p.proc is None or p.proc.poll() is not None:
                    continue
                for line in p.metrics().splitlines():
                    if line.startswith("berth_etcd_member{") and line.endswith(" 1.0"):
                        out[p.log.name] = line.split('"')[1]
        return out

    def log_lines(self, needle: str) -> int:
        return sum(p.output().count(needle) for procs in self.procs.values() for p in procs)

    def dead(self) -> list[str]:
        """Processes that are not running (after a fault: died by themselves)."""
        return [p.log.name for procs in self.procs.values() for p in procs
                if p.proc is not None and p.proc.poll() is not None]

