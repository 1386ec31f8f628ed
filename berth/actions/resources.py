"""What the read commands show: a resource joined with what the processes say of it.

An Application is shown with its Binding (the scheduler's side) and its
status (the propagator's); a Cluster with the observer's status; a Metric with
the metrics-cache's value. Everything is read from etcd as it is; a value that
does not decode is shown as such, never a crash. Credentials are masked unless
asked for.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

import msgspec

from berth.store import KV, Store, StoreError, decode, keys
from berth.store.credentials import SECRET_FIELD
from berth.store.documents import (
    RESOURCE_TYPES,
    ApplicationStatus,
    Binding,
    ClusterStatus,
    Exported,
    MetricValue,
    Reachability,
    Target,
)
from berth.store.documents.inventory import InventoryRead
from berth.store.documents.registration import Registration
from berth.store.documents.render import Where, selects_application, selects_cluster

MASK = "<masked>"


def mask(data: Any) -> Any:
    """A copy of ``data`` with every credential replaced by ``<masked>``."""
    if isinstance(data, dict):
        return {k: (MASK if isinstance(k, str) and SECRET_FIELD.search(k) and v not in (None, "")
                    else mask(v)) for k, v in data.items()}
    if isinstance(data, list):
        return [mask(v) for v in data]
    return data


def age(when: datetime | None, now: datetime | None = None) -> str:
    """kubectl's ages: 45s, 12m, 5h, 3d."""
    if when is None:
        return "-"
    seconds = ((now or datetime.now(UTC)) - when).total_seconds()
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= 2 * size or (unit == "m" and seconds >= size):
            return f"{int(seconds // size)}{unit}"
    return f"{max(0, int(seconds))}s"


def until(when: datetime | None, now: datetime | None = None) -> str:
    """How long until ``when``, in :func:`age`'s units ("0s" once it passed)."""
    if when is None:
        return "-"
    return age(now or datetime.now(UTC), when)


@dataclass(slots=True)
class Shown:
    """One resource and what the processes say of it."""

    kind: keys.Kind
    key: keys.Key
    namespace: str | None
    name: str
    doc: Any = None  # the resource (its document type), None if it does not decode
    raw: Any = None  # the stored JSON, for -o json/yaml
    error: str = ""  # why ``doc`` is None
    binding: Binding | None = None
    status: ApplicationStatus | ClusterStatus | None = None
    value: MetricValue | None = None
    notes: list[str] = field(default_factory=list)  # the joined keys that did not decode
    # an override's: how many applications and clusters it selects now
    selects: tuple[int, int] | None = None
    registration: Registration | None = None  # a pull cluster's agent's (docs/agents.md)
    exported: Exported | None = None  # an Export's: what the exporter made of it
    inventoried: InventoryRead | None = None  # an Inventory's: what the inventory made of it

    @property
    def labels(self) -> Mapping[str, str]:
        return self.doc.metadata.labels if self.doc is not None else {}

    @property
    def ref(self) -> str:
        return f"{self.kind.name.lower()}/{self.namespace + '/' if self.namespace else ''}" \
               f"{self.name}"


def agent_credential(s: Shown) -> tuple[str, str]:
    """A pull cluster's agent's etcd credential, short (``get``'s CREDENTIAL) and whole
    (``describe``'s Agent line): when it expires (it renews itself with a quarter of its
    life left), that it was revoked, that the agent runs with no credential of its own
    (it is heard, and never joined: an etcd without authentication, as the demo's), or
    that it never joined."""
    st = s.registration.status if s.registration is not None else None
    if st is not None and st.revoked is not None and not st.user:
        return f"revoked {age(st.revoked)} ago", f"revoked {age(st.revoked)} ago"
    if st is not None and st.user:
        short = f"expires in {until(st.expires)}" if st.expires is not None \
            else "never expires"
        return short, (f"etcd user {st.user}, cluster identity {st.identity}, credential "
                       + short)
    heard = isinstance(s.status, ClusterStatus) and s.status.status.state in (
        Reachability.ONLINE, Reachability.UNHEALTHY)
    if heard:
        return "none of its own", ("heard, with no credential of its own: it never joined "
                                   "(an etcd without authentication lets it in as it is)")
    return "not joined", "not joined (berth cluster token create, berth agent join)"


def _decoded(kv: KV | None, type_: type[Any], notes: list[str]) -> Any:
    if kv is None:
        return None
    try:
        return decode(kv.value, type_, kv.key)
    except StoreError as exc:
        notes.append(str(exc))
        return None


