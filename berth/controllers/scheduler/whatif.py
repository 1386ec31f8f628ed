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

The documents may be anything ``apply`` takes: a cluster relabelled or
cordoned, a metric added, applications. They are laid over the synced view
(never written), and every stored application is decided without and with
them: those whose placement differs are the file's consequences ("which
applications move if I cordon this cluster").
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
from berth.controllers.scheduler.framework.helpers.metric_columns import metric_of
from berth.controllers.scheduler.framework.snapshot import Snapshot
from berth.controllers.scheduler.framework.types import Candidate, Subject, candidate_key
from berth.controllers.scheduler.scheduler import framework_for
from berth.controllers.scheduler.subjects import subject_from_application
from berth.controllers.scheduler.views import AppView
from berth.store import Store, keys
from berth.store.codec import typed
from berth.store.constraints import ConstraintError, LabelConstraint, MetricConstraint
from berth.store.documents import BindingState

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
    state: BindingState  # what its Binding would say
    targets: list[str]
    reason: str
    verdicts: list[Verdict]
    replicas: dict[str, int] = field(default_factory=dict)  # a divided application's shares

    def to_dict(self) -> dict[str, Any]:
        return msgspec.to_builtins(self)  # type: ignore[no-any-return]


@dataclass(slots=True)
class Consequence:
    """A stored application whose placement the file would change."""

    application: str  # "ns/name"
    now: list[str]  # where it would be decided to run without the file
    then: list[str]  # and with it ([] : nowhere)
    reason: str  # the decision's reason with the file


@dataclass(slots=True)
class WhatIf:
    """The file's applications decided, and the stored ones it would move."""

    answers: list[Answer]
    consequences: list[Consequence]

    def to_dict(self) -> dict[str, Any]:
        return msgspec.to_builtins(self)  # type: ignore[no-any-return]


def what_if(store: Store, config: SchedulerConfig, documents: list[tuple[keys.Key, dict[str, Any]]],
            *, sync_timeout: float = 30.0, consequences: bool = True) -> WhatIf:
    """Decide as the scheduler would if the documents (``(key, document)``, anything
    ``apply`` takes) were stored: each of their applications, and (``consequences``)
    every stored application again, to list those whose placement would change because
    of them (decided twice on one frozen view, without and with the documents, so that
    only their consequences show). Nothing is written."""
    cache = Cache(store)
    cache.start()
    try:
        if not cache.wait_synced(sync_timeout):
            raise TimeoutError(f"the scheduler's view of etcd did not sync in {sync_timeout} s")
    finally:
        cache.stop()  # a frozen view from here on: the overlay is the only change
    framework = framework_for(config)
    defer = Deferral(config.deferral_margin, config.deferral_min_saving)
    mine = {key for key, _ in documents if key.startswith(APPLICATIONS)}
    stored = [item.obj for item in cache.applications.items() if item.key not in mine
              and not item.obj.deleted] if consequences else []
    before = {s.key: _decided(cache, framework, defer, s) for s in stored}
    existing = {key for key in mine if cache.applications.get(key) is not None}
    for key, doc in documents:
        cache.overlay(key, msgspec.json.encode(doc))
    answers = [_answer(cache, framework, defer, doc, key in existing)
               for key, doc in documents if key.startswith(APPLICATIONS)]
    changed = []
    for subject in stored:
        targets, reason = _decided(cache, framework, defer, subject)
        if targets != before[subject.key][0]:
            changed.append(Consequence(f"{subject.ref.namespace}/{subject.ref.name}",
                                       before[subject.key][0], targets, reason))
    return WhatIf(answers, changed)


APPLICATIONS = keys.resource_prefix("Application")


