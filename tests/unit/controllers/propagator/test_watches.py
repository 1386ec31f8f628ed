"""A watch waiting for its cluster to come back, on the watches' own loop, against an
answer the test gives: no server. (The real-server twin: the robustness run, seed 29,
and tests/integration/test_drift_watch.py.)"""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace
from typing import Any

from berth.controllers.propagator.watches import ClusterWatches, Hub


def test_a_watch_waiting_for_its_cluster_asks_at_once_when_told_it_is_back() -> None:
    """Backed off to 30 s, it asks as soon as the observer says the cluster is back —
    not up to 30 s later (a Job's completion went unseen so, and the Job ran again)."""
    hub = Hub("test-watches").start()
    try:
        watches = ClusterWatches(hub, "server", SimpleNamespace())  # type: ignore[arg-type]
        asked: list[float] = []

        async def answer(path: str, timeout: float | None = None, **_: Any) -> Any:
            asked.append(time.monotonic())
            return SimpleNamespace(status_code=200)

        watches.get = answer  # type: ignore[method-assign]
        began = time.monotonic()
        waiting = asyncio.run_coroutine_threadsafe(watches.until_back(30.0, 1.0), hub.loop)
        time.sleep(0.3)
        assert not waiting.done() and asked == []  # backing off: nothing asked yet
        watches.back()
        waiting.result(timeout=5.0)
        assert len(asked) == 1 and asked[0] - began < 2.0
        # told again while nobody waits: the next wait asks at once, then backs off again
        watches.back()
        again = asyncio.run_coroutine_threadsafe(watches.until_back(30.0, 1.0), hub.loop)
        again.result(timeout=5.0)
        assert len(asked) == 2
    finally:
        hub.stop()
