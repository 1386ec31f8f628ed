"""The scheduling queue and its three parts."""

from controllers.scheduler.queue.scheduling_queue import SchedulingQueue

__all__ = ["SchedulingQueue"]