def leading_config(store: Store) -> tuple[SchedulerConfig, str]:
    """The configuration the leading scheduler runs with (it puts it in its lease key),
    and whose it is; the defaults when no scheduler leads or its value is unreadable —
    deciding with another configuration than the scheduler's would answer another
    question (a deferral margin, a plugin's arguments)."""
    kv = store.get(keys.lease_key("scheduler"))
    if kv is None:
        return SchedulerConfig(), "the default configuration (no scheduler leads)"
    try:
        held = msgspec.json.decode(kv.value)
        config = msgspec.convert(held["config"], SchedulerConfig)
        return config, f"the leading scheduler's configuration ({held.get('holder', '?')})"
    except (msgspec.DecodeError, msgspec.ValidationError, KeyError, TypeError,
            ValueError) as exc:
        return SchedulerConfig(), ("the default configuration (the leading scheduler's "
                                   f"is unreadable: {exc})")


def _decided(cache: Cache, framework: Framework, defer: Deferral, subject: Subject
             ) -> tuple[list[str], str]:
    """Where a stored application would run if decided now, from where it runs."""
    binding, _ = cache.binding(subject)
    current = list(binding.spec.targets) if binding is not None else []
    keep = cache.keeps(subject, binding.spec.generation if binding is not None else None)
    outcome = decide(framework, subject, cache, current, keep_current=keep, defer=defer)
    if isinstance(outcome, Decision):
        return [t.name + (f" ({t.replicas})" if t.replicas is not None else "")
                for t in outcome.targets], outcome.reason
    return [], outcome.reason


def _answer(cache: Cache, framework: Framework, defer: Deferral, doc: dict[str, Any],
            exists: bool) -> Answer:
    view = typed(msgspec.json.encode(doc), AppView)  # the manifest as raw JSON
    ns = view.metadata.namespace or "default"
    key = keys.resource_key("Application", view.metadata.name, ns)
    subject = subject_from_application(key, view)
    binding, _ = cache.binding(subject)
    if not exists:
        binding = None  # a Binding left by a deleted application is not its
    current = list(binding.spec.targets) if binding is not None else []
    keep = cache.keeps(subject, binding.spec.generation if binding is not None else None)
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
    verdicts += _outside(cache, ns)
    if isinstance(outcome, Decision):
        return Answer(f"{ns}/{view.metadata.name}", exists, BindingState.SCHEDULED,
                      [t.name for t in outcome.targets], outcome.reason, verdicts,
                      {t.name: t.replicas for t in outcome.targets if t.replicas is not None})
    if isinstance(outcome, Deferred):
        assert outcome.plan.at is not None
        return Answer(f"{ns}/{view.metadata.name}", exists, BindingState.PENDING,
                      [outcome.plan.at.candidate.ref.name], outcome.reason, verdicts)
    return Answer(f"{ns}/{view.metadata.name}", exists, BindingState.UNSCHEDULABLE, [],
                  outcome.reason, verdicts)


def _outside(cache: Cache, namespace: str) -> list[Verdict]:
    """Where a namespace with a policy may not place (docs/teams.md): the clusters of
    other namespaces, no candidates, named with the rule that keeps them out."""
    policy = cache.tenancy.policy(namespace)
    if policy is None:
        return []
    out = []
    for item in cache.clusters.items():
        meta = item.obj.metadata
        if not policy.admits(f"{meta.namespace}/{meta.name}", meta.labels):
            out.append(Verdict(candidate_key("Cluster", meta.namespace, meta.name), "rejected",
                               rejected_by="NamespacePolicy", reason=(
                                   f"not in a cluster set bound to namespace {namespace}")))
    return sorted(out, key=lambda v: v.candidate)


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
        judged = metric_of(candidate, name, snapshot)
        if judged is None:
            return f"no metric {name}"
        ref, read = judged
        reading = read or snapshot.metric(candidate, ref)
        shown = name if ref.name == name else f"{ref.name} (measures {name})"
        return f"{shown}={reading.value:g}" if reading.value is not None else \
            f"{shown}: {reading.reason or 'no value'}"
    return ""
