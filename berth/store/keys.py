"""The key layout (docs/architecture.md "Store contract"), in one place.

Every key berth reads or writes is laid out here, so the layout an operator sees
with ``etcdctl get --prefix /berth/`` is the layout the code uses. A key is a
:data:`Key` and a prefix a :data:`Prefix` (each a ``NewType`` of ``str``): the store
reads, writes, lists and watches nothing else, and only this module (and a key etcd
returns) makes them, so a key built by hand elsewhere does not type-check:

    /berth/v1/<plural>/<name>                         global kinds
    /berth/v1/<plural>/<namespace>/<name>             namespaced kinds
    /berth/v1/bindings/<plural>/<namespace>/<name>    the scheduler's decisions
    /berth/v1/status/<plural>/<namespace>/<name>      the propagator's observations
    /berth/v1/metricvalues/globalmetrics/<name>       the metrics-cache's values
    /berth/v1/metricvalues/metrics/<namespace>/<name>
    /berth/v1/metricvalues/picture                    ... and whether they are whole
    /berth/v1/leases/<process>                        leader election
    /berth/v1/scheduler/moves                         the moves its leader started lately
    /berth/v1/secrets/<plural>/[<namespace>/]<name>   the secrets a document carries
    /berth/v1/exported/exports/<name>                 what the exporter made of an Export
    /berth/v1/exported/applications/<namespace>/<name>   Argo CD's word on its copies
    /berth/v1/history/applications/<namespace>/<name> an application's last manifests
    /berth/v1/rollouts/applications/<namespace>/<name> what an operator says of a rollout
    /berth/v1/ledger/<plural>/<namespace>/<name>/<id>.<by>.<bytes>   what happened, why
    /berth/v1/events/<plural>/[<namespace>/]<name>/<source>.<reason>.<digest>   lately
    /berth/v1/work/<cluster ns>/<cluster>/<namespace>/<name>   what a pull cluster runs
    /berth/v1/agents/<cluster ns>/<cluster>/heartbeat          its leading agent, alive
    /berth/v1/agents/<cluster ns>/<cluster>/removals           its removals of late
    /berth/v1/agents/<cluster ns>/<cluster>/reports/<namespace>/<name>   what it did of a work
    /berth/v1/registrations/<cluster ns>/<cluster>             its agent's registration
    /berth/v1/registrations/<cluster ns>/<cluster>/request     ... a bootstrap token's join
    /berth/v1/renewals/<cluster ns>/<cluster>                  its agent's request to renew
    /berth/v1/leases/propagator/members/<identity>             a propagator replica, alive
    /berth/v1/leases/propagator/clusters/<cluster ns>/<cluster>   the replica owning it
    /berth/v1/bench/<path>                            a benchmark's floor (no process reads it)

Secrets live apart so that etcd's roles can keep each kind's from every
process but the one that uses it (scripts/etcd-secure.sh). So does a pull
cluster's work (it carries the Secrets' data): each agent's role reads its own
cluster's work prefix and writes its own agent prefix, and nothing else.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import NewType

Key = NewType("Key", str)  # one key, as laid out here (or as etcd returned it)
Prefix = NewType("Prefix", str)  # a prefix of keys, as laid out here
NO_KEY = Key("")  # what a value that is stored nowhere has for a key

ROOT = Prefix("/berth/v1/")
BINDINGS = Prefix(ROOT + "bindings/")
STATUS = Prefix(ROOT + "status/")
METRIC_VALUES = Prefix(ROOT + "metricvalues/")
METRIC_PICTURE = Key(METRIC_VALUES + "picture")
LEASES = Prefix(ROOT + "leases/")
# What one scheduler leader hands the next: the moves it started lately (the pace's)
SCHEDULER_MOVES = Key(ROOT + "scheduler/moves")
SECRETS = Prefix(ROOT + "secrets/")
CLUSTER_CREDENTIALS = Prefix(SECRETS + "clusters/")
HISTORY = Prefix(ROOT + "history/")
ROLLOUTS = Prefix(ROOT + "rollouts/")
WORK = Prefix(ROOT + "work/")
AGENTS = Prefix(ROOT + "agents/")
REGISTRATIONS = Prefix(ROOT + "registrations/")
# An agent's renewal: a prefix of its own, so that a cluster's agent alone (no bootstrap
# token's user) may write that cluster's key there, and the approver lists only these.
RENEWALS = Prefix(ROOT + "renewals/")
EXPORTED = Prefix(ROOT + "exported/")
LEDGER = Prefix(ROOT + "ledger/")
EVENTS = Prefix(ROOT + "events/")
BENCH = Prefix(ROOT + "bench/")  # a benchmark's floor: nothing of berth's

# Names: Krake allows underscores (heat_demand_zone_1) and Kubernetes allows dots.
# Whole strings (fullmatch): "$" would also match before a final newline ("evil\n").
NAME_RE = re.compile(r"[A-Za-z0-9]([A-Za-z0-9_.-]{0,251}[A-Za-z0-9])?")
NAMESPACE_RE = re.compile(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?")


@dataclass(frozen=True, slots=True)
class Kind:
    """What the store knows of a kind: its API group, key segment and scope."""

    name: str
    api: str
    plural: str
    namespaced: bool


KINDS: dict[str, Kind] = {
    k.name: k
    for k in (
        Kind("GlobalMetricsProvider", "core", "globalmetricsproviders", False),
        Kind("MetricsProvider", "core", "metricsproviders", True),
        Kind("GlobalMetric", "core", "globalmetrics", False),
        Kind("Metric", "core", "metrics", True),
        Kind("GlobalCloud", "infrastructure", "globalclouds", False),
        Kind("Cloud", "infrastructure", "clouds", True),
        Kind("Cluster", "kubernetes", "clusters", True),
        Kind("Application", "kubernetes", "applications", True),
        Kind("Project", "openstack", "projects", True),
        Kind("MagnumCluster", "openstack", "magnumclusters", True),
        Kind("GlobalOverride", "core", "globaloverrides", False),
        Kind("Override", "core", "overrides", True),
        Kind("Pace", "core", "paces", False),
        Kind("PriorityClass", "core", "priorityclasses", False),
        Kind("Export", "core", "exports", False),
        Kind("Inventory", "core", "inventories", False),
        Kind("ClusterSet", "core", "clustersets", False),
        Kind("NamespacePolicy", "core", "namespacepolicies", False),
    )
}
BY_PLURAL: dict[str, Kind] = {k.plural: k for k in KINDS.values()}


def kind(name: str) -> Kind:
    """Look a kind up by its name (``Cluster``) or plural (``clusters``)."""
    found = KINDS.get(name) or BY_PLURAL.get(name)
    if found is None:
        raise KeyError(f"unknown kind {name!r}; known: {', '.join(sorted(KINDS))}")
    return found


def check_name(name: str, what: str = "name") -> None:
    """Raise ValueError unless ``name`` is a valid, key-safe resource name."""
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        raise ValueError(
            f"invalid {what} {name!r}: 1-253 ASCII letters, digits, '-', '_' or '.',"
            " starting and ending with a letter or digit"
        )


def check_namespace(namespace: str) -> None:
    """Raise ValueError unless ``namespace`` is a valid namespace name."""
    if not isinstance(namespace, str) or not NAMESPACE_RE.fullmatch(namespace):
        raise ValueError(
            f"invalid namespace {namespace!r}: 1-63 lower-case letters, digits or '-',"
            " starting and ending with a letter or digit"
        )


def _tail(k: Kind, name: str, namespace: str | None) -> str:
    if not isinstance(name, str):
        check_name(name)  # raises (and an unhashable name must not reach the cache)
    if namespace is not None and not isinstance(namespace, str):
        check_namespace(namespace)
    return _checked_tail(k.name, name, namespace)


@lru_cache(maxsize=1 << 14)  # keys are built again and again for the same resources
def _checked_tail(kind_name: str, name: str, namespace: str | None) -> str:
    """``plural/namespace/name`` once the names are valid (else ValueError, not cached)."""
    k = KINDS[kind_name]
    check_name(name)
    if not k.namespaced:
        if namespace:
            raise ValueError(f"{k.name} is a global kind: it has no namespace")
        return f"{k.plural}/{name}"
    if not namespace:
        raise ValueError(f"{k.name} is namespaced: a namespace is required")
    check_namespace(namespace)
    return f"{k.plural}/{namespace}/{name}"


def resource_key(kind_name: str, name: str, namespace: str | None = None) -> Key:
    """The key a user-owned resource lives at."""
    return Key(ROOT + _tail(kind(kind_name), name, namespace))


def resource_prefix(kind_name: str, namespace: str | None = None) -> Prefix:
    """The prefix of all resources of a kind (in one namespace if given)."""
    k = kind(kind_name)
    if namespace:
        check_namespace(namespace)
        return Prefix(f"{ROOT}{k.plural}/{namespace}/")
    return Prefix(f"{ROOT}{k.plural}/")


def binding_key(kind_name: str, namespace: str, name: str) -> Key:
    """The key of the scheduler's decision for a resource."""
    return Key(BINDINGS + _tail(kind(kind_name), name, namespace))


