"""What each cluster has and what is asked of it, from its Nodes and Pods, watched.

Per API server, two list-then-watch loops (Nodes, Pods), among the
capacity watches (``watches.py``), keep a small summary in memory — a node's
allocatable resources, a pod's requests and the application that owns it —
so that a probe costs no list: the observer reads the summary
(:meth:`Tracker.capacity`) into the cluster's status key. Clusters that are
namespaces of one API server, reached as the same user, share one tracker
(the observer keeps them by :attr:`Connection.server`): they see the same
Nodes and Pods, and one watch of each serves them all rather than one per
cluster. A watch that breaks or expires (410 Gone) lists again. Counted:

* **allocatable**: the sum over Nodes that are Ready and not cordoned (the others
  are kept too: their Pods are on Nodes that exist);
* **requested**: the sum over Pods not yet finished (Pending ones included:
  they are demand), each counted as the Kubernetes scheduler counts it;
* **placed**: per application (the pod's ``berth.dev/application``
  annotation, which the propagator puts on its workloads' pod templates), how
  many of those pods there are.

The same watch says why an application's Pods are not Ready (:meth:`Tracker.trouble`:
a container waiting in ``CrashLoopBackOff``, a Pod the scheduler cannot
place), which the applier gives as the reason a copy is not available; a
change in that calls ``on_pods`` with the application (once, however many
clusters share the tracker: the applier judges all of the application's
copies).

A cluster that lists no Node (an API server without workers) reports no
capacity: the scheduler does not judge it.

The Pods' sums are kept as the Pods change (:class:`_Totals`: the requests of
all, each application's Pods by name), so that a reconcile asking about one
application, and a probe writing the summary, cost as much with 10,000 Pods as
with ten.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import msgspec

from berth.controllers.propagator.kube import OWNER, Unavailable, safe
from berth.controllers.propagator.watches import ClusterWatches
from berth.store.codec import decoder
from berth.store.documents import Capacity
from berth.store.documents.resources import NOTHING, QuantityError, Resources, pod_requests

log = logging.getLogger(__name__)

WATCH_SECONDS = 300  # how long one watch request stays open before it is renewed


class _Meta(msgspec.Struct):
    name: str = ""
    namespace: str = ""
    resourceVersion: str = ""
    annotations: dict[str, str] = {}


class _Condition(msgspec.Struct):
    type: str = ""
    status: str = ""


class _NodeSpec(msgspec.Struct):
    unschedulable: bool = False


class _NodeStatus(msgspec.Struct):
    allocatable: dict[str, Any] = {}
    conditions: list[_Condition] = []


class _Node(msgspec.Struct):
    metadata: _Meta = msgspec.field(default_factory=_Meta)
    spec: _NodeSpec = msgspec.field(default_factory=_NodeSpec)
    status: _NodeStatus = msgspec.field(default_factory=_NodeStatus)


class _Waiting(msgspec.Struct):
    reason: str = ""
    message: str = ""


class _State(msgspec.Struct):
    waiting: _Waiting | None = None


class _ContainerStatus(msgspec.Struct):
    name: str = ""
    ready: bool = False
    state: _State = msgspec.field(default_factory=_State)


class _PodCondition(msgspec.Struct):
    type: str = ""
    status: str = ""
    reason: str = ""
    message: str = ""


class _PodStatus(msgspec.Struct):
    phase: str = ""
    conditions: list[_PodCondition] = []
    containerStatuses: list[_ContainerStatus] = []
    initContainerStatuses: list[_ContainerStatus] = []


class _Pod(msgspec.Struct):
    metadata: _Meta = msgspec.field(default_factory=_Meta)
    spec: dict[str, Any] = {}
    status: _PodStatus = msgspec.field(default_factory=_PodStatus)


class _ListMeta(msgspec.Struct):
    resourceVersion: str = ""


def _list_of(item: type) -> type:
    return msgspec.defstruct(f"{item.__name__}List", [
        ("metadata", _ListMeta, msgspec.field(default_factory=_ListMeta)),
        ("items", list[item], msgspec.field(default_factory=list))])  # type: ignore[valid-type]


def _event_of(item: type) -> type:
    return msgspec.defstruct(f"{item.__name__}Event", [("type", str), ("object", item)])


def _node_entry(node: _Node) -> tuple[Resources | None]:
    """What a node offers: None if it offers nothing now (not Ready, cordoned) — it is
    kept all the same: its Pods are on a Node that exists."""
    ready = any(c.type == "Ready" and c.status == "True" for c in node.status.conditions)
    if not ready or node.spec.unschedulable:
        return (None,)
    try:
        return (Resources.of(node.status.allocatable),)
    except QuantityError as exc:
        log.info("node %s: allocatable not readable (%s): not counted", node.metadata.name, exc)
        return (None,)


def _why_not_ready(pod: _Pod) -> str:
    """Why a running or pending pod is not Ready, in Kubernetes' words ("" if it is)."""
    st = pod.status
    if any(c.type == "Ready" and c.status == "True" for c in st.conditions):
        return ""
    for c in (*st.initContainerStatuses, *st.containerStatuses):
        w = c.state.waiting
        if w is not None and w.reason and w.reason not in ("ContainerCreating",
                                                           "PodInitializing"):
            return f"{w.reason}: {w.message}" if w.message else w.reason
    for cond in st.conditions:
        if cond.type == "PodScheduled" and cond.status == "False":
            return f"{cond.reason or 'not scheduled'}: {cond.message}".rstrip(": ")
    return ""


