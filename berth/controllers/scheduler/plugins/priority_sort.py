"""PrioritySort: the higher priority first (an application's class's, or its own),
then the oldest in the queue."""

from __future__ import annotations

from typing import Any

from berth.controllers.scheduler.framework import Plugin, Subject
from berth.controllers.scheduler.framework import plugin as points

NAME = "PrioritySort"


class PrioritySort(Plugin, points.QueueSort):
    name = NAME

    def sort_key(self, subject: Subject, enqueued: float, priority: int) -> tuple[Any, ...]:
        return (-priority, enqueued)