def binding_prefix(kind_name: str) -> Prefix:
    return Prefix(f"{BINDINGS}{kind(kind_name).plural}/")


def status_key(kind_name: str, namespace: str, name: str) -> Key:
    """The key of what the propagator observed of a resource."""
    return Key(STATUS + _tail(kind(kind_name), name, namespace))


def status_prefix(kind_name: str) -> Prefix:
    return Prefix(f"{STATUS}{kind(kind_name).plural}/")


def metric_value_key(name: str, namespace: str | None = None) -> Key:
    """The key of a metric's current value: GlobalMetric if no namespace, else Metric."""
    kind_name = "Metric" if namespace else "GlobalMetric"
    return Key(METRIC_VALUES + _tail(kind(kind_name), name, namespace))


def metric_value_prefix(namespace: str | None = None) -> Prefix:
    """The prefix of the values of one namespace's Metrics (without one: of the
    GlobalMetrics)."""
    if namespace:
        return in_namespace(METRIC_VALUES, "Metric", namespace)
    return Prefix(f"{METRIC_VALUES}{kind('GlobalMetric').plural}/")


def secrets_key(kind_name: str, name: str, namespace: str | None = None) -> Key:
    """The key of the secrets a resource's document carries, kept apart from it
    (:mod:`berth.store.credentials`)."""
    return Key(SECRETS + _tail(kind(kind_name), name, namespace))