def _pod_entry(pod: _Pod) -> tuple[Resources, str, str, str] | None:
    """What a pod asks, which application owns it, why it is not Ready and the Node it
    is bound to; None once it has finished."""
    if pod.status.phase in ("Succeeded", "Failed"):
        return None
    try:
        asks = pod_requests(pod.spec, "spec")
    except QuantityError as exc:
        log.info("pod %s/%s: requests not readable (%s): counted as one pod",
                 pod.metadata.namespace, pod.metadata.name, exc)
        asks = Resources(pods=1)
    node = pod.spec.get("nodeName")
    return (asks, pod.metadata.annotations.get(OWNER, ""), _why_not_ready(pod),
            node if isinstance(node, str) else "")


# Made once, at import: their decoders come from the store's codec (one lock), since
# trackers start on the probe threads.
_LISTS: dict[type, type] = {t: _list_of(t) for t in (_Node, _Pod)}
_EVENTS: dict[type, type] = {t: _event_of(t) for t in (_Node, _Pod)}


_Key = tuple[str, str]  # (namespace, name)
_PodEntry = tuple[Resources, str, str, str]  # (requests, owner, why not Ready, node)


class _Totals:
    """What the Pods' entries add up to, kept as they change: the requests of all, and
    each application's Pods by key. Changed under the tracker's lock."""

    def __init__(self, entries: dict[_Key, _PodEntry] | None = None) -> None:
        self.requested = NOTHING
        self.owned: dict[str, dict[_Key, _PodEntry]] = {}
        for key, e in (entries or {}).items():
            self.add(key, e)

    def add(self, key: _Key, e: _PodEntry) -> None:
        self.requested = self.requested + e[0]
        if e[1]:
            self.owned.setdefault(e[1], {})[key] = e

    def remove(self, key: _Key, e: _PodEntry) -> None:
        self.requested = self.requested - e[0]
        mine = self.owned.get(e[1]) if e[1] else None
        if mine is not None:
            mine.pop(key, None)
            if not mine:
                del self.owned[e[1]]


