"""The Fleets the scheduler decides on (berth/controllers/scheduler/fleets.py): one per
kind and namespace and change, shared by the namespaces whose candidates are the same
(teams binding the same cluster sets: their indexes are built once)."""

from __future__ import annotations

from berth.controllers.scheduler.fleets import Fleets
from berth.controllers.scheduler.framework import Candidate
from berth.controllers.scheduler.framework.types import Ref

SHARED = [Candidate(Ref("Cluster", f"c{i}", "platform"), {}) for i in range(3)]
OWN = [Candidate(Ref("Cluster", "mine", "team-c"), {})]


class World:
    def __init__(self) -> None:
        self.epochs = (1, 1)
        self.built: list[str | None] = []

    def build(self, kind: str, namespace: str | None) -> list[Candidate]:
        self.built.append(namespace)
        return SHARED + (OWN if namespace == "team-c" else [])


def test_namespaces_with_the_same_candidates_share_one_fleet_and_its_indexes() -> None:
    world = World()
    fleets = Fleets(world.build, lambda: world.epochs)
    a, b, c = (fleets.of("Cluster", ns) for ns in ("team-a", "team-b", "team-c"))
    assert a is b and a is not c and len(c) == len(a) + 1
    assert a.cached("index", lambda: object()) is b.cached("index", lambda: object())
    assert fleets.of("Cluster", "team-a") is a and world.built == ["team-a", "team-b", "team-c"]

    world.epochs = (1, 2)  # metric values changed: the candidates and their structure kept
    a2, b2 = fleets.of("Cluster", "team-a"), fleets.of("Cluster", "team-b")
    assert a2 is b2 and a2 is not a and a2.structural is a.structural
    assert a2.metric_epoch == 2 and len(world.built) == 3  # nothing listed again
    assert fleets.take_before("Cluster", "team-a") is a
    assert fleets.take_before("Cluster", "team-a") is None  # once

    world.epochs = (2, 2)  # the candidates changed: each namespace's listed again
    a3 = fleets.of("Cluster", "team-a")
    assert a3 is not a2 and a3.cand_epoch == 2 and fleets.of("Cluster", "team-b") is a3
    assert world.built[3:] == ["team-a", "team-b"]
    assert fleets.changed()  # team-c's is of the epoch before, until asked for
