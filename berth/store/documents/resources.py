"""Compute resources: Kubernetes quantities, and what a workload asks for.

A :class:`Resources` holds CPU in millicores, memory in bytes, pods, and
every other resource by its Kubernetes name (ephemeral storage, huge pages,
GPUs and other extended resources) — enough for the scheduler to ask "does it
fit" and for the propagator's observer to say what a cluster has. Quantities
are parsed as Kubernetes writes them (``500m``, ``1.5``, ``128Mi``, ``1G``,
``2e3``); a value that does not parse raises :class:`QuantityError` naming it.

:func:`demand` reads an application's manifest: which objects are divisible
(their replica field can be set per cluster), how many replicas the
application has, and what one replica asks for, as the Kubernetes scheduler
counts a pod (:func:`pod_requests`).
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

# kind → the field path of its replica count (Jobs divide their parallelism).
REPLICA_FIELDS: dict[str, tuple[str, ...]] = {
    "Deployment": ("spec", "replicas"),
    "StatefulSet": ("spec", "replicas"),
    "ReplicaSet": ("spec", "replicas"),
    "Job": ("spec", "parallelism"),
}
# A custom resource says where its replica count is with this annotation
# (a dotted path such as ``spec.workers``); its pods' requests, if any, with
# ``berth.dev/replica-requests`` (``cpu=500m,memory=1Gi``).
REPLICAS_PATH = "berth.dev/replicas-path"
REPLICA_REQUESTS = "berth.dev/replica-requests"

_SUFFIX = {
    "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": Decimal(1),
    "k": Decimal(10) ** 3, "M": Decimal(10) ** 6, "G": Decimal(10) ** 9, "T": Decimal(10) ** 12,
    "P": Decimal(10) ** 15, "E": Decimal(10) ** 18,
    "Ki": Decimal(2) ** 10, "Mi": Decimal(2) ** 20, "Gi": Decimal(2) ** 30, "Ti": Decimal(2) ** 40,
    "Pi": Decimal(2) ** 50, "Ei": Decimal(2) ** 60,
}
_QUANTITY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)([a-zA-Z]*)$")


class QuantityError(ValueError):
    """A quantity, or a manifest field holding resources, that cannot be read."""


def quantity(value: Any) -> Decimal:
    """A Kubernetes quantity (``"250m"``, ``"1Gi"``, ``2``) as a Decimal."""
    if isinstance(value, bool):
        raise QuantityError(f"{value!r} is not a quantity")
    if isinstance(value, int | float):
        return Decimal(str(value))
    m = _QUANTITY.match(str(value).strip())
    if m is None or m.group(2) not in _SUFFIX or (
            "e" in m.group(1).lower() and m.group(2)):
        raise QuantityError(f"{value!r} is not a quantity (e.g. 500m, 2, 1Gi, 1.5G)")
    try:
        number = Decimal(m.group(1))
    except InvalidOperation as exc:
        raise QuantityError(f"{value!r} is not a quantity") from exc
    return number * _SUFFIX[m.group(2)]


Scalars = tuple[tuple[str, int], ...]  # (resource name, amount), sorted by name, none 0


@dataclass(frozen=True, slots=True)
class Resources:
    """CPU (millicores), memory (bytes), pods, and every other resource by its own
    name (``ephemeral-storage`` and ``hugepages-2Mi`` in bytes, ``nvidia.com/gpu``
    and any extended resource in units): a request for ``amd.com/gpu`` is
    met by ``amd.com/gpu`` alone, as on a Kubernetes Node."""

    cpu: int = 0
    memory: int = 0
    pods: int = 0
    scalar: Scalars = ()

    @staticmethod
    def of(values: Mapping[str, Any], pods: int = 0) -> Resources:
        """From a Kubernetes resource list (``{"cpu": "500m", "memory": "1Gi"}``).
        Workloads repeat a few resource lists: one read of each is kept (of those
        written in strings and integers alone, as manifests write them)."""
        items = tuple(values.items())
        if not all(type(k) is str and type(v) in _KEPT for k, v in items):
            return _read(values, pods)
        key = (items, pods)
        found = _READ.get(key)
        if found is None:
            found = _read(values, pods)
            if len(_READ) >= READ_LIMIT:
                _READ.clear()
            _READ[key] = found
        return found

    @staticmethod
    def counted(amounts: Mapping[str, int]) -> Resources:
        """From amounts as :meth:`listed` gives them (CPU already in millicores)."""
        return Resources(amounts.get("cpu", 0), amounts.get("memory", 0),
                         amounts.get("pods", 0),
                         tuple(sorted((k, v) for k, v in amounts.items()
                                      if k not in ("cpu", "memory", "pods") and v)))

    def listed(self) -> dict[str, int]:
        """Every resource that is not 0, by name (a cluster status's resource list)."""
        return {k: v for k, v in self.items() if v}

    def get(self, name: str) -> int:
        """The amount of one resource by its Kubernetes name."""
        if name == "cpu":
            return self.cpu
        if name == "memory":
            return self.memory
        if name == "pods":
            return self.pods
        return dict(self.scalar).get(name, 0)

    def items(self) -> list[tuple[str, int]]:
        """Every resource with its amount, 0s included for CPU, memory and pods."""
        return [("cpu", self.cpu), ("memory", self.memory), *self.scalar, ("pods", self.pods)]

    def _scalars(self, other: Resources, op: Callable[[int, int], int]) -> Scalars:
        if not other.scalar:
            return tuple((n, v) for n, v in ((n, op(v, 0)) for n, v in self.scalar) if v)
        mine, theirs = dict(self.scalar), dict(other.scalar)
        both = sorted(mine.keys() | theirs.keys())
        return tuple((n, v) for n in both if (v := op(mine.get(n, 0), theirs.get(n, 0))))

    def __add__(self, other: Resources) -> Resources:
        scalar = self._scalars(other, operator.add) if self.scalar or other.scalar else ()
        return Resources(self.cpu + other.cpu, self.memory + other.memory,
                         self.pods + other.pods, scalar)

    def __sub__(self, other: Resources) -> Resources:
        scalar = self._scalars(other, operator.sub) if self.scalar or other.scalar else ()
        return Resources(self.cpu - other.cpu, self.memory - other.memory,
                         self.pods - other.pods, scalar)

    def times(self, n: int) -> Resources:
        return Resources(self.cpu * n, self.memory * n, self.pods * n,
                         tuple((k, v * n) for k, v in self.scalar if v * n))

    def part(self, n: int, of: int) -> Resources:
        """``n/of`` of this, rounded up (what ``n`` of ``of`` pods hold)."""
        def up(v: int) -> int:
            return -(-v * n // of)
        return Resources(up(self.cpu), up(self.memory), up(self.pods),
                         tuple((k, up(v)) for k, v in self.scalar if up(v)))

    def max(self, other: Resources) -> Resources:
        scalar = self._scalars(other, max) if self.scalar or other.scalar else ()
        return Resources(max(self.cpu, other.cpu), max(self.memory, other.memory),
                         max(self.pods, other.pods), scalar)

    def fits(self, free: Resources) -> bool:
        """Whether this much fits into ``free``: every resource asked for (more than 0),
        as Kubernetes' NodeResourcesFit checks a pod — what is not asked for is not
        checked, however over-committed a cluster is in it."""
        return not self.short(free)

    def how_many(self, free: Resources) -> int:
        """How many of this fit into ``free`` (a large number if it asks for nothing)."""
        counts = [free.get(name) // n for name, n in self.items() if n > 0]
        return max(0, min(counts)) if counts else UNLIMITED

    def short(self, free: Resources) -> list[str]:
        """The resources asked for that ``free`` does not hold enough of."""
        return [name for name, want in self.items() if want > 0 and want > free.get(name)]

    def __bool__(self) -> bool:
        return bool(self.cpu or self.memory or self.pods or self.scalar)

    def __str__(self) -> str:
        parts = [f"cpu={self.cpu}m"] if self.cpu else []
        if self.memory:
            parts.append(f"memory={_bytes(self.memory)}")
        parts += [f"{name}={_bytes(v) if _in_bytes(name) else v}" for name, v in self.scalar]
        if self.pods:
            parts.append(f"pods={self.pods}")
        return ",".join(parts) or "nothing"


def _read(values: Mapping[str, Any], pods: int) -> Resources:
    """:meth:`Resources.of`, read afresh."""
    cpu = memory = 0
    scalar: dict[str, int] = {}
    for name, value in values.items():
        if name == "cpu":
            cpu = math.ceil(quantity(value) * 1000)
        elif name == "memory":
            memory = math.ceil(quantity(value))
        elif name == "pods":
            pods = math.ceil(quantity(value))
        else:
            amount = math.ceil(quantity(value))
            if amount:
                scalar[str(name)] = amount
    return Resources(cpu, memory, pods, tuple(sorted(scalar.items())))


# resource lists as read (their items, pods) → their Resources: a bounded memo
_READ: dict[tuple[tuple[tuple[str, Any], ...], int], Resources] = {}
READ_LIMIT = 1 << 12
_KEPT = (str, int)  # the types of value a kept read may hold (bool, 1.0 == 1: not)

UNLIMITED = 1 << 40
NOTHING = Resources()


def _in_bytes(name: str) -> bool:
    return name == "ephemeral-storage" or name.startswith("hugepages-")


def _bytes(n: int) -> str:
    for unit, size in (("Gi", 1 << 30), ("Mi", 1 << 20), ("Ki", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size}{unit}"
    return str(n)


def parse_requests(text: str) -> Resources:
    """``cpu=500m,memory=1Gi`` (the replica-requests annotation) as Resources."""
    values: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, eq, value = part.partition("=")
        if not eq:
            raise QuantityError(f"{part!r}: expected name=quantity")
        values[name.strip()] = value.strip()
    return Resources.of(values, pods=1)


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    """``value`` (a manifest's field) as a mapping; absent or empty: an empty one."""
    if not value:
        return {}
    if not isinstance(value, Mapping):
        raise QuantityError(f"{where}: expected a mapping, not {type(value).__name__} "
                            f"{str(value)[:40]!r}")
    return value


def _listed(value: Any, where: str) -> list[Any]:
    """``value`` (a manifest's field) as a list; absent or empty: an empty one."""
    if not value:
        return []
    if not isinstance(value, list):
        raise QuantityError(f"{where}: expected a list, not {type(value).__name__} "
                            f"{str(value)[:40]!r}")
    return value


# The resources a pod's own spec.resources may set (Kubernetes' PodLevelResources).
POD_LEVEL = ("cpu", "memory")


def pod_requests(pod_spec: Mapping[str, Any], where: str) -> Resources:
    """What one pod of ``pod_spec`` asks for, as the Kubernetes scheduler counts it
    (``resourcehelper.PodRequests``): its containers' requests added up, sidecars
    (init containers with ``restartPolicy: Always``) added to them, and the largest
    of that and each ordinary init container with the sidecars started before it;
    ``spec.resources.requests`` (pod-level) in place of the containers' CPU and
    memory where it sets them; then ``spec.overhead`` added."""
    def containers(field: str) -> list[tuple[Mapping[str, Any], Resources]]:
        """Each container of ``field`` with what it asks for."""
        out = []
        for i, c in enumerate(_listed(pod_spec.get(field), f"{where}.{field}")):
            at = f"{where}.{field}[{i}]"
            container = _mapping(c, at)
            resources = _mapping(container.get("resources"), f"{at}.resources")
            asked = _mapping(resources.get("requests"), f"{at}.resources.requests")
            try:
                out.append((container, Resources.of(asked)))
            except QuantityError as exc:
                raise QuantityError(f"{at}.resources.requests: {exc}") from exc
        return out

    running = NOTHING
    for _, asked in containers("containers"):
        running = running + asked
    sidecars = init = NOTHING
    for c, asked in containers("initContainers"):
        if c.get("restartPolicy") == "Always":
            running = running + asked
            sidecars = sidecars + asked
            init = init.max(sidecars)
        else:
            init = init.max(asked + sidecars)
    running = running.max(init)
    pod_level = _mapping(_mapping(pod_spec.get("resources"), f"{where}.resources")
                         .get("requests"), f"{where}.resources.requests")
    if pod_level:
        try:
            level = Resources.of({k: v for k, v in pod_level.items() if k in POD_LEVEL})
        except QuantityError as exc:
            raise QuantityError(f"{where}.resources.requests: {exc}") from exc
        running = Resources(level.cpu if "cpu" in pod_level else running.cpu,
                            level.memory if "memory" in pod_level else running.memory,
                            running.pods, running.scalar)
    overhead = _mapping(pod_spec.get("overhead"), f"{where}.overhead")
    if overhead:
        try:
            running = running + Resources.of(overhead)
        except QuantityError as exc:
            raise QuantityError(f"{where}.overhead: {exc}") from exc
    return Resources(running.cpu, running.memory, 1, running.scalar)


@dataclass(frozen=True, slots=True)
class Demand:
    """What an application asks of the clusters it runs on.

    ``replicas`` of ``per_replica`` can be divided among clusters (each
    divisible object gets a cluster's share); ``fixed`` is what every cluster
    it runs on carries whatever its share (bare Pods, for example).
    """

    replicas: int = 0  # 0: nothing divisible
    per_replica: Resources = NOTHING
    fixed: Resources = NOTHING
    whole: Resources = NOTHING  # the manifest as written, on one cluster

    def on(self, share: int | None) -> Resources:
        """What a cluster running ``share`` replicas carries (None: the whole manifest)."""
        if share is None:
            return self.whole
        return self.per_replica.times(share) + self.fixed


NO_DEMAND = Demand()


def _get(obj: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    value: Any = obj
    for part in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(part)
    return value


def replica_path(obj: Mapping[str, Any]) -> tuple[str, ...] | None:
    """Where an object keeps the replica count berth divides; None if not divisible."""
    meta = obj.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, Mapping) else None
    if isinstance(annotations, Mapping) and isinstance(annotations.get(REPLICAS_PATH), str):
        return tuple(p for p in annotations[REPLICAS_PATH].split(".") if p)
    return REPLICA_FIELDS.get(str(obj.get("kind")))


def with_replicas(obj: dict[str, Any], share: int) -> dict[str, Any]:
    """A copy of a divisible object with its replica field set to ``share``."""
    path = replica_path(obj)
    if not path:
        return obj
    out = dict(obj)
    node = out
    for part in path[:-1]:
        child = node.get(part)
        node[part] = dict(child) if isinstance(child, Mapping) else {}
        node = node[part]
    node[path[-1]] = share
    return out


def demand(manifest: Iterable[Any]) -> Demand:
    """An application's demand, read from its manifest; QuantityError names the field."""
    replicas = 0
    per = fixed = whole = NOTHING
    for i, obj in enumerate(manifest):
        if not isinstance(obj, Mapping):
            continue
        where = f"spec.manifest[{i}]"
        path = replica_path(obj)
        kind = obj.get("kind")
        if path:
            count = _get(obj, path)
            n = 1 if count is None else count
            if not isinstance(n, int) or isinstance(n, bool) or n < 0:
                raise QuantityError(f"{where}.{'.'.join(path)}: {count!r} is not a replica "
                                    "count")
            replicas = max(replicas, n)
            before = per
            template = _get(obj, ("spec", "template", "spec"))
            meta = obj.get("metadata") or {}
            annotations = meta.get("annotations") if isinstance(meta, Mapping) else None
            text = annotations.get(REPLICA_REQUESTS) if isinstance(annotations, Mapping) else None
            if isinstance(text, str):
                try:
                    per = per + parse_requests(text)
                except QuantityError as exc:
                    raise QuantityError(f"{where}.metadata.annotations[{REPLICA_REQUESTS}]: "
                                        f"{exc}") from exc
            elif isinstance(template, Mapping):
                per = per + pod_requests(template, f"{where}.spec.template.spec")
            else:
                per = per + Resources(pods=1)
            whole = whole + (per - before).times(n)
        elif kind == "Pod" and isinstance(obj.get("spec"), Mapping):
            fixed = fixed + pod_requests(obj["spec"], f"{where}.spec")
    return Demand(replicas, per, fixed, whole + fixed)
