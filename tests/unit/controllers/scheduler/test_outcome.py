"""outcome.binding_write: what a Binding says after an attempt, and when nothing is written."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from berth.controllers.scheduler.antiflap import HELD_PREFIX
from berth.controllers.scheduler.binder import Write
from berth.controllers.scheduler.outcome import Outcome, binding_write
from berth.controllers.scheduler.views import BindingView
from berth.store import decode
from berth.store.documents import Binding, BindingState, Target
from berth_testkit.fakes.scheduler import app

T0 = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
LATER = T0 + timedelta(minutes=5)

SCHEDULED, PENDING, UNSCHEDULABLE = (BindingState.SCHEDULED, BindingState.PENDING,
                                      BindingState.UNSCHEDULABLE)


def on(*names: str, replicas: int | None = None) -> list[Target]:
    return [Target("Cluster", n, "default", replicas=replicas) for n in names]


class Explaining:
    """An explanation that counts how often it was built."""

    def __init__(self) -> None:
        self.built = 0

    def __call__(self) -> list[dict[str, object]]:
        self.built += 1
        return [{"cluster": "de-1"}]


def written(write: Write | None) -> Binding:
    assert write is not None and write.value is not None
    return decode(write.value, Binding)


def bound(targets: list[Target], state: BindingState = SCHEDULED, reason: str = "",
          generation: int = 1) -> BindingView:
    """The Binding as the scheduler knows it after the first write of these."""
    first = binding_write(app(generation=generation), None,
                          Outcome(targets, state, reason, list), term=3, now=T0)
    doc = written(first)
    return BindingView.of(doc)


def test_a_first_binding_names_its_targets_since_now_in_the_leaders_term() -> None:
    explain = Explaining()
    w = binding_write(app(generation=2), None,
                      Outcome(on("de-1"), SCHEDULED, "1/1 clusters", explain),
                      term=7, now=T0)
    doc = written(w)
    assert [t.name for t in doc.spec.targets] == ["de-1"]
    assert doc.spec.generation == 2 and doc.spec.scheduled == T0
    assert doc.metadata.created == doc.metadata.modified == T0
    assert doc.status.state == SCHEDULED and doc.status.term == 7
    assert doc.status.explanation == [{"cluster": "de-1"}] and explain.built == 1
    assert w is not None and w.said is not None and "(new) → de-1, Scheduled" in w.said


def test_nothing_is_written_when_an_observer_would_see_nothing_change() -> None:
    """A Scheduled Binding's summary changes with the fleet: a new one alone is not
    written, and its explanation is never built."""
    explain = Explaining()
    was = bound(on("de-1"), reason="3/4 clusters")
    assert binding_write(app(generation=1), was,
                         Outcome(on("de-1"), SCHEDULED, "4/4 clusters", explain),
                         term=3, now=LATER) is None
    assert explain.built == 0


def test_a_new_generation_is_written_and_keeps_the_time_of_scheduling() -> None:
    was = bound(on("de-1"))
    doc = written(binding_write(app(generation=2), was,
                                Outcome(on("de-1"), SCHEDULED, "", list), term=3, now=LATER))
    assert doc.spec.generation == 2 and doc.spec.scheduled == T0
    assert doc.metadata.created == T0 and doc.metadata.modified == LATER


def test_a_move_is_scheduled_anew() -> None:
    was = bound(on("de-1"))
    w = binding_write(app(generation=1), was, Outcome(on("fr-1"), SCHEDULED, "", list),
                      term=3, now=LATER)
    doc = written(w)
    assert [t.name for t in doc.spec.targets] == ["fr-1"] and doc.spec.scheduled == LATER
    assert w is not None and w.said is not None and "de-1 → fr-1" in w.said


def test_new_shares_are_written_on_the_same_targets_without_rescheduling() -> None:
    was = bound(on("de-1", "fr-1", replicas=2))
    w = binding_write(app(generation=1), was,
                      Outcome(on("de-1", "fr-1", replicas=3), SCHEDULED, "", list),
                      term=3, now=LATER)
    doc = written(w)
    assert [t.replicas for t in doc.spec.targets] == [3, 3] and doc.spec.scheduled == T0
    assert w is not None and w.said is not None and "de-1=2,fr-1=2 → de-1=3,fr-1=3" in w.said


def test_a_hold_is_written_once_and_cleared_once() -> None:
    """The rule holding a move is a field (``status.held``); its reason is for people."""
    held = f"{HELD_PREFIX}: moved 2 minutes ago"
    was = bound(on("de-1"))
    hold = binding_write(app(generation=1), was,
                         Outcome(on("de-1"), SCHEDULED, held, list, held="min_dwell"),
                         term=3, now=LATER)
    doc = written(hold)
    assert (doc.status.reason, doc.status.held) == (held, "min_dwell")
    assert hold is not None and hold.said is None  # targets and state are unchanged
    assert hold.view is not None and hold.view.status.held == "min_dwell"
    assert binding_write(app(generation=1), hold.view,
                         Outcome(on("de-1"), SCHEDULED, held, list, held="min_dwell"),
                         term=3, now=LATER) is None
    other = binding_write(app(generation=1), hold.view,  # the same words, another rule
                          Outcome(on("de-1"), SCHEDULED, held, list, held="budget"),
                          term=3, now=LATER)
    assert written(other).status.held == "budget"
    cleared = binding_write(app(generation=1), hold.view,
                            Outcome(on("de-1"), SCHEDULED, "", list), term=3, now=LATER)
    assert (written(cleared).status.reason, written(cleared).status.held) == ("", "")


def test_an_unschedulable_binding_keeps_its_targets_and_says_a_new_reason() -> None:
    was = bound(on("de-1"), UNSCHEDULABLE, "0/4 clusters: offline")
    assert binding_write(app(generation=1), was,
                         Outcome(on("de-1"), UNSCHEDULABLE, "0/4 clusters: offline", list),
                         term=3, now=LATER) is None
    doc = written(binding_write(app(generation=1), was,
                                Outcome(on("de-1"), UNSCHEDULABLE, "0/4 clusters: tainted",
                                        list), term=3, now=LATER))
    assert doc.status.reason == "0/4 clusters: tainted" and doc.spec.scheduled == T0


def test_deferred_work_has_no_targets_and_no_time_of_scheduling() -> None:
    start = T0 + timedelta(hours=2)
    w = binding_write(app(generation=1), None,
                      Outcome([], PENDING, "deferred until 14:00", list, deferred_until=start),
                      term=3, now=T0)
    doc = written(w)
    assert doc.spec.targets == [] and doc.spec.scheduled is None
    assert doc.status.state == PENDING and doc.status.deferred_until == start
    assert w is not None and w.view is not None
    assert binding_write(app(generation=1), w.view,
                         Outcome([], PENDING, "deferred until 14:00", list, deferred_until=start),
                         term=3, now=T0) is None
    later = binding_write(app(generation=1), w.view,  # a new plan: written again
                          Outcome([], PENDING, "deferred until 14:00", list,
                                  deferred_until=start + timedelta(minutes=5)), term=3, now=T0)
    assert written(later).status.deferred_until == start + timedelta(minutes=5)


def test_no_log_line_is_made_unless_asked() -> None:
    w = binding_write(app(generation=1), None, Outcome(on("de-1"), SCHEDULED, "", list),
                      term=3, now=T0, say=False)
    assert w is not None and w.said is None
