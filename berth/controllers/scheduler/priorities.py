"""What an application's priority is, read from the PriorityClasses when asked.

An application names a class (``spec.priorityClassName``: the class's value
and preemption policy), gives its own ``spec.priority`` (and
``spec.preemptionPolicy``), or neither: the global default class's, else 0
and ``PreemptLowerPriority`` (Kubernetes' admission, resolved when the
scheduler decides rather than when the application is written: a changed
class counts at once). An application's own ``Never`` is honoured whatever
its class says — it can only make it less aggressive — where Kubernetes'
admission refuses a pod whose policy differs from its class's. A class named
that does not exist is a problem the application's Binding says; it is placed
at its own priority meanwhile but makes no room for itself.

A namespace's policy (:mod:`.tenancy`) limits both ways of asking: a class it does
not allow is a problem as a class that does not exist is (placed at its own
priority, no room made), and an application's own priority above the policy's
``maxPriority`` counts as that maximum. The global default class is the
administrators' word and is not limited.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from berth.controllers.runtime import Event, Informer
from berth.controllers.scheduler.framework import Ref, Subject
from berth.controllers.tenancy import Policy, Tenancy
from berth.store import keys
from berth.store.documents.priority import PreemptionPolicy, PriorityClass, default_class


@dataclass(frozen=True, slots=True)
class Priority:
    """An application's priority as resolved, and from where."""

    value: int
    policy: PreemptionPolicy
    source: str  # for people: "class critical", "its own", "default class low", "default"
    problem: str = ""  # the class it names does not exist

    @property
    def may_preempt(self) -> bool:
        return self.policy is PreemptionPolicy.PREEMPT_LOWER_PRIORITY and not self.problem


NONE = Priority(0, PreemptionPolicy.PREEMPT_LOWER_PRIORITY, "default")


@dataclass(frozen=True, slots=True)
class _Table:
    version: int
    classes: dict[str, PriorityClass]
    default: PriorityClass | None


class Priorities:
    """The PriorityClasses of an informer, resolved per subject; for any thread."""

    def __init__(self, classes: Informer[PriorityClass], tenancy: Tenancy | None = None
                 ) -> None:
        self._classes = classes
        self._tenancy = tenancy
        self._version = 0  # bumped by every change to the classes
        self._lock = threading.Lock()
        self._table = _Table(-1, {}, None)
        classes.add_handler(self._changed)

    def _changed(self, event: Event[Any]) -> None:
        with self._lock:
            self._version += 1

    def _current(self) -> _Table:
        table = self._table
        if table.version == self._version:
            return table
        with self._lock:
            version = self._version
        listed = [item.obj for item in self._classes.items()]
        table = _Table(version, {c.metadata.name: c for c in listed}, default_class(listed))
        self._table = table  # a change meanwhile bumped the version: read again next time
        return table

    def _policy(self, namespace: str | None) -> Policy | None:
        return self._tenancy.policy(namespace) if self._tenancy is not None else None

    def of(self, subject: Subject) -> Priority:
        table = self._current()
        return resolve(subject, table.classes, table.default,
                       self._policy(subject.ref.namespace))

    def lowest(self, ranks: list[tuple[str | None, int | None, str | None]]) -> int | None:
        """The lowest priority of applications of these (namespace, own priority, class
        name) (None: there are none)."""
        table = self._current()
        values: dict[tuple[int | None, str | None, int | None, bool], int] = {}
        for ns, own, cls in ranks:  # resolved once per what the value depends on: the
            policy = self._policy(ns)  # namespaces of teams with like policies are alike
            spec = policy.spec if policy is not None else None
            barred = cls is not None and spec is not None and (
                spec.priority_classes is not None and cls not in spec.priority_classes)
            alike = (own, cls, spec.max_priority if spec is not None else None, barred)
            if alike not in values:
                values[alike] = resolve(Subject(Ref("Application", ns, ""), keys.NO_KEY, "",
                                                priority=own, priority_class=cls),
                                        table.classes, table.default, policy).value
        return min(values.values(), default=None)


def resolve(subject: Subject, classes: dict[str, PriorityClass],
            default: PriorityClass | None, policy: Policy | None = None) -> Priority:
    """``subject``'s priority by the rules above (``policy``: its namespace's)."""
    own = subject.preemption_policy or PreemptionPolicy.PREEMPT_LOWER_PRIORITY
    name = subject.priority_class
    value, source = subject.priority or 0, "its own"
    top = policy.spec.max_priority if policy is not None else None
    if policy is not None and top is not None and value > top:
        value = top
        source = f"its own, capped at {top} by the policy of namespace {policy.namespace}"
    if name is not None:
        if policy is not None and policy.spec.priority_classes is not None and (
                name not in policy.spec.priority_classes):
            return Priority(value, own, source, policy.problem or (
                f"priority class {name!r} is not allowed in namespace {policy.namespace}"))
        found = classes.get(name)
        if found is None:
            return Priority(value, own, source, f"priority class {name!r} does not exist")
        return _of_class(found, f"class {name}", subject.preemption_policy)
    if subject.priority is not None:
        return Priority(value, own, source)
    if default is not None:
        return _of_class(default, f"default class {default.metadata.name}",
                         subject.preemption_policy)
    return Priority(0, own, "default")


def _of_class(c: PriorityClass, source: str, own: PreemptionPolicy | None) -> Priority:
    """A class's priority; the application's own Never holds over the class's policy."""
    if own is PreemptionPolicy.NEVER and c.spec.preemption_policy is not own:
        return Priority(c.spec.value, own, f"{source}, its own Never")
    return Priority(c.spec.value, c.spec.preemption_policy, source)


__all__ = ["NONE", "Priorities", "Priority", "resolve"]