def secrets_prefix(kind_name: str) -> Prefix:
    """The prefix of every secret kept apart from the documents of a kind (what a role
    that uses that kind's secrets, and no other's, is granted)."""
    return Prefix(f"{SECRETS}{kind(kind_name).plural}/")


def in_namespace(family: Prefix, kind_name: str, namespace: str) -> Prefix:
    """Every key of ``family`` (``ROOT``: the documents, ``BINDINGS``, ``STATUS``,
    ``SECRETS``, ``HISTORY``, ``ROLLOUTS``, ``LEDGER``, ``EVENTS``) for the resources of a
    namespaced kind in ``namespace`` — what a team's etcd role is granted."""
    k = kind(kind_name)
    if not k.namespaced:
        raise ValueError(f"{k.name} is a global kind: it has no namespace")
    check_namespace(namespace)
    return Prefix(f"{family}{k.plural}/{namespace}/")


def exported_key(name: str) -> Key:
    """The key of what the exporter last made of the Export ``name``."""
    return Key(EXPORTED + _tail(kind("Export"), name, None))


def verdicts_key(namespace: str, name: str) -> Key:
    """The key of what the tool that deploys an application says of its copies (the
    exporter reads Argo CD's Applications into it)."""
    return Key(EXPORTED + _tail(kind("Application"), name, namespace))


def verdicts_prefix() -> Prefix:
    """The prefix of every application's deploying tool's verdicts."""
    return Prefix(EXPORTED + kind("Application").plural + "/")


def history_key(namespace: str, name: str) -> Key:
    """The key of an application's last manifests (written by ``berth apply``)."""
    return Key(HISTORY + _tail(kind("Application"), name, namespace))


