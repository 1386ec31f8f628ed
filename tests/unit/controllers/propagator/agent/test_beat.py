"""An agent's heartbeat turns ONLINE with what the cluster holds: each time it turns
ONLINE — first, after a restart (a new heartbeat), after the cluster was unhealthy — it
waits for its capacity's first lists, and not while it stays ONLINE. On real servers, in
push and pull mode: tests/integration/test_agent.py."""

from __future__ import annotations

import time

from berth.controllers.propagator.agent.beat import Beat, heartbeat_body
from berth.controllers.propagator.agent.config import AgentConfig
from berth.controllers.propagator.agent.join import Renewal
from berth.controllers.propagator.kube import Probe
from berth.store import decode, keys
from berth.store.documents import Capacity, Reachability
from berth.store.documents.work import Heartbeat
from berth_testkit.memory import MemoryStore

CID = "default/a"
CONFIG = AgentConfig(probe_interval=0.01, probe_timeout=7.0, capacity_interval=0.01)


def beat(store: MemoryStore, said: list[Reachability], waits: list[float]) -> Beat:
    def capacity(wait: float) -> Capacity:
        waits.append(wait)
        return Capacity({"cpu": 1000}, {}, 1, {})

    return Beat(store, CONFIG, CID, "agent-1", probe=lambda: Probe(said[-1]),
                capacity=capacity, held=lambda: "", renewal=Renewal(store, None, None))


def test_turning_online_waits_for_the_capacity_and_staying_online_does_not() -> None:
    store = MemoryStore()
    store.create(keys.heartbeat_key(CID), heartbeat_body(CID, "agent-1", time.time()))
    said = [Reachability.ONLINE]
    waits: list[float] = []
    first = beat(store, said, waits)
    first._step()
    first._step()
    kv = store.get(keys.heartbeat_key(CID))
    assert kv is not None
    state = decode(kv.value, Heartbeat, kv.key).status
    assert state.state == Reachability.ONLINE and state.capacity is not None
    assert waits == [7.0, 0.0]  # the first ONLINE waited; still ONLINE, no wait
    said.append(Reachability.UNHEALTHY)
    first._step()
    said.append(Reachability.ONLINE)
    first._step()
    assert waits == [7.0, 0.0, 7.0]  # unhealthy asks nothing; back ONLINE waits again
    restarted = beat(store, said, waits)  # a new process: nothing said yet
    restarted._step()
    assert waits[-1] == 7.0