def _joins(kind: keys.Kind, ref: keys.KeyRef) -> list[tuple[str, keys.Key, type[Any]]]:
    """The keys the processes write of a resource: (attribute, key, document type)."""
    ns = ref.namespace or ""
    out: list[tuple[str, keys.Key, type[Any]]] = []
    if kind.name in ("Application", "Cluster", "MagnumCluster"):
        out.append(("binding", keys.binding_key(kind.name, ns, ref.name), Binding))
    if kind.name in ("Application", "Cluster"):
        out.append(("status", keys.status_key(kind.name, ns, ref.name),
                    ApplicationStatus if kind.name == "Application" else ClusterStatus))
    if kind.name == "Cluster" and ns:
        out.append(("registration", keys.registration_key(f"{ns}/{ref.name}"), Registration))
    if kind.name in ("Metric", "GlobalMetric"):
        out.append(("value", keys.metric_value_key(ref.name, ref.namespace), MetricValue))
    if kind.name == "Export":
        out.append(("exported", keys.exported_key(ref.name), Exported))
    if kind.name == "Inventory":
        out.append(("inventoried", keys.status_key("Inventory", "", ref.name), InventoryRead))
    return out


def _shown(kind: keys.Kind, kv: KV, fetched: Mapping[str, KV]) -> Shown:
    """A resource joined with the keys the processes write of it (already read)."""
    ref = keys.parse_key(kv.key)
    out = Shown(kind, kv.key, ref.namespace, ref.name)
    try:
        out.raw = msgspec.json.decode(kv.value)
        out.doc = decode(kv.value, RESOURCE_TYPES[kind.name], kv.key)
        meta = out.doc.metadata
        why = keys.misplaced(kv.key, meta.name, meta.namespace)
        if why is not None:  # as every process refuses it: shown, never as the resource
            out.doc, out.error = None, f"{why}: ignored by every berth process"
    except (StoreError, msgspec.DecodeError) as exc:
        out.error = str(exc)
    for attr, key, type_ in _joins(kind, ref):
        setattr(out, attr, _decoded(fetched.get(key), type_, out.notes))
    return out


def shown_all(store: Store, kind: keys.Kind, kvs: list[KV]) -> list[Shown]:
    """Resources joined, the joined keys read together (128 per round trip)."""
    strays = [kv.key for kv in kvs if keys.problem(kv.key) is not None]
    for key in strays:  # written by hand; berth writes none like it
        print(f"berth: ignoring {key!r}: {keys.problem(key)}", file=sys.stderr)
    kvs = [kv for kv in kvs if keys.problem(kv.key) is None]
    wanted = [key for kv in kvs for _, key, _ in _joins(kind, keys.parse_key(kv.key))]
    fetched = store.get_many(wanted) if wanted else {}
    out = [_shown(kind, kv, fetched) for kv in kvs]
    if kind.name in ("Override", "GlobalOverride") and out:
        _count_selected(store, out)
    return out


class Identity(msgspec.Struct):
    name: str
    namespace: str | None = None
    labels: dict[str, str] = {}


class Named(msgspec.Struct):
    """Of any document, who it is: what selectors read."""

    metadata: Identity


def _count_selected(store: Store, overrides: list[Shown]) -> None:
    """How many applications and clusters each override selects now."""
    def every(kind: str) -> list[Identity]:
        found = []
        for kv in store.list_prefix(keys.resource_prefix(kind))[0]:
            try:
                found.append(decode(kv.value, Named, kv.key).metadata)
            except StoreError:
                continue  # shown as such by its own listing
        return found

    apps, clusters = every("Application"), every("Cluster")
    for s in overrides:
        if s.doc is None:
            continue
        s.selects = (
            sum(1 for m in apps if selects_application(s.doc, m.namespace or "", m.name,
                                                       m.labels)),
            sum(1 for m in clusters if selects_cluster(s.doc, Where(m.name, m.namespace,
                                                                   m.labels))))


def shown(store: Store, kind: keys.Kind, kv: KV) -> Shown:
    return shown_all(store, kind, [kv])[0]


def listed(store: Store, kind: keys.Kind, namespace: str | None) -> list[Shown]:
    """Every resource of ``kind`` (in ``namespace`` if given), joined."""
    prefix = keys.resource_prefix(kind.name, namespace if kind.namespaced else None)
    return shown_all(store, kind, store.list_prefix(prefix)[0])


def one(store: Store, kind: keys.Kind, namespace: str | None, name: str) -> Shown | None:
    key = keys.resource_key(kind.name, name, namespace if kind.namespaced else None)
    kv = store.get(key)
    return shown(store, kind, kv) if kv is not None else None


# -- label selectors ----------------------------------------------------------------

_TERM = re.compile(r"^\s*(!)?\s*([A-Za-z0-9_./-]+)\s*(?:(==|=|!=)\s*([A-Za-z0-9_.:/+-]*))?\s*$")