def rollout_prefix() -> Prefix:
    """The prefix of every application's rollout controls."""
    return Prefix(ROLLOUTS + kind("Application").plural + "/")


def rollout_key(namespace: str, name: str) -> Key:
    """The key of what an operator says of an application's rollout (pause, approve)."""
    return Key(ROLLOUTS + _tail(kind("Application"), name, namespace))


def ledger_prefix(kind_name: str, namespace: str | None, name: str) -> Prefix:
    """Where the ledger's records of one resource live."""
    return Prefix(LEDGER + _tail(kind(kind_name), name, namespace) + "/")


def ledger_key(under: Prefix, rid: str, by: str, size: int) -> Key:
    """A record's key under its resource's :func:`ledger_prefix`: its id (the time it was
    made), the process that wrote it and its size, so a sweep reads keys alone."""
    return Key(f"{under}{rid}.{by}.{size}")


def events_prefix(kind_name: str, namespace: str | None, name: str) -> Prefix:
    """Where the events of one object live."""
    return Prefix(EVENTS + _tail(kind(kind_name), name, namespace) + "/")


def event_key(under: Prefix, source: str, reason: str, digest: str) -> Key:
    """An event's key under its object's :func:`events_prefix`: the process that saw it,
    why, and a digest of its type and message (a repeat lands on the same key)."""
    return Key(f"{under}{source}.{reason}.{digest}")


def bench_prefix(path: str) -> Prefix:
    """Where a benchmark writes its floor (the same writes as berth's, to compare with):
    ``/berth/v1/bench/<path>/``; no process reads there."""
    return Prefix(f"{BENCH}{path}/")


def bench_key(path: str) -> Key:
    """One key of a benchmark's floor, ``/berth/v1/bench/<path>``."""
    return Key(BENCH + path)


def lease_key(process: str) -> Key:
    """The election key of a process type (``scheduler``, ``propagator``, ...)."""
    check_name(process, "process name")
    return Key(LEASES + process)


# The propagator's replicas share the clusters out through leases of their own: each
# member's key, and each cluster's claim by the member that owns it.
PROPAGATOR_LEASES = Prefix(LEASES + "propagator/")
PROPAGATOR_MEMBERS = Prefix(PROPAGATOR_LEASES + "members/")
PROPAGATOR_CLAIMS = Prefix(PROPAGATOR_LEASES + "clusters/")


def member_key(identity: str) -> Key:
    """The key a propagator replica keeps alive while it is a member."""
    return Key(PROPAGATOR_MEMBERS + identity)


def claim_key(cid: str) -> Key:
    """The claim on cluster ``cid`` (``<namespace>/<name>``) of the replica that owns it."""
    return Key(PROPAGATOR_CLAIMS + cid)


def _cluster_path(cid: str) -> str:
    """``<namespace>/<name>`` of a Cluster, checked (ValueError otherwise)."""
    namespace, sep, name = cid.partition("/")
    if not sep:
        raise ValueError(f"{cid!r} is no cluster id (<namespace>/<name>)")
    check_namespace(namespace)
    check_name(name)
    return cid


def work_prefix(cid: str) -> Prefix:
    """The prefix of everything pull cluster ``cid`` (``<namespace>/<name>``) is to run:
    its agent's role reads this and no other work."""
    return Prefix(f"{WORK}{_cluster_path(cid)}/")


def work_key(cid: str, namespace: str, name: str) -> Key:
    """The key of what cluster ``cid`` runs of the application ``namespace/name``."""
    return Key(work_prefix(cid) + _tail(kind("Application"), name, namespace).split("/", 1)[1])


def agent_prefix(cid: str) -> Prefix:
    """The prefix pull cluster ``cid``'s agent writes under, and only there."""
    return Prefix(f"{AGENTS}{_cluster_path(cid)}/")


def reports_prefix(cid: str) -> Prefix:
    """The prefix of what the agent of ``cid`` did of each application's work."""
    return Prefix(agent_prefix(cid) + "reports/")


def heartbeat_key(cid: str) -> Key:
    """The agent's heartbeat, which is also its replicas' election key: created by the
    one that leads, on its lease, so it goes when that agent does."""
    return Key(agent_prefix(cid) + "heartbeat")


