"""Priority: how important an application is, and what it may do to less important ones.

A ``PriorityClass`` (Kubernetes' ``scheduling.k8s.io/v1`` PriorityClass, as
a berth document: its fields under ``spec``) names a value and a preemption
policy; an application names a class (``spec.priorityClassName``) or gives
its own ``spec.priority``. Where berth differs from Kubernetes: a class is
read when the scheduler decides, not fixed into the application when it is
written (a changed class changes the priority of the applications naming
it); an application naming a class that does not exist is not refused when
written but left Unschedulable, saying so; and of several global defaults
the lowest value counts (Kubernetes refuses a second one).

An application also says what it gives up for room (``spec.preemptible``):
by default it may be moved to another cluster for room (``move``) and, if it
fits nowhere else, stopped (``stop``). docs/scheduler.md "Priority and
preemption".
"""

from __future__ import annotations

from enum import StrEnum

from berth.store.documents.base import CamelStrict, Metadata, Strict

# The largest value a class may give (Kubernetes' HighestUserDefinablePriority);
# larger ones Kubernetes keeps for its own system classes.
HIGHEST_USER_PRIORITY = 1_000_000_000


class PreemptionPolicy(StrEnum):
    """Whether an application that fits nowhere may make room (Kubernetes' values)."""

    PREEMPT_LOWER_PRIORITY = "PreemptLowerPriority"
    NEVER = "Never"


class PriorityClassSpec(CamelStrict):
    value: int
    global_default: bool = False  # the class of applications that name none
    preemption_policy: PreemptionPolicy = PreemptionPolicy.PREEMPT_LOWER_PRIORITY
    description: str = ""


class PriorityClass(Strict, tag_field="kind", tag="PriorityClass"):
    metadata: Metadata
    spec: PriorityClassSpec
    api: str = "core"


class Preemptible(CamelStrict):
    """What an application gives up so that a more important one fits: being moved to
    another cluster where it fits (make-before-break), being stopped where it fits
    nowhere else. Refusing both, it is never a victim."""

    move: bool = True
    stop: bool = True


PREEMPTIBLE = Preemptible()  # the default: moved where it fits elsewhere, else stopped


def default_class(classes: list[PriorityClass]) -> PriorityClass | None:
    """The class of applications that name none: of the global defaults, the lowest
    value (then the first by name); None when there is none."""
    defaults = [c for c in classes if c.spec.global_default]
    return min(defaults, key=lambda c: (c.spec.value, c.metadata.name)) if defaults else None


__all__ = ["HIGHEST_USER_PRIORITY", "PREEMPTIBLE", "Preemptible", "PreemptionPolicy",
           "PriorityClass", "PriorityClassSpec", "default_class"]
