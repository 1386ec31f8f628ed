"""A pull cluster's work, and what its agent says back (docs/agents.md).

The propagator decides what each cluster runs; for a cluster in ``Pull`` mode
it writes that decision as data, one :class:`Work` per application placed
there, under the cluster's own prefix (``/berth/v1/work/<cluster>/...``):
the manifest as that cluster runs it (overrides rendered, the generation the
rollout gives it, the share of a divided application, the Secrets' data) and
the intent, apply or delete. The cluster's agent — the only other reader of
that prefix — carries it out and answers under its own prefix
(``/berth/v1/agents/<cluster>/...``): a :class:`Report` per work, naming the
work's revision it acted on, and a :class:`Heartbeat` on its lease.

A work is state, not a command: it says what should be there now, so an agent
that was away for a day catches up from the works as they are, and a work
that vanished without saying ``Delete`` deletes nothing.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

import msgspec

from berth.store.documents.application import HealthRule
from berth.store.documents.decisions import (
    Capacity,
    ClusterApplied,
    KubeObjectRef,
    Reachability,
    StatusMeta,
)
from berth.store.documents.tenancy import Identity


class Intent(StrEnum):
    """What a work asks of its cluster."""

    APPLY = "Apply"  # these objects, at this generation, there
    DELETE = "Delete"  # the application leaves the cluster: remove what it applied


class WorkMeta(msgspec.Struct, omit_defaults=True):
    """Whose work it is: the application's name and namespace, and the cluster's id."""

    name: str
    namespace: str
    cluster: str  # "<namespace>/<name>"
    digest: str = ""  # of a Work's spec: what tells its writer it would write the same


class WorkSpec(msgspec.Struct, omit_defaults=True):
    intent: Intent = Intent.APPLY
    generation: int = 0  # the application's generation these objects are of
    objects: list[dict[str, Any]] = []  # as the cluster runs them, in apply order
    replicas: int | None = None  # a divided application's share (set in ``objects``)
    skip: list[KubeObjectRef] = []  # Jobs complete at this generation: never created again
    adopt: bool = False  # conflictResolution: Overwrite
    propagation: str = "Background"  # how its objects are deleted
    rules: list[HealthRule] = []  # how its custom resources are judged
    # the overrides that made this copy, and a fingerprint of what they made ("": none)
    overrides: list[str] = []
    rendered: str = ""
    # whom the agent applies and removes them as (its namespace's policy's identity,
    # docs/teams.md; None: the agent's own credential)
    identity: Identity | None = None
    # Placement only (``spec.deployedBy``): another tool deploys the copy; the agent reads
    # these objects and judges them, never writing or removing them (``objects`` empty).
    observe: list[KubeObjectRef] = []


class Work(msgspec.Struct, tag_field="kind", tag="Work"):
    """``/berth/v1/work/<cluster ns>/<cluster>/<namespace>/<name>``, the propagator's."""

    metadata: WorkMeta
    spec: WorkSpec
    api: str = "kubernetes"


class ReportState(msgspec.Struct, omit_defaults=True):
    """What the agent did of one work, and what its objects show."""

    work: int = 0  # the revision of the work acted on (its mod_revision)
    intent: Intent = Intent.APPLY
    # what is on the cluster: the generation applied (0: objects recorded before their
    # first apply), the objects, and the copy's health as the agent judges it
    applied: ClusterApplied | None = None
    error: str = ""  # the cluster could not be reached, an object is another's: retried
    refused: str = ""  # the cluster refused the manifest: not retried for this work
    cleared: bool = False  # a Delete carried out: nothing of the application is left
    held: str = ""  # a deletion held back, and why (docs/agents.md "Coming back")
    observed: datetime | None = None


class Report(msgspec.Struct, tag_field="kind", tag="Report"):
    """``/berth/v1/agents/<cluster ns>/<cluster>/reports/<namespace>/<name>``."""

    metadata: WorkMeta
    status: ReportState
    api: str = "kubernetes"


class AgentState(msgspec.Struct, omit_defaults=True):
    """What the leading agent of a cluster says of it, while its lease lives."""

    agent: str = ""  # the leading replica's identity
    state: Reachability | None = None  # as its probe of the API server found it
    reason: str = ""
    custom_resources: list[str] = []
    capacity: Capacity | None = None
    since: datetime | None = None  # when this replica began to lead
    probed: datetime | None = None
    expires: datetime | None = None  # when its etcd credential does (None: never)
    held: str = ""  # deletions held back (a bounded share at once), and why
    version: str = ""  # the agent's own (berth's) version
    kubernetes: str = ""  # the cluster's, as its API server says ("": not known)


class Heartbeat(msgspec.Struct, tag_field="kind", tag="Heartbeat"):
    """``/berth/v1/agents/<cluster ns>/<cluster>/heartbeat``, on the leader's lease."""

    metadata: StatusMeta
    status: AgentState
    api: str = "kubernetes"


class Removals(msgspec.Struct, tag_field="kind", tag="Removals"):
    """``/berth/v1/agents/<cluster ns>/<cluster>/removals``: when the agent began each
    removal of its window (its bounded share at once), kept across its restarts."""

    metadata: StatusMeta
    times: list[datetime] = []
    api: str = "kubernetes"


AgentDocument = Report | Heartbeat | Removals  # what an informer of the agents' prefix reads

__all__ = ["AgentDocument", "AgentState", "Heartbeat", "Intent", "Removals", "Report",
           "ReportState", "Work", "WorkMeta", "WorkSpec"]
