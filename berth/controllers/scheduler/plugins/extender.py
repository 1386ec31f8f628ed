"""Extender: an out-of-process plugin over HTTP JSON (the Kubernetes scheduler and its framework).

Declared in the configuration (``extenders:``), each with a URL, the verbs it
serves, a weight, a timeout and ``ignorable``. One request per attempt and
verb, carrying the subject and the candidates still in the running:

* filter ``POST <url>/<filterVerb>`` ``{"subject": {...}, "candidates": [{"key",
  "kind", "namespace", "name", "labels"}]}`` → ``{"feasible": [key, ...],
  "failed": {key: reason}}``; candidates not named as feasible are rejected.
* prioritize ``POST <url>/<prioritizeVerb>`` (same body) → ``{"scores": {key:
  0..10}}``, scaled to [0, 1] and weighted.
* bind ``POST <url>/<bindVerb>`` ``{"subject": {...}, "targets": [...]}`` →
  ``{"error": ""}``, called before the Binding is written: a non-empty error
  vetoes it. (berth always writes the Binding itself: it is the contract the
  propagator reads.)

An extender that fails (unreachable, timeout, an answer that is not the
expected JSON) is skipped when ``ignorable``; otherwise its filter rejects
every candidate with a reason naming it, and its bind fails the attempt.
"""

from __future__ import annotations

import logging
from typing import Any

import msgspec
import requests

from berth.controllers.runtime import http
from berth.controllers.scheduler.framework import (
    SUCCESS,
    Candidate,
    CycleState,
    Plugin,
    Snapshot,
    Status,
    Subject,
    error,
    unschedulable,
)
from berth.controllers.scheduler.framework import plugin as points
from berth.controllers.scheduler.framework.profile import ExtenderSpec
from berth.store.codec import typed
from berth.store.documents import Target

log = logging.getLogger(__name__)


class FilterReply(msgspec.Struct):
    feasible: list[str] = []
    failed: dict[str, str] = {}
    error: str = ""


class ScoreReply(msgspec.Struct):
    scores: dict[str, float] = {}
    error: str = ""


class BindReply(msgspec.Struct):
    error: str = ""


class ExtenderFailed(Exception):
    pass


def _subject(subject: Subject) -> dict[str, Any]:
    return {"kind": subject.ref.kind, "namespace": subject.ref.namespace,
            "name": subject.ref.name, "labels": dict(subject.labels),
            "generation": subject.generation}


def _candidate(c: Candidate) -> dict[str, Any]:
    return {"key": c.key, "kind": c.ref.kind, "namespace": c.ref.namespace,
            "name": c.ref.name, "labels": dict(c.labels)}


class Extender(Plugin, points.Score, points.ScoreAll, points.FilterAll, points.PreBind):
    def __init__(self, config: ExtenderSpec, index: int) -> None:
        super().__init__({})
        self.config = config
        self.name = f"Extender[{index}]"  # type: ignore[misc]
        self.session = http.session()

    def _call(self, verb: str, body: dict[str, Any], reply: type[Any]) -> Any:
        url = f"{self.config.url.rstrip('/')}/{verb}"
        try:
            resp = self.session.post(url, data=msgspec.json.encode(body),
                                     headers={"Content-Type": "application/json"},
                                     timeout=self.config.timeout)
            resp.raise_for_status()
            answer = typed(resp.content, reply)
        except (requests.RequestException, msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise ExtenderFailed(f"{url}: {exc}") from None
        if answer.error:
            raise ExtenderFailed(f"{url}: {answer.error}")
        return answer

    def filter_all(self, state: CycleState, subject: Subject, candidates: list[Candidate],
                   snapshot: Snapshot) -> dict[str, Status]:
        """Rejections by candidate key (an empty dict: all feasible)."""
        if not self.config.filter_verb or not candidates:
            return {}
        body = {"subject": _subject(subject), "candidates": [_candidate(c) for c in candidates]}
        try:
            reply: FilterReply = self._call(self.config.filter_verb, body, FilterReply)
        except ExtenderFailed as exc:
            if self.config.ignorable:
                log.warning("%s (ignorable): %s", self.name, exc)
                return {}
            return {c.key: unschedulable(f"extender failed: {exc}") for c in candidates}
        keep = set(reply.feasible)
        return {c.key: unschedulable(reply.failed.get(c.key, "rejected by extender"))
                for c in candidates if c.key not in keep}

    def score_all(self, state: CycleState, subject: Subject, candidates: list[Candidate],
                  snapshot: Snapshot) -> dict[str, float]:
        if not self.config.prioritize_verb or not candidates:
            return {}
        body = {"subject": _subject(subject), "candidates": [_candidate(c) for c in candidates]}
        try:
            reply: ScoreReply = self._call(self.config.prioritize_verb, body, ScoreReply)
        except ExtenderFailed as exc:
            log.warning("%s: %s; its scores are left out", self.name, exc)
            return {}
        return {k: min(10.0, max(0.0, v)) / 10.0 for k, v in reply.scores.items()}

    def score(self, state: CycleState, subject: Subject, candidate: Candidate,
              snapshot: Snapshot) -> float:
        return 0.0  # scored in bulk by score_all

    def pre_bind(self, state: CycleState, subject: Subject, targets: list[Target]) -> Status:
        if not self.config.bind_verb:
            return SUCCESS
        body = {"subject": _subject(subject), "targets": [msgspec.to_builtins(t) for t in targets]}
        try:
            self._call(self.config.bind_verb, body, BindReply)
        except ExtenderFailed as exc:
            if self.config.ignorable:
                log.warning("%s (ignorable): %s", self.name, exc)
                return SUCCESS
            return error(f"extender bind failed: {exc}")
        return SUCCESS
