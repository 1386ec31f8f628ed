"""DefaultBinder: the decision is bound by writing the subject's Binding.

The scheduler itself writes the Binding once the bind extension point
succeeded (a batch of Bindings per etcd transaction, each guarded by its
revision): the Binding is the contract the propagator reads, so no plugin
replaces it. This plugin is the bind point's default: it approves. A bind
plugin before it may veto (an error) or approve; one that returns SKIP leaves
the decision to the next.
"""

from __future__ import annotations

from berth.controllers.scheduler.framework import SUCCESS, CycleState, Plugin, Status, Subject
from berth.controllers.scheduler.framework import plugin as points
from berth.store.documents import Target

NAME = "DefaultBinder"


class DefaultBinder(Plugin, points.Bind):
    name = NAME

    def bind(self, state: CycleState, subject: Subject, targets: list[Target]) -> Status:
        return SUCCESS
