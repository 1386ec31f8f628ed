"""What a copy waits for of its dependencies, and what a copy is kept for.

Pure: the facts builder gives each function what the informers hold of the
applications concerned (docs/order.md "Dependencies"). A dependent's copy on a
cluster is applied once each dependency's copy there is available (``when:
Available``) or applied at the dependency's current generation (``Applied``),
and none of the dependency's own steps still waits; a dependency's copy on a
cluster stays while a dependent's copy is recorded there.
"""

from __future__ import annotations

from collections.abc import Iterable

from berth.controllers.propagator.views import AppView
from berth.store.documents import ApplicationState, HealthState
from berth.store.documents.reasons import listed


def waits(owner: str, when: str, view: AppView | None, recorded: ApplicationState | None,
          cid: str) -> str:
    """What a dependent's copy on ``cid`` waits for of the dependency ``owner``
    (``<namespace>/<name>``): "" when nothing."""
    if view is None:
        return f"waits for application {owner}, which does not exist"
    if view.metadata.deleted is not None:
        return f"waits for application {owner}, which is being deleted"
    have = recorded.applied.get(cid) if recorded is not None else None
    if have is None or have.generation == 0:
        return f"waits for {owner} to run on {cid}"
    if have.waiting:
        return f"waits for {owner} on {cid}: {have.waiting}"
    if when == "Applied":
        gen = view.metadata.generation
        return "" if have.generation == gen else (
            f"waits for {owner} generation {gen} on {cid} (it has {have.generation})")
    if have.health != HealthState.HEALTHY:
        why = f"{have.health or HealthState.UNKNOWN}" + (f": {have.reason}" if have.reason
                                                         else "")
        return f"waits for {owner} to be available on {cid} ({why})"
    return ""


def keeping(dependents: Iterable[tuple[str, ApplicationState | None]], cid: str) -> str:
    """The dependents (``<namespace>/<name>``, their status) whose copy is recorded on
    ``cid``, for a reason: the dependency's copy there stays ("" when none)."""
    return listed(sorted(owner for owner, st in dependents
                         if st is not None and cid in st.applied))
