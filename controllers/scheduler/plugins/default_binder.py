"""DefaultBinder: hand the decision to the scheduler's Binding writer.

The writer batches decisions into etcd transactions with a compare-and-swap
on each Binding; this plugin only submits. The writer is given to the plugin
by the scheduler as the ``submit`` argument.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from controllers.scheduler.framework import SUCCESS, CycleState, Plugin, Status, Subject, error
from store.documents import Target

NAME = "DefaultBinder"

Submit = Callable[[CycleState, Subject, list[Target]], None]


class DefaultBinder(Plugin):
    name = NAME

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        super().__init__(args)
        self.submit: Submit | None = self.args.get("submit")

    def bind(self, state: CycleState, subject: Subject, targets: list[Target]) -> Status:
        if self.submit is None:
            return error("DefaultBinder has no Binding writer")
        self.submit(state, subject, targets)
        return SUCCESS