class _Watched:
    """One list-then-watch loop over a kind, keeping ``entries`` by object name (and,
    for Pods, their :class:`_Totals`)."""

    def __init__(self, tracker: Tracker, path: str, item: type,
                 entry: Callable[[Any], Any], changed: Callable[[Any, Any, _Key], None], *,
                 totals: bool = False) -> None:
        self.tracker, self.path, self.entry = tracker, path, entry
        self.changed = changed  # the tracker's, for this kind: (was, now, key)
        self.list_decoder = decoder(_LISTS[item])
        self.event_decoder = decoder(_EVENTS[item])
        self.entries: dict[_Key, Any] = {}
        self.totals: _Totals | None = _Totals() if totals else None
        self.synced = False

    async def run(self, w: ClusterWatches) -> None:
        """List, then watch until the watch ends; again and again (after a failure,
        0.5 s doubling to 30 s later)."""
        delay = 0.5
        while self.tracker.alive():
            try:
                resp = await w.get(self.path)
                if resp.status_code != 200:
                    raise Unavailable(f"list {self.path}: HTTP {resp.status_code}")
                listed = self.list_decoder.decode(resp.content)
                now = {k: e for k, e in (((o.metadata.namespace, o.metadata.name),
                                          self.entry(o)) for o in listed.items)
                       if e is not None}
                self.tracker.relisted(self.listed(now), now)
                await self._watch(w, listed.metadata.resourceVersion)
                delay = 0.5
                continue
            except Unavailable as exc:
                if not self.tracker.alive():
                    return
                log.info("%s: %s (listing again in %.1f s)", self.tracker.name,
                         safe(exc), delay)
            except msgspec.DecodeError as exc:
                log.warning("%s: %s answered something berth cannot read (%s)",
                            self.tracker.name, self.path, exc)
                delay = 30.0
            await asyncio.sleep(delay)
            delay = min(30.0, delay * 2)

    async def _watch(self, w: ClusterWatches, since: str) -> None:
        while self.tracker.alive():
            params = {"watch": "true", "timeoutSeconds": str(WATCH_SECONDS),
                      "allowWatchBookmarks": "true", "resourceVersion": since}
            async for line in w.lines(self.path, params):
                try:
                    event = self.event_decoder.decode(line)
                except msgspec.DecodeError:
                    if b'"ERROR"' in line:  # 410 Gone and the like: list again
                        return
                    continue
                obj = event.object
                since = obj.metadata.resourceVersion or since
                if event.type == "BOOKMARK":
                    continue
                key = (obj.metadata.namespace, obj.metadata.name)
                self.keep(key, None if event.type == "DELETED" else self.entry(obj))

    def keep(self, key: _Key, e: Any) -> None:
        """The object ``key`` is now ``e`` (None: gone, or finished); the tracker is told
        of a change."""
        with self.tracker.lock:
            was = self.entries.pop(key, None) if e is None else self.entries.get(key)
            if e is not None:
                self.entries[key] = e
            if self.totals is not None and was != e:
                if was is not None:
                    self.totals.remove(key, was)
                if e is not None:
                    self.totals.add(key, e)
        if was != e:
            self.changed(was, e, key)

    def listed(self, entries: dict[_Key, Any]) -> dict[_Key, Any]:
        """A list's answer replaces every entry; the ones it replaced."""
        with self.tracker.lock:
            was, self.entries = self.entries, entries
            if self.totals is not None:
                self.totals = _Totals(entries)
            self.synced = True
            if self.tracker.nodes.synced and self.tracker.pods.synced:
                self.tracker.synced.set()
        return was


