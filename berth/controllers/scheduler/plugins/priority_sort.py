"""PrioritySort: higher ``spec.priority`` first, then the oldest in the queue."""

from __future__ import annotations

from typing import Any

from berth.controllers.scheduler.framework import Plugin, Subject

NAME = "PrioritySort"


class PrioritySort(Plugin):
    name = NAME

    def sort_key(self, subject: Subject, enqueued: float) -> tuple[Any, ...]:
        return (-subject.priority, enqueued)
