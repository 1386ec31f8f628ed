"""Documents written by processes: Bindings (scheduler) and status (propagator).

One writer per key: the scheduler alone writes a Binding, the propagator
alone writes a status document. Neither copies the manifest. The top-level
fields (``kind``, ``api``, ``metadata``, ``spec``/``status``) are always
written, defaults included; nested fields are left out when at their default.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

import msgspec

from berth.store.documents.base import ObjectRef
from berth.store.documents.rollouts import RolloutState


class Target(msgspec.Struct, omit_defaults=True):
    """One chosen place for a resource, with the score it was chosen by."""

    kind: str
    name: str
    namespace: str | None = None
    score: float | None = None
    replicas: int | None = None  # this cluster's share of a divided application


class BindingSpec(msgspec.Struct, omit_defaults=True):
    resource: ObjectRef
    generation: int  # the resource generation this decision was made for
    targets: list[Target] = []
    scheduled: datetime | None = None  # when targets last changed
    # The ledger id of the decision that last changed targets or shares (its time):
    # the propagator annotates what it applies with it (docs/ledger.md).
    decision: str = ""


class BindingState(StrEnum):
    """What a Binding says of its decision. A closed set (the package's note says how
    code branches on one)."""

    SCHEDULED = "Scheduled"  # placed on its targets (a move may be held back: ``held``)
    PENDING = "Pending"  # deferrable work held until ``deferred_until``, on no target
    UNSCHEDULABLE = "Unschedulable"  # nothing fits now (kept where it runs, if anywhere)


class HeldBy(StrEnum):
    """The anti-flap or pace rule holding a better placement back (docs/antiflap.md,
    docs/pace.md); NOTHING ("", falsy) while none does."""

    NOTHING = ""
    MARGIN = "margin"
    HOLD = "hold"
    MIN_DWELL = "min_dwell"
    BUDGET = "budget"
    SETTLE = "settle"
    WINDOW = "window"
    IN_TRANSITION = "in_transition"
    PER_MINUTE = "per_minute"


class Yield(StrEnum):
    """What a victim of a preemption gives up: its copy on the cluster is moved to
    another where it fits (make-before-break), or stopped (it fits nowhere else)."""

    MOVE = "move"
    STOP = "stop"


class Victim(msgspec.Struct, omit_defaults=True):
    """An application that makes room in a preemption plan."""

    application: str  # <namespace>/<name>
    priority: int
    action: Yield
    to: list[str] = []  # move: the clusters it goes to (namespace/name)


class Preemption(msgspec.Struct, omit_defaults=True):
    """A plan to make room for the application of this Binding (docs/scheduler.md
    "Priority and preemption"): the room it frees on ``cluster`` is reserved for the
    application until it is placed there or ``deadline`` passes."""

    cluster: str  # where room is made: <namespace>/<name>
    deadline: datetime
    victims: list[Victim]
    reserved: ResourceList = {}  # what is held for the application there
    plan: str = ""  # the plan's id (its time, as ledger ids are)


class BindingStatus(msgspec.Struct, omit_defaults=True):
    state: BindingState | None = None  # None: not decided yet
    reason: str = ""  # for people; what code reads is a field
    # the anti-flap or pace rule holding a better placement back, while it does (the
    # Binding keeps its targets)
    held: HeldBy = HeldBy.NOTHING
    deferred_until: datetime | None = None  # Pending: when the work is planned to start
    # Unschedulable: a plan to make room for it, while one runs
    preemption: Preemption | None = None
    # Its copy moved or stopped to make room (the preemptor, <namespace>/<name>, and the
    # plan's id): it makes no room in turn while this stands.
    yielded_to: str = ""
    yielded_plan: str = ""
    explanation: list[dict[str, Any]] = []
    # The scheduler leader's term it was written in (its election key's create
    # revision; the write required it, docs/scheduler.md "Leadership is a fence").
    term: int = 0


class MovesStarted(msgspec.Struct, tag_field="kind", tag="MovesStarted"):
    """The moves the scheduler's leader started lately, for the next leader
    (``/berth/v1/scheduler/moves``; written with each move's Binding, in its
    transaction). Each entry is ``[second, moves]``: a second since the epoch (UTC)
    and how many moves started by its end — every move of the last minute, which the
    pace's ``perMinute`` counts, and the optional ones the anti-flap ``budget``
    counts, none older than its interval. A move an application's deletion took
    with its Binding still counts here."""

    started: list[tuple[int, int]] = []
    optional: list[tuple[int, int]] = []


class BindingMeta(msgspec.Struct, omit_defaults=True):
    name: str
    namespace: str | None = None
    uid: str | None = None
    created: datetime | None = None
    modified: datetime | None = None


class Binding(msgspec.Struct, tag_field="kind", tag="Binding"):
    metadata: BindingMeta
    spec: BindingSpec
    status: BindingStatus = msgspec.field(default_factory=BindingStatus)
    api: str = "scheduling"


class StatusMeta(msgspec.Struct, omit_defaults=True):
    name: str
    namespace: str | None = None
    # The propagator replica that wrote this version of an application's or a cluster's
    # status (its identity, as its claims name it; "": one replica serves every cluster):
    # the write required its claims of the clusters it wrote about.
    writer: str = ""


# Amounts by resource name: ``cpu`` in millicores, ``memory``, ``ephemeral-storage``
# and ``hugepages-*`` in bytes, ``pods`` and extended resources (``nvidia.com/gpu``)
# in units; a resource not listed is 0.
ResourceList = dict[str, int]


class Capacity(msgspec.Struct, omit_defaults=True):
    """What a cluster's Nodes offer and its Pods ask for, as the observer last saw it.

    ``placed`` counts, per application (``<namespace>/<name>``), the pods of
    berth's workloads included in ``requested``: the scheduler assumes the
    rest of what it placed there until they show up.
    """

    allocatable: ResourceList = {}
    requested: ResourceList = {}
    nodes: int = 0
    placed: dict[str, int] = {}
    observed: datetime | None = None


class Reachability(StrEnum):
    """How a cluster answered its last probe (the propagator's, or its agent's for a
    pull cluster). A closed set (the package's note says how code branches on one)."""

    ONLINE = "ONLINE"  # its API server answers and berth may apply there
    UNHEALTHY = "UNHEALTHY"  # it answers, but says it is not healthy
    OFFLINE = "OFFLINE"  # it does not answer (or its agent stopped beating)


class Endpoint(msgspec.Struct, omit_defaults=True, frozen=True,
               rename={"ca": "certificate-authority-data"}):
    """Where a push cluster's API server is, as its kubeconfig says: no credential, so
    that a process that may not read credentials can say where the cluster is (the
    exporter, in a ClusterProfile's ``accessProviders``)."""

    server: str
    ca: str = ""  # its CA, PEM in base64 as a kubeconfig holds it ("": the system's)


class ClusterState(msgspec.Struct, omit_defaults=True):
    state: Reachability | None = None  # None: not probed yet
    reason: str = ""
    custom_resources: list[str] = []
    probed: datetime | None = None
    capacity: Capacity | None = None
    # When it last came back ONLINE after it was UNHEALTHY or OFFLINE; kept while it
    # stays ONLINE. What the scheduler's ``settle`` counts from, whichever scheduler
    # leads (a new leader did not see the cluster come back).
    returned: datetime | None = None
    # When it was first seen ONLINE; kept whatever follows. None: never yet (a cluster
    # whose first ONLINE follows only a wait for its agent to join has not come back).
    joined: datetime | None = None
    # A pull cluster's agent holds removals back (a bounded share at once), and why.
    held: str = ""
    version: str = ""  # the Kubernetes version its API server says ("": not known)
    endpoint: Endpoint | None = None  # a push cluster's (None: a pull cluster's, or unknown)


class ClusterStatus(msgspec.Struct, tag_field="kind", tag="Cluster"):
    """``/berth/v1/status/clusters/<ns>/<name>``; the minimal form
    ``{"api":"kubernetes","kind":"Cluster","metadata":{...},"status":{"state":"ONLINE"}}``
    decodes."""

    metadata: StatusMeta
    status: ClusterState
    api: str = "kubernetes"


class KubeObjectRef(msgspec.Struct, omit_defaults=True, frozen=True,
                    rename={"api_version": "apiVersion"}):
    """One Kubernetes object berth applied: enough to find and delete it again."""

    api_version: str
    kind: str
    name: str
    namespace: str | None = None  # None for cluster-scoped kinds

    def __str__(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind} {where}{self.name}"

    @property
    def job(self) -> bool:
        """A Job (``batch/v1``): work that ends, done once complete."""
        return self.kind == "Job" and self.api_version == "batch/v1"


class HealthState(StrEnum):
    """How healthy an object, or a cluster's copy of an application, is by berth's rules
    per kind (docs/propagator.md "Health"). A closed set (the package's note says how
    code branches on one)."""

    HEALTHY = "Healthy"
    PROGRESSING = "Progressing"  # on its way: not yet available, nothing says it won't be
    UNHEALTHY = "Unhealthy"  # something says it will not become available by waiting
    UNKNOWN = "Unknown"  # not observed (yet), or a kind berth cannot judge


class ClusterApplied(msgspec.Struct, omit_defaults=True):
    """What is on one cluster: the generation applied there, its objects, the share of a
    divided application's replicas they were applied with, and whether that copy is
    available (its objects judged per kind, docs/propagator.md "Health").

    Status documents written before health was judged lack the health fields:
    ``health`` is then None, read as Unknown until the copy is judged again.
    """

    generation: int
    objects: list[KubeObjectRef] = []
    replicas: int | None = None
    since: datetime | None = None  # when this generation (or share) was applied here
    health: HealthState | None = None  # None: not judged yet
    reason: str = ""  # why it is not Healthy
    available: int | None = None  # replicas available / desired, over its workloads
    desired: int | None = None
    unhealthy: dict[str, str] = {}  # "<Kind> <ns>/<name>" → "<state>: <reason>", not Healthy
    new: bool = False  # the application never was available here: a move or a first placement
    done: list[KubeObjectRef] = []  # Jobs complete at this generation: never created again
    # The overrides that made this cluster's copy ("Override ns/name@generation"), and a
    # fingerprint of what they made ("": the manifest as written, no override applies).
    overrides: list[str] = []
    rendered: str = ""
    # Whom its objects were applied as: the user an identity's calls are made as
    # (docs/teams.md; "": berth's own credential there). Another now: applied again.
    identity: str = ""
    # Why the copy's next step is not applied yet: the object of the step before that
    # is not ready for it (docs/order.md; "": every step is applied). Applied again
    # until none waits. ``rerun``: Jobs of an older generation in the steps not
    # applied yet, run again (deleted and made anew) when their step comes.
    waiting: str = ""
    rerun: list[KubeObjectRef] = []
    # Another tool deployed these objects (``spec.deployedBy``): berth reads them, never
    # writes or removes them; the copy goes when that tool removes it.
    observed: bool = False


class FailedTarget(msgspec.Struct, omit_defaults=True):
    """A cluster the application could not become available on within ``move_timeout``:
    the scheduler avoids it for this generation for a while."""

    at: datetime
    generation: int
    reason: str = ""


class AppState(StrEnum):
    """What an application's status says of it (docs/propagator.md, "States"). A closed
    set (the package's note says how code branches on one)."""

    PENDING = "PENDING"  # placed nowhere yet, or nothing applied
    PROGRESSING = "PROGRESSING"  # applied, not yet available everywhere
    RUNNING = "RUNNING"  # available on every target at its generation
    MIGRATING = "MIGRATING"  # moving: running on the new targets, the old still there
    DEGRADED = "DEGRADED"  # running, but not as decided (a cluster unseen, a halt)
    WAITING = "WAITING"  # a target's copy waits for its dependencies there (dependsOn)
    FAILED = "FAILED"  # refused, or not running anywhere it should
    DELETING = "DELETING"  # being removed from its clusters


class ApplicationState(msgspec.Struct, omit_defaults=True):
    state: AppState | None = None  # None: no state yet
    reason: str = ""
    running_on: list[ObjectRef] = []
    generation: int = 0  # the generation every cluster in running_on has
    errors: dict[str, str] = {}  # "<namespace>/<name>" of a cluster → its last error
    # Per cluster ("<namespace>/<name>"), what berth put there: lets it clean up
    # after an application whose key vanished, and prune objects a new
    # generation no longer has.
    applied: dict[str, ClusterApplied] = {}
    rejected_generation: int = 0  # a cluster refused this generation's manifest
    failed: dict[str, FailedTarget] = {}  # clusters it could not become available on
    # The generation whose work is all done: every object a Job complete at it, on some
    # cluster (0: none). The scheduler does not move it; only a new generation runs again.
    finished: int = 0
    # Per cluster, the fingerprint of its copy as overrides made it, which the cluster
    # refused: not applied again until the application or an override changes it.
    refused: dict[str, str] = {}
    rollout: RolloutState | None = None  # where a new generation's rollout stands
    # The newest generation with a Job not complete yet on some cluster (0: none): the
    # scheduler moves it only by force, and the propagator stops it before it starts it
    # elsewhere (a running Job is moved break before make).
    working: int = 0
    # Per target ("<namespace>/<name>"), what its copy waits for before it is applied
    # there: a dependency not yet available there (docs/order.md "Dependencies").
    waits_for: dict[str, str] = {}


class ApplicationStatus(msgspec.Struct, omit_defaults=True, tag_field="kind", tag="Application"):
    metadata: StatusMeta
    status: ApplicationState
    api: str = "kubernetes"
