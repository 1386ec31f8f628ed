"""PrioritySort: higher ``spec.priority`` first, then the oldest in the queue."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from berth.controllers.scheduler.framework import Plugin, Subject

NAME = "PrioritySort"


class PrioritySort(Plugin):
    name = NAME

    def sort_key(self, subject: Subject, enqueued: float) -> tuple[Any, ...]:
        return (-subject.priority, enqueued)


if TYPE_CHECKING:  # the points it implements, each signature checked by mypy
    from berth.controllers.scheduler.framework import plugin as points

    _queue_sort: type[points.QueueSort] = PrioritySort
