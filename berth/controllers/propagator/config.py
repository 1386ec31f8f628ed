"""The propagator's configuration file (YAML), with safe defaults."""

from __future__ import annotations

import msgspec

from berth.controllers.runtime.config import dump_yaml, load_yaml


class PropagatorConfig(msgspec.Struct, forbid_unknown_fields=True):
    probe_interval: float = 10.0  # seconds between probes of each cluster
    probe_timeout: float = 5.0  # seconds for one request to a cluster
    probe_concurrency: int = 8  # clusters probed at once
    grace: int = 3  # failed probes in a row before a cluster changes state
    capacity: bool = True  # watch each cluster's Nodes and Pods and report its capacity
    capacity_interval: float = 2.0  # at most this often, a changed capacity is written
    request_timeout: float = 10.0  # seconds for one apply, delete or get
    workers: int = 16  # applications reconciled at once (mostly waiting on the network)
    resync_interval: float = 300.0  # seconds between re-applying everything (drift)
    drift_watch: bool = True  # also watch applied objects and re-apply on change
    drift_watch_timeout: int = 300  # seconds a watch request stays open before renewal
    retry_base_delay: float = 0.5  # first retry of a failed application; doubles
    retry_max_delay: float = 60.0
    watch_idle_timeout: float = 30.0  # etcd watch without news before it is reopened
    # Seconds a copy has to become available after it was applied: past it, a move
    # keeps the old copy, the application is DEGRADED and the new cluster failed.
    move_timeout: float = 600.0
    # Seconds after which an object of a kind berth cannot judge counts as available.
    untracked_after: float = 60.0
    ledger: bool = True  # record copies' health and rollout steps (docs/ledger.md)
    events: bool = True  # say what happens as events (docs/events.md)
    event_ttl: float = 3600.0  # seconds an event outlives its last occurrence

    def __post_init__(self) -> None:
        for name in ("probe_interval", "probe_timeout", "request_timeout", "resync_interval",
                     "capacity_interval", "move_timeout",
                     "retry_base_delay", "retry_max_delay", "watch_idle_timeout"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive")
        if self.untracked_after < 0:
            raise ValueError("untracked_after must not be negative")
        for name in ("probe_concurrency", "grace", "workers", "drift_watch_timeout"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")


def load_config(path: str | None) -> PropagatorConfig:
    return load_yaml(path, PropagatorConfig)


def dump_config(config: PropagatorConfig) -> str:
    return dump_yaml(config)