def removals_key(cid: str) -> Key:
    """When the agent of ``cid`` last removed applications (its bounded share at once)."""
    return Key(agent_prefix(cid) + "removals")


def report_key(cid: str, namespace: str, name: str) -> Key:
    """What the agent of ``cid`` did of the application ``namespace/name``'s work."""
    return Key(reports_prefix(cid) + _tail(kind("Application"), name,
                                           namespace).split("/", 1)[1])


def registration_key(cid: str) -> Key:
    """What berth says of the agent of cluster ``cid``: its bootstrap token, the identity
    it joined with, its credential's expiry, whether it was revoked (written by admins)."""
    return Key(REGISTRATIONS + _cluster_path(cid))


def registration_request_key(cid: str) -> Key:
    """A request to join as cluster ``cid``: what its bootstrap token's user writes."""
    return Key(registration_key(cid) + "/request")


def renewal_key(cid: str) -> Key:
    """The request of cluster ``cid``'s agent to renew its credential: only that agent's
    user may write it (its role), so a renewal found here was asked by the agent."""
    return Key(RENEWALS + _cluster_path(cid))


@dataclass(frozen=True, slots=True)
class ClusterKeyRef:
    """A parsed work, agent, registration or renewal key: the cluster it is about, what it
    is (``work``, ``heartbeat``, ``removals``, ``report``, ``registration``, ``request``,
    ``renewal``)
    and, for a work or a report, the application's namespace and name."""

    what: str
    cluster: str  # "<namespace>/<name>"
    namespace: str = ""
    name: str = ""


def parse_cluster_key(key: str) -> ClusterKeyRef:
    """Parse a key under ``work/``, ``agents/``, ``registrations/`` or ``renewals/``;
    ValueError else."""
    for family in (WORK, AGENTS, REGISTRATIONS, RENEWALS):
        if key.startswith(family):
            parts = key[len(family):].split("/")
            break
    else:
        raise ValueError(f"{key!r} is no work, agent, registration or renewal key")
    if len(parts) < 2:
        raise ValueError(f"{key!r}: expected <cluster namespace>/<cluster>")
    cid = _cluster_path(f"{parts[0]}/{parts[1]}")
    rest = parts[2:]
    if family == REGISTRATIONS and rest in ([], ["request"]):
        return ClusterKeyRef("request" if rest else "registration", cid)
    if family == RENEWALS and not rest:
        return ClusterKeyRef("renewal", cid)
    if family == AGENTS and rest in (["heartbeat"], ["removals"]):
        return ClusterKeyRef(rest[0], cid)
    app = rest[1:] if family == AGENTS and rest[:1] == ["reports"] else rest
    if family in (WORK, AGENTS) and len(app) == 2 and (family == WORK or rest[0] == "reports"):
        check_namespace(app[0])
        check_name(app[1])
        return ClusterKeyRef("work" if family == WORK else "report", cid, app[0], app[1])
    raise ValueError(f"{key!r}: not a key berth makes under {family}")


def cluster_key_problem(key: str) -> str | None:
    """Why ``key`` under ``work/``, ``agents/``, ``registrations/`` or ``renewals/`` is
    none of berth's (None when it is): what an informer of those prefixes ignores, once,
    with a warning."""
    if not key.isascii() or "\\" in key:
        return "not an ASCII key (names are ASCII)"
    try:
        parse_cluster_key(key)
    except ValueError as exc:
        return str(exc)
    return None


@dataclass(frozen=True, slots=True)
class KeyRef:
    """A parsed key: which family, kind, namespace and name it addresses."""

    # "resource", "binding", "status", "metricvalue", "secret", "history" or "rollout"
    family: str
    kind: Kind
    namespace: str | None
    name: str


