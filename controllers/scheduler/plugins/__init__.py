"""The built-in plugins, one module each, registered by name."""

from __future__ import annotations

from collections.abc import Callable

from controllers.scheduler.framework import Plugin
from controllers.scheduler.plugins.candidate_online import CandidateOnline
from controllers.scheduler.plugins.cluster_affinity import ClusterAffinity
from controllers.scheduler.plugins.cluster_selector import ClusterSelector
from controllers.scheduler.plugins.custom_resources import CustomResources
from controllers.scheduler.plugins.default_binder import DefaultBinder
from controllers.scheduler.plugins.gang import Gang
from controllers.scheduler.plugins.label_constraints import LabelConstraints
from controllers.scheduler.plugins.metric_constraints import MetricConstraints
from controllers.scheduler.plugins.metric_score import MetricScore
from controllers.scheduler.plugins.placement_fixed import PlacementFixed
from controllers.scheduler.plugins.priority_sort import PrioritySort
from controllers.scheduler.plugins.taint_toleration import TaintToleration
from controllers.scheduler.plugins.topology_spread import TopologySpread
from controllers.scheduler.plugins.workload_affinity import WorkloadAffinity

REGISTRY: dict[str, Callable[..., Plugin]] = {
    cls.name: cls
    for cls in (
        CandidateOnline, ClusterAffinity, ClusterSelector, CustomResources, DefaultBinder, Gang,
        LabelConstraints, MetricConstraints, MetricScore, PlacementFixed, PrioritySort,
        TaintToleration, TopologySpread, WorkloadAffinity,
    )
}
