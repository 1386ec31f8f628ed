"""Seed 000's constraint grammar: every spelling, and the failure cases."""

from __future__ import annotations

import pytest

from berth.store.constraints import ConstraintError, LabelConstraint, MetricConstraint, Op

LABELS = {"location": "DE", "zone": "b", "kubernetes.io/arch": "amd64"}


@pytest.mark.parametrize(
    ("expression", "op", "values", "matches"),
    [
        ("location is DE", Op.EQ, ("DE",), True),
        ("location = DE", Op.EQ, ("DE",), True),
        ("location == FR", Op.EQ, ("FR",), False),
        ("location is not FR", Op.NE, ("FR",), True),
        ("location != DE", Op.NE, ("DE",), False),
        ("location in (DE, FR)", Op.IN, ("DE", "FR"), True),
        ("location in (FR,IT)", Op.IN, ("FR", "IT"), False),
        ("location not in (FR, IT)", Op.NOT_IN, ("FR", "IT"), True),
        ("location not in (DE)", Op.NOT_IN, ("DE",), False),
        ("kubernetes.io/arch is amd64", Op.EQ, ("amd64",), True),
        ("location is 'DE'", Op.EQ, ("DE",), True),
        ('zone in ("a", "b")', Op.IN, ("a", "b"), True),
        ("  location   IS   DE  ", Op.EQ, ("DE",), True),
        ("location=DE", Op.EQ, ("DE",), True),
        ("location is 'DE!'", Op.EQ, ("DE!",), False),  # quoted, anything goes
    ],
)
def test_label_constraints(expression: str, op: Op, values: tuple[str, ...], matches: bool) -> None:
    c = LabelConstraint.parse(expression)
    assert (c.op, c.values) == (op, values)
    assert c.matches(LABELS) is matches


@pytest.mark.parametrize(
    "expression",
    ["missing is x", "missing = x", "missing != x", "missing is not x", "missing in (x)",
     "missing not in (x)"],
)
def test_a_missing_label_fails_every_operator(expression: str) -> None:
    assert LabelConstraint.parse(expression).matches(LABELS) is False


@pytest.mark.parametrize(
    "expression",
    ["location iz DE", "location", "location is", "location in DE", "location in ()",
     "location is DE FR", "location in (DE FR)", "= DE", "location isnot DE", "",
     "location == DE!", "location is DE=FR", "location in (DE!, FR)", "location != a;b"],
)
def test_bad_label_constraints_name_the_expression(expression: str) -> None:
    with pytest.raises(ConstraintError, match="cannot parse"):
        LabelConstraint.parse(expression)


@pytest.mark.parametrize(
    ("expression", "op", "value"),
    [
        ("load is 5", Op.EQ, 5), ("load = 5", Op.EQ, 5), ("load == 5", Op.EQ, 5),
        ("load is not 5", Op.NE, 5), ("load != 5", Op.NE, 5),
        ("load greater than 5", Op.GT, 5), ("load gt 5", Op.GT, 5), ("load > 5", Op.GT, 5),
        ("load greater than or equal 5", Op.GE, 5), ("load gte 5", Op.GE, 5),
        ("load >= 5", Op.GE, 5), ("load => 5", Op.GE, 5),
        ("load less than 5", Op.LT, 5), ("load lt 5", Op.LT, 5), ("load < 5", Op.LT, 5),
        ("load lesser than 5", Op.LT, 5),
        ("load less than or equal 5", Op.LE, 5), ("load lte 5", Op.LE, 5),
        ("load <= 5", Op.LE, 5), ("load =< 5", Op.LE, 5), ("load lesser than or equal 5", Op.LE, 5),
        ("load<0.25", Op.LT, 0.25), ("heat_demand_zone_1 >= -1e3", Op.GE, -1000),
    ],
)
def test_metric_constraint_spellings(expression: str, op: Op, value: float) -> None:
    c = MetricConstraint.parse(expression)
    assert (c.metric, c.op, c.value) == (expression.split()[0].split("<")[0], op, value)


@pytest.mark.parametrize(
    ("expression", "value", "matches"),
    [("load < 5", 4.9, True), ("load < 5", 5, False), ("load <= 5", 5, True),
     ("load > 5", 5, False), ("load >= 5", 5, True), ("load = 5", 5.0, True),
     ("load != 5", 5, False), ("load < 5", None, False), ("load != 5", None, False)],
)
def test_metric_constraints_compare_the_raw_value(
    expression: str, value: float | None, matches: bool
) -> None:
    assert MetricConstraint.parse(expression).matches(value) is matches


@pytest.mark.parametrize(
    "expression", ["load < five", "load ~ 5", "load < 5 6", "load in (1, 2)", "load < nan",
                   "load < inf", "load"])
def test_bad_metric_constraints(expression: str) -> None:
    with pytest.raises(ConstraintError, match="cannot parse"):
        MetricConstraint.parse(expression)


def test_constraints_print_canonically() -> None:
    assert str(LabelConstraint.parse("location in (DE,FR)")) == "location in (DE, FR)"
    assert str(MetricConstraint.parse("load lesser than 5")) == "load < 5"
