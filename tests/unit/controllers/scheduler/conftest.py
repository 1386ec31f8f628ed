"""What the scheduler's unit tests share: etcd in memory and a clock the test moves."""

from __future__ import annotations

import pytest

from berth_testkit.memory import FakeClock, MemoryStore


@pytest.fixture
def store() -> MemoryStore:
    return MemoryStore()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()
