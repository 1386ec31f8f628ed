"""``berth explain``'s propagator line: the state, where it runs, and per cluster what
a copy waits for (docs/order.md "Dependencies")."""

from __future__ import annotations

from berth.actions.explain import propagation
from berth.store.documents import ApplicationState, ApplicationStatus, ObjectRef
from berth.store.documents.decisions import StatusMeta


def test_a_waiting_copy_is_said_per_cluster_under_the_state() -> None:
    why = "waits for default/db to be available on default/b (Progressing: 0/1 available)"
    status = ApplicationStatus(StatusMeta("web", "default"), ApplicationState(
        "WAITING", f"default/b: {why}; still running on default/a",
        [ObjectRef("Cluster", "a", "default")], waits_for={"default/b": why}))
    assert propagation(status).splitlines() == [
        f"propagator: WAITING (default/b: {why}; still running on default/a); running on "
        "default/a", f"  waits on default/b: {why}"]


def test_without_a_status_it_says_so() -> None:
    assert propagation(None) == "propagator: no status yet (not applied anywhere)"
