"""Checks a schema cannot express: names, expressions, intervals, coherence.

``problems(doc)`` returns every problem found, each with the dotted path of
the field it concerns, so bootstrap can print ``apps.yaml#3
spec.constraints.cluster.labels[0]: cannot parse 'location iz DE'`` and the
user fixes all of them in one go.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any, NamedTuple

import msgspec

from berth.store import keys
from berth.store.constraints import (
    ConstraintError,
    LabelConstraint,
    MetricConstraint,
    check_custom_resource,
)
from berth.store.documents.application import (
    Application,
    ClusterGroup,
    Placement,
)
from berth.store.documents.durations import DurationError, seconds
from berth.store.documents.export import ALL_SHAPES, Export, Shape
from berth.store.documents.infrastructure import Cloud, Cluster, ClusterMode
from berth.store.documents.inventory import Inventory
from berth.store.documents.metrics import Metric, MetricRef, MetricsProvider
from berth.store.documents.openstack import MagnumCluster, Project
from berth.store.documents.overrides import RULE_KINDS, Override, OverrideRule
from berth.store.documents.pace import FLEET, Pace, PaceWindow, minutes
from berth.store.documents.priority import HIGHEST_USER_PRIORITY, PriorityClass
from berth.store.documents.render import variable_problem, variables
from berth.store.documents.resources import REPLICAS_PATH, QuantityError, demand, replica_path
from berth.store.documents.rollouts import REST, RolloutPolicy, RolloutStrategy
from berth.store.documents.selection import MatchExpression
from berth.store.documents.tenancy import ClusterSet, NamespacePolicy

from . import Resource

# A Kubernetes label value (and, lower case, most object names): at most 63 characters.
LABEL_VALUE_RE = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")


class Problem(NamedTuple):
    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


def problems(doc: Resource) -> list[Problem]:
    """Every semantic problem of a decoded document (empty when it is valid)."""
    kind = keys.kind(type(doc).__struct_config__.tag)  # type: ignore[arg-type]
    found = list(_metadata(doc, kind))
    if doc.api != kind.api:
        found.append(Problem("api", f"{kind.name} belongs to api {kind.api!r}, not {doc.api!r}"))
    match doc:
        case MetricsProvider():
            found += _provider(doc)
        case Metric():
            found += _metric(doc)
        case Cluster():
            if doc.spec.mode is ClusterMode.PULL and doc.spec.kubeconfig is not None:
                found.append(Problem("spec.kubeconfig", "a Pull cluster holds no credential: "
                                     "its agent has the cluster's own (docs/agents.md)"))
            found += _metric_refs(doc.spec.metrics, "spec.metrics")
            found += _custom_resources(doc.spec.custom_resources, "spec.custom_resources")
            if doc.spec.constraints and doc.spec.constraints.cloud:
                cloud = doc.spec.constraints.cloud
                found += _expressions(cloud.labels, "spec.constraints.cloud.labels", label=True)
                found += _expressions(cloud.metrics, "spec.constraints.cloud.metrics", label=False)
        case Cloud() | Project():
            found += _metric_refs(doc.spec.metrics, "spec.metrics")
        case MagnumCluster():
            found += _metric_refs(doc.spec.metrics, "spec.metrics")
            if doc.spec.constraints and doc.spec.constraints.project:
                project = doc.spec.constraints.project
                found += _expressions(project.labels, "spec.constraints.project.labels",
                                      label=True)
                found += _expressions(project.metrics, "spec.constraints.project.metrics",
                                      label=False)
        case Application():
            found += _application(doc)
        case Override():
            found += _override(doc)
        case Pace():
            found += _pace(doc)
        case PriorityClass():
            found += _priority_class(doc)
        case Export():
            found += _export(doc)
        case Inventory():
            found += [Problem(f"spec{path}", why) for path, why in doc.spec.problems()]
        case ClusterSet():
            found += _cluster_set(doc)
        case NamespacePolicy():
            found += _namespace_policy(doc)
    return found


def _override(doc: Override) -> Iterator[Problem]:
    spec = doc.spec
    yield from _match_expressions(spec.clusters.match_expressions,
                                  "spec.clusters.matchExpressions")
    for name in spec.applications.names:
        try:
            keys.check_name(name.rpartition("/")[2])
        except ValueError as exc:
            yield Problem("spec.applications.names", str(exc))
    if not spec.rules:
        yield Problem("spec.rules", "no rules: an override must change something")
    for i, rule in enumerate(spec.rules):
        yield from _rule(rule, f"spec.rules[{i}]")


def _rule(rule: OverrideRule, where: str) -> Iterator[Problem]:
    kinds = [k for k in RULE_KINDS if getattr(rule, k) is not None]
    if len(kinds) != 1:
        yield Problem(where, f"give exactly one of {', '.join(RULE_KINDS)}"
                      + (f" (this gives {', '.join(kinds)})" if kinds else ""))
        return
    kind = kinds[0]
    at = f"{where}.{kind}"
    if rule.image is not None and all(v is None for v in (
            rule.image.registry, rule.image.repository, rule.image.tag, rule.image.digest)):
        yield Problem(at, "sets nothing: give registry, repository, tag or digest")
    for lst in (rule.command, rule.args):
        if lst is not None and lst.replace is None and not lst.append:
            yield Problem(at, "sets nothing: give replace or append")
    if rule.env is not None and not rule.env.set and not rule.env.remove:
        yield Problem(at, "sets nothing: give set or remove")
    for meta in (rule.labels, rule.annotations):
        if meta is not None and not meta.set and not meta.remove:
            yield Problem(at, "sets nothing: give set or remove")
    if rule.patch is not None:
        if not rule.patch.operations:
            yield Problem(f"{at}.operations", "no operations")
        for j, op in enumerate(rule.patch.operations):
            if not op.path.startswith("/"):
                yield Problem(f"{at}.operations[{j}].path",
                              f"{op.path!r} is not a JSON pointer (it starts with '/')")
            if op.op in ("move", "copy") and not (op.from_ or "").startswith("/"):
                yield Problem(f"{at}.operations[{j}].from", f"{op.op} needs a JSON pointer")
    for text in _strings(msgspec.to_builtins(getattr(rule, kind))):
        for name in variables(text):
            why = variable_problem(name)
            if why is not None:
                yield Problem(at, why)


def _metadata(doc: Resource, kind: keys.Kind) -> Iterator[Problem]:
    try:
        keys.check_name(doc.metadata.name)
    except ValueError as exc:
        yield Problem("metadata.name", str(exc))
    ns = doc.metadata.namespace
    if kind.namespaced and ns is not None:
        try:
            keys.check_namespace(ns)
        except ValueError as exc:
            yield Problem("metadata.namespace", str(exc))
    elif not kind.namespaced and ns:
        yield Problem("metadata.namespace", f"{kind.name} is global: it takes no namespace")
    if doc.metadata.generation < 0:
        yield Problem("metadata.generation", "must not be negative")


def _provider(doc: MetricsProvider) -> Iterator[Problem]:
    spec = doc.spec
    sub = {
        "prometheus": spec.prometheus,
        "kafka": spec.kafka,
        "ksql": spec.ksql,
        "static": spec.static,
    }
    if sub[spec.type] is None and not (spec.type == "ksql" and spec.kafka is not None):
        yield Problem(f"spec.{spec.type}", f"a provider of type {spec.type!r} needs this section")
    for name, value in sub.items():
        if value is not None and name != spec.type and {name, spec.type} != {"kafka", "ksql"}:
            yield Problem(f"spec.{name}", f"set, but the provider's type is {spec.type!r}")
    if spec.prometheus is not None and spec.prometheus.forecast is not None:
        f, where = spec.prometheus.forecast, "spec.prometheus.forecast"
        try:
            period, horizon, step = seconds(f.period), seconds(f.horizon), seconds(f.step)
        except DurationError as exc:
            yield Problem(where, str(exc))
        else:
            if not 0 < step <= horizon <= period:
                yield Problem(where, "needs 0 < step <= horizon <= period (Prometheus holds "
                              "only the past: the forecast cannot reach beyond one period)")
    if spec.static is not None:
        for name in sorted(set(spec.static.metrics) & set(spec.static.series)):
            yield Problem(f"spec.static.series.{name}", "also in spec.static.metrics: give one")
        for name, points in spec.static.series.items():
            if not points:
                yield Problem(f"spec.static.series.{name}", "has no point")
            for i, point in enumerate(points):
                if point.at.tzinfo is None:
                    yield Problem(f"spec.static.series.{name}[{i}].at",
                                  "needs a time zone (say 2026-11-24T06:00:00Z)")
                if point.value != point.value or abs(point.value) == float("inf"):
                    yield Problem(f"spec.static.series.{name}[{i}].value", "must be finite")
    if spec.kafka is not None:
        k = spec.kafka
        if k.is_ksql:
            missing = [
                f
                for f in ("url", "table", "comparison_column", "value_column")
                if getattr(k, f) is None
            ]
            if missing:
                yield Problem(
                    "spec.kafka",
                    f"a KSQL table needs {', '.join(missing)} (or give bootstrap_servers and"
                    " topic for a topic consumer)",
                )
        elif not (k.bootstrap_servers and k.topic):
            yield Problem("spec.kafka", "a topic consumer needs both bootstrap_servers and topic")
    intervals = [("spec.poll_interval", spec.poll_interval)] + [
        (f"spec.{n}.poll_interval", getattr(v, "poll_interval", None))
        for n, v in sub.items()
        if v is not None
    ]
    for path, interval in intervals:
        if interval is not None and interval <= 0:
            yield Problem(path, "must be positive")


def _metric(doc: Metric) -> Iterator[Problem]:
    spec = doc.spec
    if not spec.min < spec.max:
        yield Problem("spec.max", f"min ({spec.min:g}) must be less than max ({spec.max:g})")
    try:
        keys.check_name(spec.provider.name, "provider name")
    except ValueError as exc:
        yield Problem("spec.provider.name", str(exc))
    if not spec.provider.metric:
        yield Problem("spec.provider.metric", "must not be empty")


def _metric_refs(refs: list[MetricRef], path: str) -> Iterator[Problem]:
    for i, ref in enumerate(refs):
        try:
            keys.check_name(ref.name, "metric name")
        except ValueError as exc:
            yield Problem(f"{path}[{i}].name", str(exc))
        if ref.weight < 0:
            yield Problem(f"{path}[{i}].weight", "must not be negative")


def _custom_resources(names: list[str], path: str) -> Iterator[Problem]:
    for i, name in enumerate(names):
        try:
            check_custom_resource(name)
        except ConstraintError as exc:
            yield Problem(f"{path}[{i}]", str(exc))


def _expressions(exprs: list[str], path: str, *, label: bool) -> Iterator[Problem]:
    parse = LabelConstraint.parse if label else MetricConstraint.parse
    for i, expr in enumerate(exprs):
        try:
            parse(expr)
        except ConstraintError as exc:
            yield Problem(f"{path}[{i}]", str(exc))


def _match_expressions(exprs: list[MatchExpression], path: str) -> Iterator[Problem]:
    for i, e in enumerate(exprs):
        where = f"{path}[{i}].values"
        if e.operator in ("In", "NotIn") and not e.values:
            yield Problem(where, f"{e.operator} needs at least one value")
        elif e.operator in ("Exists", "DoesNotExist") and e.values:
            yield Problem(where, f"{e.operator} takes no values")
        elif e.operator in ("Gt", "Lt"):
            if len(e.values) != 1:
                yield Problem(where, f"{e.operator} takes exactly one integer value")
            else:
                try:
                    int(e.values[0])
                except ValueError:
                    yield Problem(where, f"{e.values[0]!r} is not an integer")


def _group(group: ClusterGroup, where: str) -> Iterator[Problem]:
    if not group.cluster_names and group.label_selector is None:
        yield Problem(where, "names no cluster: give clusterNames, a labelSelector, or both")
    if group.label_selector is not None:
        yield from _match_expressions(group.label_selector.match_expressions,
                                      f"{where}.labelSelector.matchExpressions")


def _replica_scheduling(p: Placement, manifest: list[Any]) -> Iterator[Problem]:
    where = "spec.placement.replicaScheduling"
    rs = p.replica_scheduling
    if rs is None or rs.type == "Duplicated":
        if rs is not None and (rs.static_weights or rs.replicas is not None):
            yield Problem(where, "staticWeights and replicas apply to type Divided only")
        return
    if p.policy == "PickOne":
        yield Problem(f"{where}.type", "Divided spreads replicas over several clusters: use "
                      "policy PickN, PickAll or PickFixed")
    if rs.replicas is not None and rs.replicas < 0:
        yield Problem(f"{where}.replicas", "must be >= 0")
    if not any(replica_path(o) for o in manifest if isinstance(o, dict)):
        yield Problem(where, "the manifest has no object whose replicas berth can divide "
                      "(Deployment, StatefulSet, ReplicaSet, Job, or an object annotated "
                      f"{REPLICAS_PATH})")
    if rs.static_weights and rs.division != "Weighted":
        yield Problem(f"{where}.staticWeights", f"apply to division Weighted, not {rs.division}")
    for i, w in enumerate(rs.static_weights):
        if w.weight < 0:
            yield Problem(f"{where}.staticWeights[{i}].weight", "must be >= 0")
        yield from _group(w.target_cluster, f"{where}.staticWeights[{i}].targetCluster")


def _deferral(p: Placement) -> Iterator[Problem]:
    where = "spec.placement"
    if p.start_before is not None and p.max_delay is not None:
        yield Problem(f"{where}.maxDelay", "give startBefore or maxDelay, not both")
    if p.start_before is not None and p.start_before.tzinfo is None:
        yield Problem(f"{where}.startBefore", "needs a time zone (say 2026-11-24T06:00:00Z)")
    if p.max_delay is not None:
        try:
            seconds(p.max_delay)
        except DurationError as exc:
            yield Problem(f"{where}.maxDelay", str(exc))
    deadline = p.start_before is not None or p.max_delay is not None
    if deadline and not p.cost_metric:
        yield Problem(f"{where}.costMetric", "deferrable work needs the metric that measures "
                      "its cost (startBefore/maxDelay is given)")
    if p.cost_metric is not None and not deadline:
        yield Problem(f"{where}.costMetric", "needs startBefore or maxDelay: without a deadline "
                      "there is nothing to defer")
    if p.cost_metric is not None and p.replica_scheduling is not None and (
            p.replica_scheduling.type == "Divided"):
        yield Problem(f"{where}.costMetric", "deferrable work is placed whole: not with "
                      "replicaScheduling type Divided")


def _depends_on(doc: Application) -> Iterator[Problem]:
    """Each dependency a valid name, neither the application itself nor named twice (a
    cycle through others is the set's to find: ``berth.store.dependencies``)."""
    seen: set[str] = set()
    own = doc.metadata.namespace
    for i, dep in enumerate(doc.spec.depends_on):
        path = f"spec.dependsOn[{i}].name"
        try:
            keys.check_name(dep.name)
            if dep.namespace is not None:
                keys.check_namespace(dep.namespace)
        except ValueError as exc:
            yield Problem(path if "namespace" not in str(exc) else
                          f"spec.dependsOn[{i}].namespace", str(exc))
            continue
        named = dep.key_in(own)
        if named == f"{own or ''}/{doc.metadata.name}":
            yield Problem(path, "an application cannot depend on itself")
        elif named in seen:
            yield Problem(path, f"{named!r} is named twice")
        seen.add(named)


def _application(doc: Application) -> Iterator[Problem]:
    spec = doc.spec
    if spec.deployed_by is not None:
        yield from (Problem(f"spec.deployedBy{path}", why)
                    for path, why in spec.deployed_by.problems(bool(spec.manifest)))
    if spec.constraints and spec.constraints.cluster:
        c = spec.constraints.cluster
        yield from _expressions(c.labels, "spec.constraints.cluster.labels", label=True)
        yield from _expressions(c.metrics, "spec.constraints.cluster.metrics", label=False)
        yield from _custom_resources(
            c.custom_resources, "spec.constraints.cluster.custom_resources"
        )
    if spec.priority is not None and abs(spec.priority) > HIGHEST_USER_PRIORITY:
        yield Problem("spec.priority", f"{spec.priority} is beyond +-{HIGHEST_USER_PRIORITY:,}")
    if spec.priority_class_name is not None:
        try:
            keys.check_name(spec.priority_class_name, "spec.priorityClassName")
        except ValueError as exc:
            yield Problem("spec.priorityClassName", str(exc))
    yield from _depends_on(doc)
    for i, obj in enumerate(spec.manifest):
        if not obj.get("kind") or not obj.get("apiVersion"):
            yield Problem(f"spec.manifest[{i}]", "a Kubernetes object needs apiVersion and kind")
    try:
        demand(spec.manifest)
    except QuantityError as exc:
        yield Problem("", str(exc))
    p = spec.placement
    if p is not None:
        if p.policy == "PickN" and (p.number_of_clusters or 0) < 1:
            yield Problem("spec.placement.numberOfClusters", "PickN needs a number >= 1")
        if p.policy != "PickN" and p.number_of_clusters is not None:
            yield Problem("spec.placement.numberOfClusters", f"only PickN takes it, not {p.policy}")
        if p.policy == "PickFixed" and not p.cluster_names:
            yield Problem("spec.placement.clusterNames", "PickFixed needs cluster names")
        for i, t in enumerate(p.topology_spread_constraints):
            if t.max_skew < 1:
                yield Problem(
                    f"spec.placement.topologySpreadConstraints[{i}].maxSkew", "must be >= 1"
                )
        yield from _replica_scheduling(p, spec.manifest)
        yield from _deferral(p)
        for i, group in enumerate(p.cluster_groups):
            yield from _group(group, f"spec.placement.clusterGroups[{i}]")
    aff = spec.affinity
    if aff is not None and aff.cluster_affinity is not None:
        ca = aff.cluster_affinity
        base = "spec.affinity.clusterAffinity"
        required = ca.required_during_scheduling_ignored_during_execution
        for i, term in enumerate(required.cluster_selector_terms if required else []):
            yield from _match_expressions(
                term.match_expressions,
                f"{base}.requiredDuringSchedulingIgnoredDuringExecution"
                f".clusterSelectorTerms[{i}].matchExpressions",
            )
        for i, pref in enumerate(ca.preferred_during_scheduling_ignored_during_execution):
            where = f"{base}.preferredDuringSchedulingIgnoredDuringExecution[{i}]"
            if pref.weight <= 0:
                yield Problem(f"{where}.weight", "must be positive")
            yield from _match_expressions(
                pref.preference.match_expressions, f"{where}.preference.matchExpressions"
            )
    if spec.gang is not None and spec.gang.min_member < 1:
        yield Problem("spec.gang.minMember", "must be >= 1")
    if spec.rollout is not None:
        yield from _rollout(spec.rollout)
    if spec.pace is not None:
        yield from _pace_limits(spec.pace.in_transition, spec.pace.per_minute,
                                spec.pace.windows or [], "spec.pace")


def _priority_class(doc: PriorityClass) -> Iterator[Problem]:
    if abs(doc.spec.value) > HIGHEST_USER_PRIORITY:
        yield Problem("spec.value", f"{doc.spec.value} is beyond +-{HIGHEST_USER_PRIORITY:,} "
                      "(Kubernetes keeps larger values for its own system classes)")


def _export(doc: Export) -> Iterator[Problem]:
    spec = doc.spec
    if not keys.NAMESPACE_RE.fullmatch(spec.namespace):
        yield Problem("spec.namespace", f"{spec.namespace!r} is not a Kubernetes namespace "
                      "name (lower case letters, digits and '-', at most 63)")
    if not spec.shapes:
        yield Problem("spec.shapes", "no shape: name at least one of "
                      + ", ".join(s.value for s in ALL_SHAPES))
    if len(set(spec.shapes)) != len(spec.shapes):
        yield Problem("spec.shapes", "a shape is named twice")
    if spec.argocd is not None and Shape.OCM_PLACEMENT_DECISION not in spec.shapes:
        yield Problem("spec.argocd", "Argo CD reads the decisions of OCMPlacementDecision: "
                      "add it to spec.shapes")
    if spec.argocd is not None and not LABEL_VALUE_RE.fullmatch(spec.argocd.config_map):
        yield Problem("spec.argocd.configMap", f"{spec.argocd.config_map!r} is not a "
                      "Kubernetes object name")
    if spec.access_provider and not LABEL_VALUE_RE.fullmatch(spec.access_provider):
        yield Problem("spec.accessProvider", f"{spec.access_provider!r} is not a provider "
                      "name (letters, digits, '-', '_', '.', at most 63)")
    if not LABEL_VALUE_RE.fullmatch(spec.cluster_manager):
        yield Problem("spec.clusterManager", f"{spec.cluster_manager!r} is not a label value "
                      "(letters, digits, '-', '_', '.', at most 63)")
    if not isinstance(spec.kubeconfig.get("clusters"), list) or not spec.kubeconfig.get(
            "current-context"):
        yield Problem("spec.kubeconfig", "a kubeconfig with clusters and a current-context "
                      "(the API the export writes to)")
    if spec.applications is not None:
        yield from _match_expressions(spec.applications.match_expressions,
                                      "spec.applications.matchExpressions")


def _pace(doc: Pace) -> Iterator[Problem]:
    if doc.metadata.name != FLEET:
        yield Problem("metadata.name", f"the pace is one document, named {FLEET!r}")
    yield from _pace_limits(doc.spec.in_transition, doc.spec.per_minute, doc.spec.windows,
                            "spec")


def _pace_limits(in_transition: int | None, per_minute: int | None,
                 windows: list[PaceWindow], where: str) -> Iterator[Problem]:
    """The fleet's pace, or an application's own (fields left out are None)."""
    for field, value in (("inTransition", in_transition), ("perMinute", per_minute)):
        if value is not None and value < 0:
            yield Problem(f"{where}.{field}", "must be >= 0 (0: no limit)")
    for i, w in enumerate(windows):
        for field, text in (("start", w.start), ("end", w.end)):
            try:
                minutes(text)
            except ValueError as exc:
                yield Problem(f"{where}.windows[{i}].{field}", str(exc))


PERCENT = re.compile(r"(100|[1-9]?[0-9])%")


def _amount(value: int | str | None, where: str) -> Iterator[Problem]:
    """A count >= 1 or a percentage "1%".."100%"."""
    if isinstance(value, str) and not (PERCENT.fullmatch(value) and value != "0%"):
        yield Problem(where, f"{value!r}: give a count >= 1 or a percentage such as 25%")
    elif isinstance(value, int) and value < 1:
        yield Problem(where, "must be >= 1")


def _duration(value: str | float | None, where: str) -> Iterator[Problem]:
    if value is None:
        return
    try:
        seconds(value)
    except DurationError as exc:
        yield Problem(where, str(exc))


def _rollout(r: RolloutPolicy) -> Iterator[Problem]:
    where = "spec.rollout"
    yield from _amount(r.max_unavailable, f"{where}.maxUnavailable")
    yield from _duration(r.progress_deadline, f"{where}.progressDeadline")
    for field, value in (("maxFailures", r.max_failures), ("pace", r.pace)):
        if value < 0:
            yield Problem(f"{where}.{field}", "must be >= 0")
    if r.history_limit < 1:
        yield Problem(f"{where}.historyLimit", "must be >= 1")
    if r.strategy == RolloutStrategy.STAGED and not r.stages:
        yield Problem(f"{where}.stages", "a Staged rollout needs at least one stage")
    if r.strategy != RolloutStrategy.STAGED and r.stages:
        yield Problem(f"{where}.stages", f"stages apply to strategy Staged, not {r.strategy}")
    seen: set[str] = set()
    for i, stage in enumerate(r.stages):
        at = f"{where}.stages[{i}]"
        if not stage.name or stage.name == REST:
            yield Problem(f"{at}.name", f"give the stage a name (not {REST!r})")
        elif stage.name in seen:
            yield Problem(f"{at}.name", f"{stage.name!r}: two stages have this name")
        seen.add(stage.name)
        yield from _amount(stage.max_concurrency, f"{at}.maxConcurrency")
        yield from _duration(stage.soak, f"{at}.soak")
        yield from _match_expressions(stage.clusters.match_expressions,
                                      f"{at}.clusters.matchExpressions")


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def _cluster_set(doc: ClusterSet) -> Iterator[Problem]:
    spec = doc.spec
    if not spec.namespaces:
        yield Problem("spec.namespaces", "no namespace: a set holds clusters of the "
                      "namespaces it names")
    for i, ns in enumerate(spec.namespaces):
        if not keys.NAMESPACE_RE.fullmatch(ns):
            yield Problem(f"spec.namespaces[{i}]", f"{ns!r} is not a namespace name")
    yield from _match_expressions(spec.clusters.match_expressions,
                                  "spec.clusters.matchExpressions")


def _namespace_policy(doc: NamespacePolicy) -> Iterator[Problem]:
    if not keys.NAMESPACE_RE.fullmatch(doc.metadata.name):
        yield Problem("metadata.name", f"{doc.metadata.name!r} is not a namespace name: a "
                      "policy is named after the namespace it governs")
    spec = doc.spec
    for field, names in (("spec.clusterSets", spec.cluster_sets),
                         ("spec.priorityClasses", spec.priority_classes or [])):
        for i, name in enumerate(names):
            try:
                keys.check_name(name)
            except ValueError as exc:
                yield Problem(f"{field}[{i}]", str(exc))
    for i, kind in enumerate(spec.kinds or []):
        group, _, name = kind.rpartition("/")
        if not name or not name[0].isalpha() or not name.isalnum() or "/" in group:
            yield Problem(f"spec.kinds[{i}]", f"{kind!r} is not a kind: Kind or group/Kind")
    for i, name in enumerate(spec.target_namespaces or []):
        if not keys.NAMESPACE_RE.fullmatch(name):
            yield Problem(f"spec.targetNamespaces[{i}]",
                          f"{name!r} is not a Kubernetes namespace name")
    if spec.max_priority is not None and abs(spec.max_priority) > HIGHEST_USER_PRIORITY:
        yield Problem("spec.maxPriority", f"{spec.max_priority} is beyond "
                      f"+-{HIGHEST_USER_PRIORITY:,}")
