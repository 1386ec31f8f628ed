"""The key layout (docs/architecture.md "Store contract"), in one place.

Every key berth reads or writes is laid out here, so the layout an operator sees
with ``etcdctl get --prefix /berth/`` is the layout the code uses. Its functions
build the keys and prefixes of documents; the few families one module owns (the
ledger's records, the events, the propagator's member and cluster leases, the
what-if's applications) build theirs there, from the constants below:

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

Secrets live apart so that etcd's roles can keep each kind's from every
process but the one that uses it (scripts/etcd-secure.sh). So does a pull
cluster's work (it carries the Secrets' data): each agent's role reads its own
cluster's work prefix and writes its own agent prefix, and nothing else.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

ROOT = "/berth/v1/"
BINDINGS = ROOT + "bindings/"
STATUS = ROOT + "status/"
METRIC_VALUES = ROOT + "metricvalues/"
METRIC_PICTURE = METRIC_VALUES + "picture"
LEASES = ROOT + "leases/"
# What one scheduler leader hands the next: the moves it started lately (the pace's)
SCHEDULER_MOVES = ROOT + "scheduler/moves"
SECRETS = ROOT + "secrets/"
CLUSTER_CREDENTIALS = SECRETS + "clusters/"
HISTORY = ROOT + "history/"
ROLLOUTS = ROOT + "rollouts/"
WORK = ROOT + "work/"
AGENTS = ROOT + "agents/"
REGISTRATIONS = ROOT + "registrations/"
# An agent's renewal: a prefix of its own, so that a cluster's agent alone (no bootstrap
# token's user) may write that cluster's key there, and the approver lists only these.
RENEWALS = ROOT + "renewals/"
EXPORTED = ROOT + "exported/"

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


def resource_key(kind_name: str, name: str, namespace: str | None = None) -> str:
    """The key a user-owned resource lives at."""
    return ROOT + _tail(kind(kind_name), name, namespace)


def resource_prefix(kind_name: str, namespace: str | None = None) -> str:
    """The prefix of all resources of a kind (in one namespace if given)."""
    k = kind(kind_name)
    if namespace:
        check_namespace(namespace)
        return f"{ROOT}{k.plural}/{namespace}/"
    return f"{ROOT}{k.plural}/"


def binding_key(kind_name: str, namespace: str, name: str) -> str:
    """The key of the scheduler's decision for a resource."""
    return BINDINGS + _tail(kind(kind_name), name, namespace)


def binding_prefix(kind_name: str) -> str:
    return f"{BINDINGS}{kind(kind_name).plural}/"


def status_key(kind_name: str, namespace: str, name: str) -> str:
    """The key of what the propagator observed of a resource."""
    return STATUS + _tail(kind(kind_name), name, namespace)


def status_prefix(kind_name: str) -> str:
    return f"{STATUS}{kind(kind_name).plural}/"


def metric_value_key(name: str, namespace: str | None = None) -> str:
    """The key of a metric's current value: GlobalMetric if no namespace, else Metric."""
    return METRIC_VALUES + _tail(kind("Metric" if namespace else "GlobalMetric"), name, namespace)


def secrets_key(kind_name: str, name: str, namespace: str | None = None) -> str:
    """The key of the secrets a resource's document carries, kept apart from it
    (:mod:`berth.store.credentials`)."""
    return SECRETS + _tail(kind(kind_name), name, namespace)


def secrets_prefix(kind_name: str) -> str:
    """The prefix of every secret kept apart from the documents of a kind (what a role
    that uses that kind's secrets, and no other's, is granted)."""
    return f"{SECRETS}{kind(kind_name).plural}/"


def exported_key(name: str) -> str:
    """The key of what the exporter last made of the Export ``name``."""
    return EXPORTED + _tail(kind("Export"), name, None)


def history_key(namespace: str, name: str) -> str:
    """The key of an application's last manifests (written by ``berth apply``)."""
    return HISTORY + _tail(kind("Application"), name, namespace)


def rollout_key(namespace: str, name: str) -> str:
    """The key of what an operator says of an application's rollout (pause, approve)."""
    return ROLLOUTS + _tail(kind("Application"), name, namespace)


def lease_key(process: str) -> str:
    """The election key of a process type (``scheduler``, ``propagator``, ...)."""
    check_name(process, "process name")
    return LEASES + process


def _cluster_path(cid: str) -> str:
    """``<namespace>/<name>`` of a Cluster, checked (ValueError otherwise)."""
    namespace, sep, name = cid.partition("/")
    if not sep:
        raise ValueError(f"{cid!r} is no cluster id (<namespace>/<name>)")
    check_namespace(namespace)
    check_name(name)
    return cid


def work_prefix(cid: str) -> str:
    """The prefix of everything pull cluster ``cid`` (``<namespace>/<name>``) is to run:
    its agent's role reads this and no other work."""
    return f"{WORK}{_cluster_path(cid)}/"


def work_key(cid: str, namespace: str, name: str) -> str:
    """The key of what cluster ``cid`` runs of the application ``namespace/name``."""
    return work_prefix(cid) + _tail(kind("Application"), name, namespace).split("/", 1)[1]


def agent_prefix(cid: str) -> str:
    """The prefix pull cluster ``cid``'s agent writes under, and only there."""
    return f"{AGENTS}{_cluster_path(cid)}/"


def heartbeat_key(cid: str) -> str:
    """The agent's heartbeat, which is also its replicas' election key: created by the
    one that leads, on its lease, so it goes when that agent does."""
    return agent_prefix(cid) + "heartbeat"


def removals_key(cid: str) -> str:
    """When the agent of ``cid`` last removed applications (its bounded share at once)."""
    return agent_prefix(cid) + "removals"


def report_key(cid: str, namespace: str, name: str) -> str:
    """What the agent of ``cid`` did of the application ``namespace/name``'s work."""
    return agent_prefix(cid) + "reports/" + _tail(kind("Application"), name,
                                                  namespace).split("/", 1)[1]


def registration_key(cid: str) -> str:
    """What berth says of the agent of cluster ``cid``: its bootstrap token, the identity
    it joined with, its credential's expiry, whether it was revoked (written by admins)."""
    return REGISTRATIONS + _cluster_path(cid)


def registration_request_key(cid: str) -> str:
    """A request to join as cluster ``cid``: what its bootstrap token's user writes."""
    return registration_key(cid) + "/request"


def renewal_key(cid: str) -> str:
    """The request of cluster ``cid``'s agent to renew its credential: only that agent's
    user may write it (its role), so a renewal found here was asked by the agent."""
    return RENEWALS + _cluster_path(cid)


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


def resource_key_of(key: str) -> str:
    """The key of the resource a binding or status key is about (a resource key: itself)."""
    ref = parse_key(key)
    return resource_key(ref.kind.name, ref.name, ref.namespace)
