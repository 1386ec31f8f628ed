"""The script against the pages' response schemas: every field ``console.js`` reads of
a page's data is one the page's msgspec type has (its JSON schema, as msgspec makes
it), followed through nested objects and lists. A field renamed or dropped on the
server, or misspelt in the script, fails here rather than as a blank cell."""

from __future__ import annotations

import re
from importlib import resources
from typing import Any

import msgspec
import pytest

from berth.console.pages import PAGES
from berth.console.pages.application import ApplicationPage, Done
from berth.console.pages.applications import ApplicationsPage
from berth.console.pages.common import Head
from berth.console.pages.fleet import FleetPage
from berth.console.pages.metrics import MetricsPage
from berth.console.pages.whatif import WhatIfPage

SCRIPT = (resources.files("berth.console") / "static" / "console.js").read_text()
_, DEFS = msgspec.json.schema_components(
    [FleetPage, ApplicationsPage, ApplicationPage, Done, MetricsPage, WhatIfPage, Head],
    ref_template="{name}")

# what the script may call on a value of each JSON type
METHODS = {"array": {"length", "map", "slice", "filter", "forEach", "join", "includes"},
           "string": {"length", "replace", "slice", "startsWith", "split"},
           "number": {"toFixed"}, "integer": {"toFixed"}, "boolean": set(), "null": set()}

# (where in the script, its variables → the schema types they hold)
BLOCKS: list[tuple[str, dict[str, list[str]]]] = [
    ("async function refresh(", {"data": ["Head"]}),
    ("function bar(", {"c": ["ClusterRow"], "a": ["Capacity"]}),
    ("const fleetPage = {", {"d": ["FleetPage"], "g": ["Group"], "c": ["ClusterRow"],
                             "m": ["MetricCell"]}),
    ("const appsPage = {", {"d": ["ApplicationsPage"], "a": ["AppRow"]}),
    ("async function act(", {"r": ["Done"]}),
    ("const appPage = {", {"d": ["ApplicationPage"], "dec": ["Decision"], "ro": ["Rollout"],
                           "t": ["TargetCell"], "c": ["HealthRow"], "e": ["EventRow"],
                           "r": ["LedgerRow", "row"]}),
    ("const metricsPage = {", {"d": ["MetricsPage"], "s": ["Series"], "m": ["MoveRow"],
                               "x": ["Deferred"]}),
    ("function draw(", {"s": ["Series"], "m": ["MoveRow"]}),
    ("function whatIfForm(", {"r": ["WhatIfPage"], "a": ["Answer"], "v": ["Verdict"],
                              "c": ["Consequence"]}),
]
ROW = {"type": "array", "items": {"type": "string"}}  # a table's row of cells


def block(start: str) -> str:
    """The script from ``start`` to the end of its top-level statement."""
    at = SCRIPT.index(start)
    end = re.compile(r"^\}", re.M).search(SCRIPT, at)
    assert end is not None, start
    return SCRIPT[at:end.end()]


def alternatives(schema: dict[str, Any]) -> list[dict[str, Any]]:
    """The schema's possible shapes, references resolved."""
    if "$ref" in schema:
        return alternatives(DEFS[schema["$ref"]])
    if "anyOf" in schema:
        return [s for alt in schema["anyOf"] for s in alternatives(alt)]
    return [schema]


def reads(schema: dict[str, Any], path: list[str]) -> bool:
    """Whether ``value.path…`` is a field (or a method the script may call) of some
    shape of ``schema``."""
    if not path:
        return True
    head, rest = path[0], path[1:]
    for shape in alternatives(schema):
        kind = shape.get("type", "object")
        if kind == "object" and head in shape.get("properties", {}):
            if reads(shape["properties"][head], rest):
                return True
        elif isinstance(kind, str) and head in METHODS.get(kind, set()):
            return True  # a call: what it returns is not followed
    return False


def accesses(text: str, name: str) -> list[list[str]]:
    """Every ``name.a.b`` the text reads (not ``x.name.a``, not a declaration)."""
    found = re.finditer(rf"(?<![\w.$]){re.escape(name)}((?:\.[A-Za-z_]\w*)+)", text)
    return [m.group(1).split(".")[1:] for m in found]


@pytest.mark.parametrize(("start", "variables"), BLOCKS, ids=[b[0] for b in BLOCKS])
def test_what_the_script_reads_is_in_the_pages_schema(start: str,
                                                      variables: dict[str, list[str]]) -> None:
    text = block(start)
    unknown = []
    seen = 0
    for name, types in variables.items():
        for path in accesses(text, name):
            seen += 1
            shapes = [ROW if t == "row" else {"$ref": t} for t in types]
            if not any(reads(s, path) for s in shapes):
                unknown.append(f"{name}.{'.'.join(path)} (a {' or '.join(types)})")
    assert seen, f"{start}: the script reads nothing of {sorted(variables)} (renamed?)"
    assert unknown == [], f"{start}: the script reads what the page does not send"


def test_a_misspelt_or_dropped_field_is_caught() -> None:
    """The check itself: names it does not know fail, the ones it knows pass."""
    assert reads({"$ref": "FleetPage"}, ["groups", "length"])
    assert reads({"$ref": "ClusterRow"}, ["capacity"])
    assert reads({"$ref": "MoveRow"}, ["from", "join"])  # renamed from from_ on the wire
    assert not reads({"$ref": "MoveRow"}, ["from_"])
    assert not reads({"$ref": "ClusterRow"}, ["metrics", "value"])  # a list, not a cell
    assert not reads({"$ref": "Rollout"}, ["awaiting"])
    assert reads({"$ref": "ApplicationPage"}, ["decision", "targets", "map"])  # nullable
    assert accesses("x.d.a + d.b.c(d.e)", "d") == [["b", "c"], ["e"]]


def test_every_api_page_has_a_schema_type() -> None:
    for page in PAGES:
        assert page.path.startswith("/api/")
        schema = msgspec.json.schema(page.response)
        assert schema["$defs"], page.path
