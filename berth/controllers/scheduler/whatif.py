"""What the scheduler would decide for an application, binding nothing.

:func:`what_if` reads the same world the scheduler reads (its cache, synced
from etcd once) and calls the scheduler's own :func:`~controllers.scheduler.
decide.decide` with the scheduler's framework and configuration, so its answer
is the scheduler's — there is no second implementation. An application that
exists is decided as the scheduler would decide it again (from where its
Binding says it runs: stickiness counts); one that does not is decided as
new. Every candidate gets a verdict: chosen, fits (with its score breakdown),
or rejected (the plugin and reason); a label or metric constraint that
rejects names the candidate's actual value, which is what would have to
change for it to fit.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import msgspec

from berth.controllers.scheduler.cache import Cache
from berth.controllers.scheduler.config import SchedulerConfig
from berth.controllers.scheduler.decide import Decision, Deferral, Deferred, decide
from berth.controllers.scheduler.framework import Framework
from berth.controllers.scheduler.framework.types import Candidate, Snapshot
from berth.controllers.scheduler.scheduler import framework_for
from berth.controllers.scheduler.views import AppView, subject_from_application
from berth.store import Store, keys
from berth.store.codec import typed
from berth.store.constraints import ConstraintError, LabelConstraint, MetricConstraint

_QUOTED = re.compile(r"constraint '([^']*)'")


@dataclass(slots=True)
class Verdict:
    """One candidate's answer."""

    candidate: str  # "Cluster/ns/name"
    verdict: str  # chosen, fits, rejected
    score: float | None = None
    scores: dict[str, float] = field(default_factory=dict)
    rejected_by: str = ""
    reason: str = ""
    actual: str = ""  # for a constraint that rejects: the candidate's value


@dataclass(slots=True)
class Answer:
    """What the scheduler would decide for one application."""

    application: str  # "ns/name"
    exists: bool
    state: str  # Scheduled or Unschedulable
    targets: list[str]
    reason: str
    verdicts: list[Verdict]
    replicas: dict[str, int] = field(default_factory=dict)  # a divided application's shares

    def to_dict(self) -> dict[str, Any]:
        return msgspec.to_builtins(self)  # type: ignore[no-any-return]


def what_if(store: Store, config: SchedulerConfig, documents: list[dict[str, Any]], *,
            sync_timeout: float = 30.0) -> list[Answer]:
    """Decide each application document as the scheduler would now; write nothing."""
    cache = Cache(store)
    cache.start()
    try:
        if not cache.wait_synced(sync_timeout):
            raise TimeoutError(f"the scheduler's view of etcd did not sync in {sync_timeout} s")
        framework = framework_for(config)
        defer = Deferral(config.deferral_margin, config.deferral_min_saving)
        return [_answer(cache, framework, defer, doc) for doc in documents]
    finally:
        cache.stop()


def _answer(cache: Cache, framework: Framework, defer: Deferral, doc: dict[str, Any]
            ) -> Answer:
    view = typed(msgspec.json.encode(doc), AppView)  # the manifest as raw JSON
    ns = view.metadata.namespace or "default"
    key = keys.resource_key("Application", view.metadata.name, ns)
    subject = subject_from_application(key, view)
    binding, _ = cache.binding(subject)
    exists = cache.applications.get(key) is not None
    if not exists:
        binding = None  # a Binding left by a deleted application is not its
    current = list(binding.spec.targets) if binding is not None else []
    keep = (subject.placement.ignored_during_execution and binding is not None
            and binding.spec.generation == subject.generation)
    outcome = decide(framework, subject, cache, current, keep_current=keep,
                     defer=defer)
    evaluation = outcome.evaluation
    verdicts: list[Verdict] = []
    if evaluation is not None:
        chosen = ({r.candidate.key for r in outcome.chosen}
                  if isinstance(outcome, Decision) else set())
        for r in evaluation.ranked:
            verdicts.append(Verdict(r.candidate.key, "chosen" if r.candidate.key in chosen
                                    else "fits", round(r.score, 6),
                                    {k: round(v, 6) for k, v in r.scores.items() if v}))
        by_key = {c.key: c for c in evaluation.fleet.candidates}
        for status, bits in evaluation.groups():
            for ckey in evaluation.fleet.first_keys(bits, bits.bit_count()):
                verdicts.append(Verdict(ckey, "rejected", rejected_by=status.plugin or "",
                                        reason=status.reason,
                                        actual=_actual(cache, by_key.get(ckey),
                                                       status.reason)))
    if isinstance(outcome, Decision):
        return Answer(f"{ns}/{view.metadata.name}", exists, "Scheduled",
                      [t.name for t in outcome.targets], outcome.reason, verdicts,
                      {t.name: t.replicas for t in outcome.targets if t.replicas is not None})
    if isinstance(outcome, Deferred):
        assert outcome.plan.at is not None
        return Answer(f"{ns}/{view.metadata.name}", exists, "Pending",
                      [outcome.plan.at.candidate.ref.name], outcome.reason, verdicts)
    return Answer(f"{ns}/{view.metadata.name}", exists, "Unschedulable", [], outcome.reason,
                  verdicts)


def _actual(snapshot: Snapshot, candidate: Candidate | None, reason: str) -> str:
    """For a label or metric constraint that rejects: the candidate's value."""
    found = _QUOTED.search(reason)
    if candidate is None or found is None:
        return ""
    text = found.group(1)
    if reason.startswith("label constraint"):
        try:
            label = LabelConstraint.parse(text).label
        except ConstraintError:
            return ""
        value = candidate.labels.get(label)
        return f"{label}={value}" if value is not None else f"no label {label}"
    if reason.startswith("metric constraint"):
        try:
            name = MetricConstraint.parse(text).metric
        except ConstraintError:
            return ""
        ref = next((m for m in candidate.metrics if m.name == name), None)
        if ref is None:
            return f"no metric {name}"
        reading = snapshot.metric(candidate, ref)
        return f"{name}={reading.value:g}" if reading.value is not None else \
            f"{name}: {reading.reason or 'no value'}"
    return ""
