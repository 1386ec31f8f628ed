"""The agent's configuration file (YAML), with safe defaults."""

from __future__ import annotations

import msgspec

from berth.controllers.runtime.config import dump_yaml, load_yaml


class AgentConfig(msgspec.Struct, forbid_unknown_fields=True):
    probe_interval: float = 10.0  # seconds between probes of the cluster (the heartbeat's)
    probe_timeout: float = 5.0  # seconds for one request to the cluster
    capacity: bool = True  # watch the cluster's Nodes and Pods; report its capacity
    capacity_interval: float = 2.0  # at most this often, a changed capacity is reported
    request_timeout: float = 10.0  # seconds for one apply, delete or get
    workers: int = 8  # works carried out at once (mostly waiting on the API server)
    resync_interval: float = 300.0  # seconds between applying every work again (drift)
    drift_watch_timeout: int = 300  # seconds a watch request stays open before renewal
    retry_base_delay: float = 0.5  # first retry of a work that failed; doubles
    retry_max_delay: float = 60.0
    watch_idle_timeout: float = 30.0  # etcd watch without news before it is reopened
    untracked_after: float = 60.0  # seconds after which an unjudgeable kind counts available
    # Removals are bounded (docs/agents.md "Coming back"): within ``delete_window``
    # seconds, at most ``delete_share`` of the applications on the cluster (and never
    # fewer than ``delete_least``) are removed; the rest wait, and the agent says so.
    delete_share: float = 0.25
    delete_least: int = 5
    delete_window: float = 300.0
    renew_check_interval: float = 30.0  # seconds between looks at the credential's expiry

    def __post_init__(self) -> None:
        for name in ("probe_interval", "probe_timeout", "request_timeout", "resync_interval",
                     "capacity_interval", "retry_base_delay", "retry_max_delay",
                     "watch_idle_timeout", "delete_window", "renew_check_interval"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive")
        if self.untracked_after < 0:
            raise ValueError("untracked_after must not be negative")
        if not 0 < self.delete_share <= 1:
            raise ValueError("delete_share must be in (0, 1]")
        for name in ("workers", "drift_watch_timeout", "delete_least"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")


def load_config(path: str | None) -> AgentConfig:
    return load_yaml(path, AgentConfig)


def dump_config(config: AgentConfig) -> str:
    return dump_yaml(config)
