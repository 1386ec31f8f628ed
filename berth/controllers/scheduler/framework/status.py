"""The result of a plugin: a Status value that names the plugin, not an exception.

As in the Kubernetes scheduling framework (the Kubernetes scheduling framework): ``SUCCESS``;
``UNSCHEDULABLE`` (this candidate does not fit, another might, or later);
``UNRESOLVABLE`` (nothing will fit until the subject itself changes, e.g. an
invalid constraint); ``ERROR`` (a bug or an outage: retry with backoff);
``SKIP`` (the plugin has nothing to do for this subject); ``WAIT`` (permit:
hold the decision until approved or timed out).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from functools import lru_cache


class Code(Enum):
    SUCCESS = "Success"
    UNSCHEDULABLE = "Unschedulable"
    UNRESOLVABLE = "UnschedulableAndUnresolvable"
    ERROR = "Error"
    SKIP = "Skip"
    WAIT = "Wait"


@dataclass(frozen=True, slots=True)
class Status:
    code: Code = Code.SUCCESS
    reasons: tuple[str, ...] = ()
    plugin: str = ""
    timeout: float = field(default=0.0, compare=False)  # WAIT only

    @property
    def ok(self) -> bool:
        return self.code in (Code.SUCCESS, Code.SKIP)

    @property
    def reason(self) -> str:
        return "; ".join(self.reasons)

    def named(self, plugin: str) -> Status:
        if self.plugin:
            return self
        if self.reasons or self.timeout:
            return Status(self.code, self.reasons, plugin, self.timeout)
        return _bare(self.code, plugin)  # SUCCESS and SKIP, named at every call

    def __str__(self) -> str:
        who = f"{self.plugin}: " if self.plugin else ""
        return f"{who}{self.code.value}" + (f" ({self.reason})" if self.reasons else "")


@lru_cache(maxsize=1024)
def _bare(code: Code, plugin: str) -> Status:
    return Status(code, (), plugin)


SUCCESS = Status()
SKIP = Status(Code.SKIP)


def unschedulable(*reasons: str) -> Status:
    return Status(Code.UNSCHEDULABLE, reasons)


def unresolvable(*reasons: str) -> Status:
    return Status(Code.UNRESOLVABLE, reasons)


def error(*reasons: str) -> Status:
    return Status(Code.ERROR, reasons)


def wait(timeout: float, *reasons: str) -> Status:
    return Status(Code.WAIT, reasons, timeout=timeout)
