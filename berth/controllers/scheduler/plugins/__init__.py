"""The built-in plugins, one module each, registered by name."""

from __future__ import annotations

from collections.abc import Callable

from berth.controllers.scheduler.framework import Plugin
from berth.controllers.scheduler.framework.profile import EXTENDER
from berth.controllers.scheduler.plugins.candidate_online import CandidateOnline
from berth.controllers.scheduler.plugins.capacity import Capacity
from berth.controllers.scheduler.plugins.cluster_affinity import ClusterAffinity
from berth.controllers.scheduler.plugins.cluster_groups import ClusterGroups
from berth.controllers.scheduler.plugins.cluster_selector import ClusterSelector
from berth.controllers.scheduler.plugins.custom_resources import CustomResources
from berth.controllers.scheduler.plugins.default_binder import DefaultBinder
from berth.controllers.scheduler.plugins.depends_on import DependsOn
from berth.controllers.scheduler.plugins.extender import Extender
from berth.controllers.scheduler.plugins.failed_targets import FailedTargets
from berth.controllers.scheduler.plugins.gang import Gang
from berth.controllers.scheduler.plugins.label_constraints import LabelConstraints
from berth.controllers.scheduler.plugins.metric_constraints import MetricConstraints
from berth.controllers.scheduler.plugins.metric_score import MetricScore
from berth.controllers.scheduler.plugins.placement_fixed import PlacementFixed
from berth.controllers.scheduler.plugins.priority_sort import PrioritySort
from berth.controllers.scheduler.plugins.taint_toleration import TaintToleration
from berth.controllers.scheduler.plugins.topology_spread import TopologySpread
from berth.controllers.scheduler.plugins.workload_affinity import WorkloadAffinity

REGISTRY: dict[str, Callable[..., Plugin]] = {
    cls.name: cls
    for cls in (
        CandidateOnline, Capacity, ClusterAffinity, ClusterGroups, ClusterSelector,
        CustomResources, DefaultBinder, DependsOn, FailedTargets, Gang, LabelConstraints,
        MetricConstraints, MetricScore, PlacementFixed, PrioritySort, TaintToleration,
        TopologySpread, WorkloadAffinity,
    )
}
REGISTRY[EXTENDER] = Extender  # made from each of the configuration's extenders
