"""Gang: members of a gang wait at permit until ``minMember`` of them are decided, then
all are released together (the Kubernetes scheduling framework's permit). The
scheduler binding them in one transaction is tested in ``test_scheduler.py``."""

from __future__ import annotations

import pytest

from berth.controllers.scheduler.framework import Code, CycleState, Subject
from berth.controllers.scheduler.plugins.gang import Gang
from berth.store.documents import Gang as GangSpec
from berth.store.documents import Target
from berth_testkit.fakes.scheduler import app

TO = [Target("Cluster", "a", "default")]


def member(name: str, gang: str = "g", minimum: int = 3) -> Subject:
    return app(name, gang=GangSpec(gang, minimum))


def test_members_wait_until_enough_are_decided_then_all_are_released() -> None:
    plugin = Gang({"timeout": 5})
    first, second = CycleState(), CycleState()
    waiting = plugin.permit(first, member("m1"), TO)
    assert waiting.code is Code.WAIT and "1/3 members" in waiting.reason
    assert plugin.permit(second, member("m2"), TO).code is Code.WAIT
    other = plugin.permit(CycleState(), member("x1", gang="h"), TO)
    assert other.code is Code.WAIT and "1/3" in other.reason  # another gang counts apart
    last = CycleState()
    assert plugin.permit(last, member("m3"), TO).ok
    assert last.allow == ["/berth/v1/applications/default/m1",
                          "/berth/v1/applications/default/m2"]


def test_a_member_rejected_is_forgotten_and_a_placed_one_or_one_alone_passes() -> None:
    plugin = Gang()
    assert plugin.timeout == 30
    plugin.permit(CycleState(), member("m1", minimum=2), TO)
    plugin.reject(member("m1", minimum=2))
    again = plugin.permit(CycleState(), member("m2", minimum=2), TO)
    assert again.code is Code.WAIT and "1/2" in again.reason
    placed = CycleState(current=TO)  # rescheduled, not gang-placed
    assert plugin.permit(placed, member("m3", minimum=2), TO).ok
    assert plugin.permit(CycleState(), app("solo"), TO).ok
    with pytest.raises(ValueError, match="timeout"):
        Gang({"timeout": "soon"})
