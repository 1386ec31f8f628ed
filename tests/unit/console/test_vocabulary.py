"""The words console.js shares with berth's documents come from their enums, served as
``/vocabulary.js``; the script keeps no copy of them."""

from __future__ import annotations

import json
import re
from importlib import resources

from berth.console.vocabulary import script, words
from berth.store.documents import AppState, BindingState, HealthState, Reachability
from berth.store.documents.pace import IN_PROGRESS

STATIC = resources.files("berth.console") / "static"


def test_the_words_are_the_enums_values() -> None:
    said = words()
    assert said["reachability"] == {"ONLINE": "ONLINE", "UNHEALTHY": "UNHEALTHY",
                                    "OFFLINE": "OFFLINE"}
    assert said["health"] == {m.name: m.value for m in HealthState}
    assert said["underWay"] == [p.value for p in IN_PROGRESS]
    assert said["filterStates"] == [*AppState, *BindingState]
    body = script().split("Object.freeze(", 1)[1].rsplit(");", 1)[0]
    assert json.loads(body) == json.loads(json.dumps(said))


def test_the_script_keeps_no_copy_of_them() -> None:
    js = (STATIC / "console.js").read_text()
    literals = set(re.findall(r'"([^"\\]*)"', js))
    copies = literals & ({r.value for r in Reachability} | {p.value for p in IN_PROGRESS}
                         | {s.value for s in AppState})
    assert not copies, f"console.js spells {sorted(copies)} itself; read them from BERTH"
    html = (STATIC / "index.html").read_text()
    assert html.index("/vocabulary.js") < html.index("/static/console.js")
