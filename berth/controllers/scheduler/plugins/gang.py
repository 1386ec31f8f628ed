"""Gang: a group with ``minMember`` is bound all together or not at all (the
Kubernetes scheduling framework's permit).

A subject with ``spec.gang: {name, minMember}`` waits at permit until
``minMember`` members of its gang (same namespace and name) have been
decided; then all of them are released and bound in one etcd transaction.
A member waiting longer than ``timeout`` seconds (argument, default 30) is
rejected: its reservation is undone and it is retried with backoff. A member
that already runs somewhere is being rescheduled, not gang-placed: it passes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from msgspec import Meta

from berth.controllers.scheduler.framework import SUCCESS, CycleState, Plugin, Status, Subject, wait
from berth.controllers.scheduler.framework import plugin as points
from berth.controllers.scheduler.framework.plugin import NoArgs
from berth.store.documents import Target


class GangArgs(NoArgs, frozen=True):
    timeout: Annotated[float, Meta(gt=0)] = 30.0  # seconds a member waits for the others


NAME = "Gang"


class Gang(Plugin, points.Permit, points.Reject):
    name = NAME
    Args = GangArgs

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        super().__init__(args)
        self.timeout = self.typed(GangArgs).timeout
        self._waiting: dict[tuple[str | None, str], set[str]] = {}

    def permit(self, state: CycleState, subject: Subject, targets: list[Target]) -> Status:
        gang = subject.gang
        if gang is None or state.current:
            return SUCCESS
        group = self._waiting.setdefault((subject.ref.namespace, gang.name), set())
        group.add(subject.key)
        if len(group) < gang.min_member:
            return wait(self.timeout, f"gang {gang.name}: {len(group)}/{gang.min_member} members")
        state.allow = sorted(group - {subject.key})
        del self._waiting[(subject.ref.namespace, gang.name)]
        return SUCCESS

    def reject(self, subject: Subject) -> None:
        """The scheduler gave up waiting for ``subject``: forget it."""
        if subject.gang is None:
            return
        group = self._waiting.get((subject.ref.namespace, subject.gang.name))
        if group is not None:
            group.discard(subject.key)