def selector(text: str) -> list[tuple[str, str, str]]:
    """``-l``: ``k=v``, ``k==v``, ``k!=v``, ``k`` (exists), ``!k`` (does not), comma-joined
    (all must hold); ValueError names the term that does not parse."""
    terms = []
    for part in text.split(","):
        m = _TERM.match(part)
        if not m or (m.group(1) and m.group(3)):
            raise ValueError(f"-l {text!r}: cannot parse {part.strip()!r} (k=v, k!=v, k, !k)")
        neg, key, op, value = m.groups()
        terms.append((key, "!" if neg else (op or "exists").replace("==", "="), value or ""))
    return terms


def selected(labels: Mapping[str, str], terms: list[tuple[str, str, str]]) -> bool:
    for key, op, value in terms:
        have = labels.get(key)
        if (op == "exists" and have is None) or (op == "!" and have is not None) or (
                op == "=" and have != value) or (op == "!=" and have == value):
            return False
    return True


class Copy(Protocol):
    """A copy on one cluster as READY counts it (a ClusterApplied, or a view of one)."""

    @property
    def generation(self) -> int: ...

    @property
    def available(self) -> int | None: ...

    @property
    def desired(self) -> int | None: ...


def ready(applied: Mapping[str, Copy], targets: set[str], per_cluster: bool = False) -> str:
    """kubectl's READY: replicas available / desired, summed over the copies on
    ``targets`` (cluster ids, ``<namespace>/<name>``; empty: every copy) — or, with
    ``per_cluster``, each (``east=2/2``); ``-`` for none with replicas (only
    configuration, say) or not judged yet. ``berth get apps`` and the console."""
    counted = [(cid, a) for cid, a in sorted(applied.items())
               if a.generation > 0 and a.desired is not None and (cid in targets or not targets)]
    if not counted:
        return "-"
    if per_cluster:
        return ",".join(f"{cid.rsplit('/', 1)[-1]}={a.available or 0}/{a.desired}"
                        for cid, a in counted)
    return (f"{sum(a.available or 0 for _, a in counted)}/"
            f"{sum(a.desired or 0 for _, a in counted)}")


def target_note(t: Target) -> str:
    """`` (3 replicas, score 0.8100)`` after a target's name: what it was given."""
    notes = [f"{t.replicas} replica{'s' if t.replicas != 1 else ''}"] if t.replicas else []
    notes += [f"score {t.score:.4f}"] if t.score is not None else []
    return f" ({', '.join(notes)})" if notes else ""


def decided(b: Binding) -> str:
    """When a Binding's targets last changed and when it was last written: a decision
    that stands is not written again, so its reason is as of the latter."""
    out = f"; on these targets since {b.spec.scheduled:%Y-%m-%d %H:%M:%S}Z" if (
        b.spec.scheduled) else ""
    written = b.metadata.modified
    return out + (f"; reason as of {written:%Y-%m-%d %H:%M:%S}Z" if written else "")


def priority(spec: Any) -> str:
    """An application's priority as written (the scheduler resolves a class's value when
    it decides) and what it gives up for a more important one."""
    given = (f"class {spec.priority_class_name}" if spec.priority_class_name
             else str(spec.priority) if spec.priority is not None
             else "the default class's, else 0")
    gives = spec.preemptible
    up = ("moved where it fits elsewhere, else stopped" if gives is None or (
        gives.move and gives.stop) else "moved, never stopped" if gives.move
        else "stopped, never moved" if gives.stop else "neither moved nor stopped")
    return (f"{given}; preemption {spec.preemption_policy or 'by its class'}; "
            f"for room it is {up}")


def room(b: Binding | None) -> list[str]:
    """A plan making room for the application of Binding ``b``, victim by victim; the
    plan that placed it; or whom it made room for (docs/scheduler.md "Priority and
    preemption"). For describe, explain and the console alike."""
    if b is None:
        return []
    st, out = b.status, []
    if st.preemption is not None:
        p = st.preemption
        out.append(f"Making room: on {p.cluster} until {p.deadline:%Y-%m-%d %H:%M:%S}Z "
                   f"(plan {p.plan})")
        out += [f"  {v.application} (priority {v.priority}): {v.action}"
                + (f" to {', '.join(v.to)}" if v.to else "") for v in p.victims]
    if st.yielded_to:
        out.append(f"Made room:   for {st.yielded_to} (plan {st.yielded_plan})")
    made = st.explanation[0].get("room_made") if st.explanation else None
    if isinstance(made, dict):
        out.append(f"Room made:   on {made.get('on')} (plan {made.get('plan')}) by "
                   + ", ".join(map(str, made.get("by") or [])))
    return out


def table(rows: list[list[str]], gap: int = 3) -> str:
    """Rows as columns padded to their widest cell, ``gap`` spaces apart (kubectl's
    tables: 3); the last column unpadded."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join((" " * gap).join(c.ljust(w) for c, w in zip(r, widths, strict=True))
                     .rstrip() for r in rows)
