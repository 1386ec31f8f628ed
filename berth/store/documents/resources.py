"""Compute resources: Kubernetes quantities, and what a workload asks for.

A :class:`Resources` is four integers — CPU in millicores, memory in bytes,
GPUs, pods — enough for the scheduler to ask "does it fit" and for the
propagator's observer to say what a cluster has. Quantities are parsed as
Kubernetes writes them (``500m``, ``1.5``, ``128Mi``, ``1G``, ``2e3``); a
value that does not parse raises :class:`QuantityError` naming it.

:func:`demand` reads an application's manifest: which objects are divisible
(their replica field can be set per cluster), how many replicas the
application has, and what one replica asks for (the sum of its containers'
requests, or its init containers' largest, whichever is more — as the
Kubernetes scheduler counts a pod).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

GPU_RESOURCES = ("nvidia.com/gpu", "amd.com/gpu", "gpu.intel.com/i915")

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


@dataclass(frozen=True, slots=True)
class Resources:
    """CPU (millicores), memory (bytes), GPUs and pods."""

    cpu: int = 0
    memory: int = 0
    gpu: int = 0
    pods: int = 0

    @classmethod
    def of(cls, values: Mapping[str, Any], pods: int = 0) -> Resources:
        """From a Kubernetes resource list (``{"cpu": "500m", "memory": "1Gi"}``)."""
        cpu = math.ceil(quantity(values["cpu"]) * 1000) if "cpu" in values else 0
        memory = math.ceil(quantity(values["memory"])) if "memory" in values else 0
        gpu = sum(math.ceil(quantity(values[g])) for g in GPU_RESOURCES if g in values)
        if "pods" in values:
            pods = math.ceil(quantity(values["pods"]))
        return cls(cpu, memory, gpu, pods)

    def __add__(self, other: Resources) -> Resources:
        return Resources(self.cpu + other.cpu, self.memory + other.memory,
                         self.gpu + other.gpu, self.pods + other.pods)

    def __sub__(self, other: Resources) -> Resources:
        return Resources(self.cpu - other.cpu, self.memory - other.memory,
                         self.gpu - other.gpu, self.pods - other.pods)

    def times(self, n: int) -> Resources:
        return Resources(self.cpu * n, self.memory * n, self.gpu * n, self.pods * n)

    def max(self, other: Resources) -> Resources:
        return Resources(max(self.cpu, other.cpu), max(self.memory, other.memory),
                         max(self.gpu, other.gpu), max(self.pods, other.pods))

    def fits(self, free: Resources) -> bool:
        """Whether this much fits into ``free`` (each dimension)."""
        return (self.cpu <= free.cpu and self.memory <= free.memory and self.gpu <= free.gpu
                and self.pods <= free.pods)

    def how_many(self, free: Resources) -> int:
        """How many of this fit into ``free`` (a large number if it asks for nothing)."""
        counts = [f // n for n, f in ((self.cpu, free.cpu), (self.memory, free.memory),
                                      (self.gpu, free.gpu), (self.pods, free.pods)) if n > 0]
        return max(0, min(counts)) if counts else UNLIMITED

    def short(self, free: Resources) -> list[str]:
        """The dimensions in which this does not fit into ``free``."""
        return [name for name, want, have in (
            ("cpu", self.cpu, free.cpu), ("memory", self.memory, free.memory),
            ("gpu", self.gpu, free.gpu), ("pods", self.pods, free.pods)) if want > have]

    def __bool__(self) -> bool:
        return bool(self.cpu or self.memory or self.gpu or self.pods)

    def __str__(self) -> str:
        parts = [f"cpu={self.cpu}m"] if self.cpu else []
        if self.memory:
            parts.append(f"memory={_bytes(self.memory)}")
        if self.gpu:
            parts.append(f"gpu={self.gpu}")
        if self.pods:
            parts.append(f"pods={self.pods}")
        return ",".join(parts) or "nothing"


UNLIMITED = 1 << 40
NOTHING = Resources()


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


def pod_requests(pod_spec: Mapping[str, Any], where: str) -> Resources:
    """What one pod of ``pod_spec`` asks for, as the Kubernetes scheduler counts it."""
    def total(containers: Iterable[Any], field: str) -> list[Resources]:
        out = []
        for i, c in enumerate(containers or ()):
            requests = ((c or {}).get("resources") or {}).get("requests") or {}
            try:
                out.append(Resources.of(requests))
            except QuantityError as exc:
                raise QuantityError(f"{where}.{field}[{i}].resources.requests: {exc}") from exc
        return out

    running = NOTHING
    for r in total(pod_spec.get("containers") or (), "containers"):
        running = running + r
    for r in total(pod_spec.get("initContainers") or (), "initContainers"):
        running = running.max(r)
    overhead = pod_spec.get("overhead") or {}
    if overhead:
        running = running + Resources.of(overhead)
    return Resources(running.cpu, running.memory, running.gpu, 1)


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
