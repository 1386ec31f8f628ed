"""The scheduler's configuration file (YAML), with safe defaults for everything.

``berth scheduler --write-config-to FILE`` writes the defaults; a file given
with ``--config`` may set any subset. Plugins are enabled per extension point,
in order, each with an optional weight (score) and arguments; an extension
point the file does not list keeps its defaults, one it lists (even as an
empty list) gets exactly those.
"""

from __future__ import annotations

import msgspec

from berth.controllers.runtime.config import dump_yaml, load_yaml
from berth.controllers.scheduler.antiflap import AntiFlapConfig
from berth.controllers.scheduler.framework.profile import ExtenderSpec as Extender
from berth.controllers.scheduler.framework.profile import PluginSpec
from berth.controllers.scheduler.trim import LedgerConfig


class Backoff(msgspec.Struct, forbid_unknown_fields=True):
    initial: float = 1.0  # seconds before the first retry
    max: float = 10.0


class Preemption(msgspec.Struct, forbid_unknown_fields=True):
    """Making room for an application that fits nowhere (docs/scheduler.md "Priority and
    preemption")."""

    enabled: bool = True
    # Seconds the room a plan makes is reserved for its application; an application
    # that made room is no victim again for as long.
    deadline: float = 600.0
    candidates: int = 100  # clusters a plan tries at most, the least short of room first


def default_plugins() -> dict[str, list[PluginSpec]]:
    p = PluginSpec
    return {
        "queueSort": [p("PrioritySort")],
        "preFilter": [p("PlacementFixed"), p("LabelConstraints"), p("MetricConstraints"),
                      p("ClusterAffinity"), p("WorkloadAffinity"), p("TopologySpread"),
                      p("ClusterGroups"), p("Capacity"), p("FailedTargets"), p("DependsOn")],
        "filter": [p("CandidateOnline"), p("FailedTargets"), p("PlacementFixed"),
                   p("LabelConstraints"), p("CustomResources"), p("MetricConstraints"),
                   p("ClusterSelector"),
                   p("ClusterAffinity"), p("TaintToleration"), p("TopologySpread"),
                   p("WorkloadAffinity"), p("DependsOn"), p("ClusterGroups"), p("Capacity")],
        "score": [p("MetricScore", 1.0), p("ClusterAffinity", 1.0), p("TaintToleration", 1.0),
                  p("WorkloadAffinity", 1.0), p("Capacity", 1.0)],
        "permit": [p("Gang")],
        "bind": [p("DefaultBinder")],
    }


class SchedulerConfig(msgspec.Struct, forbid_unknown_fields=True):
    scheduler_name: str = "berth"  # subjects naming another scheduler are left alone
    reschedule_after: float = 60.0
    stickiness_weight: float = 0.1
    percentage_of_clusters_to_score: float = 100.0
    backoff: Backoff = msgspec.field(default_factory=Backoff)
    unschedulable_flush: float = 60.0
    # operations per etcd transaction at most (a Binding is one, each ledger record it
    # carries one more); 0: as many as etcd allows (--etcd-max-txn-ops)
    bind_batch: int = 0
    explain_limit: int = 3  # best candidates and small rejection groups an explanation keeps
    # Seconds what berth placed on a cluster is assumed there while the cluster's
    # capacity report does not count its pods yet.
    assume_ttl: float = 300.0
    # Seconds the last whole picture of metric values stands in after no whole one is in
    # etcd (the metrics-cache died or restarts); then its values are missing. Keep it at
    # the metrics-cache's stale_after.
    metric_picture_grace: float = 60.0
    # Seconds after it starts a first placement that reads metric values waits for the
    # first whole picture of them, while the metrics-cache says it is gathering one (a
    # new fleet: placed on no values, it would move once they come); 0: never waits.
    first_picture_wait: float = 30.0
    # Deferrable work is bound this many seconds before its deadline at the latest,
    # and waits only for a start that saves at least this fraction of its cost.
    deferral_margin: float = 120.0
    deferral_min_saving: float = 0.05
    anti_flap: AntiFlapConfig = msgspec.field(default_factory=AntiFlapConfig)
    preemption: Preemption = msgspec.field(default_factory=Preemption)
    ledger: LedgerConfig = msgspec.field(default_factory=LedgerConfig)
    events: bool = True  # say what happens as events (docs/events.md)
    event_ttl: float = 3600.0  # seconds an event outlives its last occurrence
    plugins: dict[str, list[PluginSpec]] = msgspec.field(default_factory=default_plugins)
    extenders: list[Extender] = []

    def __post_init__(self) -> None:
        # An extension point the file does not mention keeps its default plugins;
        # one it lists (even as []) is exactly what the file says.
        for point, specs in default_plugins().items():
            self.plugins.setdefault(point, specs)
        if self.reschedule_after <= 0:
            raise ValueError("reschedule_after must be positive")
        if self.stickiness_weight < 0:
            raise ValueError("stickiness_weight must not be negative")
        if not 0 < self.percentage_of_clusters_to_score <= 100:
            raise ValueError("percentage_of_clusters_to_score must be in (0, 100]")
        if not 0 < self.backoff.initial <= self.backoff.max:
            raise ValueError("backoff: need 0 < initial <= max")
        if self.deferral_margin < 0 or self.deferral_min_saving < 0:
            raise ValueError("deferral_margin and deferral_min_saving must not be negative")
        if self.metric_picture_grace < 0 or self.first_picture_wait < 0:
            raise ValueError("metric_picture_grace and first_picture_wait must not be "
                             "negative")
        if self.event_ttl < 10:
            raise ValueError("event_ttl must be at least 10 seconds")
        if self.preemption.deadline <= 0 or self.preemption.candidates < 1:
            raise ValueError("preemption: deadline must be positive, candidates at least 1")
        if self.bind_batch < 0:
            raise ValueError("bind_batch must be 0 (as many operations as etcd allows) or "
                             "more")


def load_config(path: str | None) -> SchedulerConfig:
    """The configuration in ``path`` over the defaults; ValueError names the problem."""
    return load_yaml(path, SchedulerConfig)


def dump_config(config: SchedulerConfig) -> str:
    return dump_yaml(config)


__all__ = [
    "Backoff",
    "Extender",
    "PluginSpec",
    "Preemption",
    "SchedulerConfig",
    "default_plugins",
    "dump_config",
    "load_config",
]
