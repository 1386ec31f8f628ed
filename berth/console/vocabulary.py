"""The words the console's script shares with berth's documents, made from the enums
that define them and served as ``/vocabulary.js``: the script keeps no copy of its own,
so a word added to an enum reaches the page without anyone editing the script."""

from __future__ import annotations

import json
from enum import StrEnum

from berth.store.documents import AppState, BindingState, HealthState, Reachability
from berth.store.documents.pace import IN_PROGRESS


def _names(enum: type[StrEnum]) -> dict[str, str]:
    return {member.name: member.value for member in enum}


def words() -> dict[str, object]:
    """Each closed set the script compares with, by its enum's member names; the rollout
    phases under way (``underWay``); the states an application can be filtered by (the
    propagator's, then the Binding's)."""
    return {
        "reachability": _names(Reachability),
        "health": _names(HealthState),
        "underWay": [phase.value for phase in IN_PROGRESS],
        "filterStates": [s.value for s in AppState] + [s.value for s in BindingState],
    }


def script() -> str:
    """``/vocabulary.js``: one constant, ``BERTH``, that console.js reads."""
    return ("// berth's words, made from its documents' enums when the console serves it\n"
            f"const BERTH = Object.freeze({json.dumps(words(), sort_keys=True)});\n")
