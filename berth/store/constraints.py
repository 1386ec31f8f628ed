"""Seed 000's constraint language: label and metric constraints.

Label constraints (``location is DE``, ``zone in (a, b)``) restrict the
clusters (or clouds) an application (or cluster) may be placed on by their
labels; metric constraints (``load < 5``) by the current raw value of a
metric. Every spelling Krake lists is accepted, plus Krake's own
``lesser than`` forms. Parsing is shared by bootstrap (validation before
anything is written) and the scheduler (evaluation), so both agree on what an
expression means.

A missing label fails every operator, ``!=`` and ``not in`` included; a
missing metric value fails every metric constraint.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum


class ConstraintError(ValueError):
    """An expression that does not parse; the message quotes it."""


class Op(Enum):
    EQ = "=="
    NE = "!="
    IN = "in"
    NOT_IN = "not in"
    GT = ">"
    GE = ">="
    LT = "<"
    LE = "<="


# Longest spellings first, so "is not" is not read as "is", nor ">=" as ">".
_LABEL_OPS: tuple[tuple[str, Op], ...] = (
    ("not in", Op.NOT_IN),
    ("is not", Op.NE),
    ("in", Op.IN),
    ("is", Op.EQ),
    ("==", Op.EQ),
    ("!=", Op.NE),
    ("=", Op.EQ),
)
_METRIC_OPS: tuple[tuple[str, Op], ...] = (
    ("greater than or equal", Op.GE),
    ("lesser than or equal", Op.LE),
    ("less than or equal", Op.LE),
    ("greater than", Op.GT),
    ("lesser than", Op.LT),
    ("less than", Op.LT),
    ("is not", Op.NE),
    ("gte", Op.GE),
    ("lte", Op.LE),
    ("gt", Op.GT),
    ("lt", Op.LT),
    ("is", Op.EQ),
    (">=", Op.GE),
    ("=>", Op.GE),
    ("<=", Op.LE),
    ("=<", Op.LE),
    ("==", Op.EQ),
    ("!=", Op.NE),
    (">", Op.GT),
    ("<", Op.LT),
    ("=", Op.EQ),
)

_NAME = re.compile(r"\s*([A-Za-z0-9_][A-Za-z0-9_./-]*)\s*")
# An unquoted value is a label value's characters (or a number's); anything else,
# like ``DE!`` or ``a=b``, must be quoted to be meant.
_UNQUOTED = r"[A-Za-z0-9_.:/+-]+"
_VALUE = re.compile(r"\s*(?:\"([^\"]*)\"|'([^']*)'|(" + _UNQUOTED + r"))\s*")
_PLAIN = re.compile(_UNQUOTED)  # an unquoted value, whole


def _match_op(text: str, ops: tuple[tuple[str, Op], ...]) -> tuple[Op, str] | None:
    lowered = text.lower()
    for spelling, op in ops:
        if not lowered.startswith(spelling):
            continue
        rest = text[len(spelling) :]
        # A word operator must be followed by a space or "(": "isolated" is not "is".
        if spelling[-1].isalpha() and rest and not (rest[0].isspace() or rest[0] == "("):
            continue
        return op, rest
    return None


def _head(expression: str, ops: tuple[tuple[str, Op], ...], what: str) -> tuple[str, Op, str]:
    if not isinstance(expression, str):
        raise ConstraintError(f"a {what} constraint must be a string, got {expression!r}")
    m = _NAME.match(expression)
    if not m:
        raise ConstraintError(f"cannot parse {expression!r}: expected a {what} name first")
    found = _match_op(expression[m.end() :], ops)
    if found is None:
        raise ConstraintError(f"cannot parse {expression!r}: unknown operator after {m.group(1)!r}")
    return m.group(1), found[0], found[1]


def _value(text: str, expression: str) -> tuple[str, str]:
    m = _VALUE.match(text)
    if not m:
        raise ConstraintError(f"cannot parse {expression!r}: expected a value")
    value = next(g for g in m.groups() if g is not None)
    return value, text[m.end() :]


@dataclass(frozen=True, slots=True)
class LabelConstraint:
    """``<label> <op> <value>`` or ``<label> [not] in (<value>, ...)``."""

    label: str
    op: Op
    values: tuple[str, ...]

    @classmethod
    def parse(cls, expression: str) -> LabelConstraint:
        label, op, rest = _head(expression, _LABEL_OPS, "label")
        if op in (Op.IN, Op.NOT_IN):
            rest = rest.strip()
            if not (rest.startswith("(") and rest.endswith(")")):
                raise ConstraintError(
                    f"cannot parse {expression!r}: '{op.value}' takes a list like (a, b)"
                )
            inner = rest[1:-1]
            if '"' not in inner and "'" not in inner:  # the usual list: split at once
                plain = [v.strip() for v in inner.split(",")]
                if all(_PLAIN.fullmatch(v) for v in plain):
                    return cls(label, op, tuple(plain))
            values: list[str] = []  # else value by value, to say where it went wrong
            while inner.strip():
                value, inner = _value(inner, expression)
                values.append(value)
                inner = inner.strip()
                if inner and not inner.startswith(","):
                    raise ConstraintError(f"cannot parse {expression!r}: expected ',' or ')'")
                inner = inner[1:]
            if not values:
                raise ConstraintError(f"cannot parse {expression!r}: the list is empty")
            return cls(label, op, tuple(values))
        value, rest = _value(rest, expression)
        if rest.strip():
            raise ConstraintError(f"cannot parse {expression!r}: unexpected {rest.strip()!r}")
        return cls(label, op, (value,))

    def matches(self, labels: Mapping[str, str]) -> bool:
        """True if ``labels`` satisfy the constraint; a missing label never does."""
        value = labels.get(self.label)
        if value is None:
            return False
        if self.op in (Op.EQ, Op.IN):
            return value in self.values
        return value not in self.values

    def __str__(self) -> str:
        if self.op in (Op.IN, Op.NOT_IN):
            return f"{self.label} {self.op.value} ({', '.join(self.values)})"
        return f"{self.label} {self.op.value} {self.values[0]}"


@dataclass(frozen=True, slots=True)
class MetricConstraint:
    """``<metric> <op> <number>``, compared with the metric's current raw value."""

    metric: str
    op: Op
    value: float

    @classmethod
    def parse(cls, expression: str) -> MetricConstraint:
        metric, op, rest = _head(expression, _METRIC_OPS, "metric")
        text, rest = _value(rest, expression)
        if rest.strip():
            raise ConstraintError(f"cannot parse {expression!r}: unexpected {rest.strip()!r}")
        try:
            value = float(text)
        except ValueError:
            raise ConstraintError(
                f"cannot parse {expression!r}: {text!r} is not a number"
            ) from None
        if not math.isfinite(value):
            raise ConstraintError(f"cannot parse {expression!r}: {text!r} is not finite")
        return cls(metric, op, value)

    def matches(self, value: float | None) -> bool:
        """True if ``value`` satisfies the constraint; a missing value never does."""
        if value is None:
            return False
        match self.op:
            case Op.EQ:
                return value == self.value
            case Op.NE:
                return value != self.value
            case Op.GT:
                return value > self.value
            case Op.GE:
                return value >= self.value
            case Op.LT:
                return value < self.value
            case Op.LE:
                return value <= self.value
        return False  # pragma: no cover - IN / NOT_IN are not metric operators

    def __str__(self) -> str:
        return f"{self.metric} {self.op.value} {self.value:g}"


def check_custom_resource(name: str) -> None:
    """Raise ConstraintError unless ``name`` has the ``<plural>.<group>`` form."""
    if not isinstance(name, str) or not re.fullmatch(
        r"[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)+", name
    ):
        raise ConstraintError(f"{name!r} is not a custom resource name <plural>.<group>")