def parse_key(key: str) -> KeyRef:
    """Parse a key built by this module; ValueError for anything else."""
    if not key.startswith(ROOT):
        raise ValueError(f"{key!r} is not a berth key (they start with {ROOT})")
    rest = key[len(ROOT) :]
    family = "resource"
    for prefix, fam in (
        ("bindings/", "binding"),
        ("status/", "status"),
        ("metricvalues/", "metricvalue"),
        ("secrets/", "secret"),
        ("history/", "history"),
        ("rollouts/", "rollout"),
        ("exported/", "exported"),
    ):
        if rest.startswith(prefix):
            family, rest = fam, rest[len(prefix) :]
            break
    parts = rest.split("/")
    k = BY_PLURAL.get(parts[0])
    if k is None:
        raise ValueError(f"{key!r}: unknown kind segment {parts[0]!r}")
    if k.namespaced and len(parts) == 3:
        check_namespace(parts[1])
        check_name(parts[2])
        return KeyRef(family, k, parts[1], parts[2])
    if not k.namespaced and len(parts) == 2:
        check_name(parts[1])
        return KeyRef(family, k, None, parts[1])
    raise ValueError(f"{key!r}: expected {'namespace/name' if k.namespaced else 'name'}")


def problem(key: str) -> str | None:
    """Why ``key`` is not one of berth's keys (None when it is): a name that is empty,
    not ASCII or not a valid name, a segment too many or too few. Processes ignore such
    keys (one warning each); nothing berth writes looks like that."""
    if not key.isascii() or "\\" in key:
        return "not an ASCII key (names are ASCII)"
    if key in (METRIC_PICTURE, SCHEDULER_MOVES):
        return None
    if key.startswith((WORK, AGENTS, REGISTRATIONS, RENEWALS)):
        return cluster_key_problem(key)
    try:
        if key.startswith(LEASES):
            parts = key[len(LEASES):].split("/")
            if len(parts) == 1:
                check_name(parts[0], "process name")
            elif parts[:2] == ["propagator", "members"] and len(parts) == 3:
                check_name(parts[2], "member")
            elif parts[:2] == ["propagator", "clusters"] and len(parts) == 4:
                check_namespace(parts[2])
                check_name(parts[3])
            else:
                return "not a lease key berth makes"
            return None
        parse_key(key)
    except ValueError as exc:
        return str(exc)
    return None


def misplaced(key: str, name: object, namespace: object) -> str | None:
    """Why a document naming itself ``namespace``/``name`` does not belong at ``key``
    (None when it does): the key is the name. A document written by hand at another
    key than its own would otherwise be a second copy of the same thing (a second
    placement, a second propagation) under the key's name. Every informer asks this of
    every value it decodes: the key's layout is read once per prefix."""
    head, _, last = key.rpartition("/")
    shape = _shape(head)
    if shape is None:
        return None  # not a document key (the metric picture): nothing to compare
    namespaced, ns, kind_name = shape
    if name != last:
        return f"metadata.name {name!r} is not the key's name {last!r}"
    if namespaced and namespace != ns:
        return f"metadata.namespace {namespace!r} is not the key's namespace {ns!r}"
    if not namespaced and namespace:
        return f"metadata.namespace {namespace!r}: {kind_name} is a global kind"
    return None


@lru_cache(maxsize=1 << 12)
def _shape(head: str) -> tuple[bool, str | None, str] | None:
    """Of a key without its name: (a namespaced kind, the namespace, the kind's name);
    None for no document key."""
    try:
        ref = parse_key(head + "/x")
    except ValueError:
        return None
    return ref.kind.namespaced, ref.namespace, ref.kind.name


def under(family: Prefix, key: Key) -> Key:
    """A resource's ``key`` moved under another family's prefix (:data:`BINDINGS`,
    :data:`STATUS`): where the processes write of it; NO_KEY for a key outside the
    layout. No check beyond the root: the hot path of every scheduling attempt."""
    return Key(family + key[len(ROOT):]) if key.startswith(ROOT) else NO_KEY


def resource_of(family: Prefix, key: str) -> Key:
    """The resource key ``key`` (under ``family``, as :func:`under` made it) is about;
    NO_KEY for a key outside that family. No check beyond the prefix, as ``under``."""
    return Key(ROOT + key[len(family):]) if key.startswith(family) else NO_KEY


def resource_key_of(key: str) -> Key:
    """The key of the resource a binding or status key is about (a resource key: itself)."""
    ref = parse_key(key)
    return resource_key(ref.kind.name, ref.name, ref.namespace)