class Tracker:
    """Nodes and Pods of one API server, watched through ``watches``, as a summary.

    ``name`` names it in the log (the server's URL); ``on_change()`` is called when
    the summary changed, ``on_pods(application)`` when that application's Pods
    became (not) Ready or lost their Node."""

    def __init__(self, name: str, watches: ClusterWatches,
                 on_change: Callable[[], None],
                 on_pods: Callable[[str], None] | None = None) -> None:
        self.name, self.watches, self.on_change = name, watches, on_change
        self.on_pods = on_pods
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.synced = threading.Event()  # both lists came back once
        self.nodes = _Watched(self, "/api/v1/nodes", _Node, _node_entry, self.node_changed)
        self.pods = _Watched(self, "/api/v1/pods", _Pod, _pod_entry, self.pod_changed,
                             totals=True)

    def start(self) -> Tracker:
        self.watches.add("capacity nodes", self.nodes.run)
        self.watches.add("capacity pods", self.pods.run)
        return self

    def alive(self) -> bool:
        return not self.stopped.is_set() and not self.watches.closed

    def stop(self) -> None:
        self.stopped.set()
        self.watches.cancel("capacity nodes")
        self.watches.cancel("capacity pods")

    def node_changed(self, was: Any, now: Any, key: _Key) -> None:
        """A Node's entry changed: the capacity is to be written; when the Node came or
        went, the applications with pods bound to it are told (their copies say whether
        a pod's Node is gone). A Node that changed in place — Ready or not, cordoned,
        its allocatable — changes only the capacity."""
        self.on_change()
        if self.on_pods is None or (was is not None and now is not None):
            return
        with self.lock:
            owners = {e[1] for e in self.pods.entries.values() if e[1] and e[3] == key[1]}
        for owner in owners:
            self.on_pods(owner)

    def pod_changed(self, was: _PodEntry | None, now: _PodEntry | None, _key: _Key) -> None:
        """A pod's entry changed: the capacity is to be written. Its application is told
        when what its copy would say of the pod changed — why it is not Ready, whether
        its Node is gone — not when a pod merely came, was scheduled or went: its
        workload's status says that, and a reconcile for each such step of every pod
        kept the workers busy while copies waited to be recorded available."""
        self.on_change()
        if self.on_pods is None:
            return
        if self._said(was) != self._said(now):
            for owner in {e[1] for e in (was, now) if e is not None and e[1]}:
                self.on_pods(owner)

    def _said(self, entry: _PodEntry | None) -> tuple[str, bool]:
        """What a copy's reason reads of a pod: why it is not Ready, and whether the Node
        it is bound to is gone."""
        if entry is None:
            return "", False
        return entry[2], bool(entry[3]) and ("", entry[3]) not in self.nodes.entries

    def relisted(self, was: dict[Any, Any], now: dict[Any, Any]) -> None:
        self.on_change()
        if self.on_pods is None:
            return
        owners = {e[1] for e in (*was.values(), *now.values())
                  if isinstance(e, tuple) and len(e) == 4 and e[1]}
        for owner in owners:
            self.on_pods(owner)

    def trouble(self, owner: str) -> str:
        """Why the first of ``owner``'s pods that is not Ready is not ("" if all are)."""
        with self.lock:
            pods = [(k, e) for k, e in self._owned(owner).items() if e[2]]
        if not pods:
            return ""
        (_ns, name), entry = min(pods)
        more = f" (and {len(pods) - 1} more pods)" if len(pods) > 1 else ""
        return f"pod {name}: {entry[2]}{more}"

    def lost(self, owner: str) -> int:
        """How many of ``owner``'s pods are bound to a Node that no longer exists: the
        cluster may still count them available (until its pod garbage collector removes
        them), but nothing runs them."""
        with self.lock:
            if not (self.nodes.synced and self.pods.synced):
                return 0
            return sum(1 for e in self._owned(owner).values()
                       if e[3] and ("", e[3]) not in self.nodes.entries)  # Nodes: no namespace

    def _owned(self, owner: str) -> dict[_Key, _PodEntry]:
        """``owner``'s pods (under the lock)."""
        totals = self.pods.totals
        return totals.owned.get(owner, {}) if totals is not None else {}

    def first(self, timeout: float) -> Capacity | None:
        """The summary, once both lists came back or ``timeout`` seconds passed (then None).
        A cluster said ONLINE says with it what it holds, as a Node's first Ready status
        carries its allocatable: else the scheduler judges it full for a moment, places
        elsewhere, and moves back when the summary comes."""
        self.synced.wait(timeout)
        return self.capacity()

    def capacity(self) -> Capacity | None:
        """The summary now; None until both lists came back."""
        with self.lock:
            if not (self.nodes.synced and self.pods.synced):
                return None
            nodes = [offers for (offers,) in self.nodes.entries.values() if offers is not None]
            totals = self.pods.totals or _Totals()
            requested = totals.requested
            placed = {owner: len(pods) for owner, pods in sorted(totals.owned.items())}
        allocatable = sum(nodes, NOTHING)
        return Capacity(allocatable.listed(), requested.listed(), len(nodes), placed,
                        datetime.now(UTC))


def same(a: Capacity | None, b: Capacity | None) -> bool:
    """Equal but for when they were observed."""
    if a is None or b is None:
        return a is b
    return (a.allocatable, a.requested, a.nodes, a.placed) == (
        b.allocatable, b.requested, b.nodes, b.placed)
