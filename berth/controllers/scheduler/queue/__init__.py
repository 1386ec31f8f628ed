"""The scheduling queue and its three parts."""

from berth.controllers.scheduler.queue.scheduling_queue import SchedulingQueue

__all__ = ["SchedulingQueue"]
