"""The robustness run's traffic: a steady, seeded stream of what users and the world do.

Applications are made, given new generations, relabelled into forced moves, deleted;
metric values change (optional moves); an Override is changed. Each application has
one of a few shapes — a ConfigMap placed PickOne under a label constraint, PickN(2),
PickAll, a Deployment whose Pods run (All, Rolling or Staged rollouts; now and then a
generation whose Pods never become Ready on the first stage's cluster, so that the
rollout halts — or, for every other application, rolls back), a Job, a "thief" whose
ConfigMap has the name of one berth did not make, a "web" Deployment that depends on
a live ConfigMap application (docs/order.md "Dependencies": placed with it, deleted
with it) — and the model keeps what each should be, so the run's end can be checked
against it.

A team (namespace ``team-r``, docs/teams.md) shares the fleet: its policy binds a
set of clusters a and c, allows ConfigMaps in Kubernetes namespace ``default``
alone and a quota of four applications; every third operation is one of its own
(made, changed, deleted) — now and then an application that also holds a
ServiceAccount, which the policy forbids — from a stream of its own, so the
default namespace's operations are the same with or without it.

Every choice comes from the run's seeded ``random.Random``: the same seed makes the
same operations in the same order (their timing follows the machine).
"""

from __future__ import annotations

import random
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import msgspec

from berth.bootstrap.load import to_document
from berth.bootstrap.write import plan, write
from berth.store import Put, encode, keys
from berth_testkit.servers.kube import CRASH_ON
from tests.faults.system import System

# Cluster a is z1/gold, b (Pull) z2/gold, c z2/silver; a relabel moves c between zones.
RULES: list[tuple[list[str], str]] = [
    ([], ""),
    (["tier is gold"], "tier=gold"),
    (["zone is z2"], "zone=z2"),
    (["zone is z1"], "zone=z1"),
    (["tier is silver"], "tier=silver"),
]
SHAPES = ["cm", "cm", "cm", "pickn", "all", "deploy", "deploy", "job", "thief", "web"]
FOREIGN = "foreign"  # a ConfigMap on every cluster that berth did not make: a thief names it
STRATEGIES = ["All", "Rolling", "Staged"]
OVERRIDE = "robust"  # the one Override the traffic changes: a label on selected objects
MAX_LIVE = 60
# The team: its namespace, the set its policy binds (clusters of namespace default), its
# quota of applications, and how many it keeps live at most (more than its quota).
TEAM, TEAM_SET, TEAM_QUOTA, TEAM_MAX = "team-r", "robust-team", 4, 7
TEAM_CLUSTERS = frozenset({"a", "c"})
TEAM_KINDS = ("ConfigMap",)  # what its policy allows its manifests to hold


@dataclass
class App:
    """What one application should be."""

    name: str
    shape: str
    rule: int
    strategy: str = "All"
    generation: int = 1
    overridden: bool = False  # selected by the Override (label robust=yes)
    bad: bool = False  # its latest generation's Pods never become Ready on cluster a
    rollback: bool = False  # a Staged rollout that fails rolls back (else it halts)
    namespace: str = "default"  # berth's (its objects are in Kubernetes' default)
    depends_on: str = ""  # a web tier's: the ConfigMap application it depends on

    @property
    def policy(self) -> dict[str, Any]:
        if self.shape == "pickn":
            return {"policy": "PickN", "numberOfClusters": 2}
        if self.shape == "all" or (self.shape == "deploy" and self.strategy != "All"):
            return {"policy": "PickAll"}
        return {}

    def allowed(self, labels: dict[str, dict[str, str]]) -> set[str]:
        """The clusters its constraint allows under ``labels``."""
        want = RULES[self.rule][1]
        if not want:
            return set(labels)
        key, _, value = want.partition("=")
        return {c for c, ls in labels.items() if ls.get(key) == value}

    def expected(self, labels: dict[str, dict[str, str]]) -> tuple[int, set[str]]:
        """How many targets it should have, and the set they must be part of (all of it
        for PickAll)."""
        allowed = self.allowed(labels)
        p = self.policy.get("policy", "PickOne")
        if p == "PickAll":
            return len(allowed), allowed
        if p == "PickN":
            return min(2, len(allowed)), allowed
        return min(1, len(allowed)), allowed

    @property
    def kind(self) -> str:
        """The kind of its one object."""
        return {"deploy": "Deployment", "web": "Deployment", "job": "Job"}.get(self.shape,
                                                                                 "ConfigMap")

    def manifest(self) -> list[dict[str, Any]]:
        meta = {"name": self.name, "namespace": "default"}
        if self.shape in ("deploy", "web"):
            return [{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta,
                     "spec": {"replicas": 2, "selector": {"matchLabels": {"app": self.name}},
                              "template": {"metadata": {"labels": {"app": self.name}, **(
                                  {"annotations": {CRASH_ON + "fault-a": "yes"}}
                                  if self.bad else {})},
                                           "spec": {"containers": [{
                                               "name": "c", "image": f"x:{self.generation}",
                                               "resources": {"requests": {"cpu": "10m"}}}]}}}}]
        if self.shape == "job":
            return [{"apiVersion": "batch/v1", "kind": "Job", "metadata": meta,
                     "spec": {"ttlSecondsAfterFinished": 600, "template": {"spec": {
                         "restartPolicy": "Never",
                         "containers": [{"name": "c", "image": f"x:{self.generation}"}]}}}}]
        if self.shape == "thief":  # another's object by name: refused, never taken
            meta = {"name": FOREIGN, "namespace": "default"}
        made: list[dict[str, Any]] = [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta,
                                       "data": {"generation": str(self.generation)}}]
        if self.shape == "grab":  # a team's, with a kind its policy forbids: never made
            made.append({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta})
        return made

    def document(self, *, deleted: bool = False) -> bytes:
        spec: dict[str, Any] = {"manifest": self.manifest()}
        if RULES[self.rule][0]:
            spec["constraints"] = {"cluster": {"labels": RULES[self.rule][0]}}
        if self.policy:
            spec["placement"] = self.policy
        if self.depends_on:
            spec["dependsOn"] = [{"name": self.depends_on}]
        if self.shape == "deploy" and self.strategy != "All":
            rollout: dict[str, Any] = {"strategy": self.strategy, "progressDeadline": "60s"}
            if self.strategy == "Staged":
                rollout["stages"] = [{"name": "first", "clusters": {"names": ["a"]}},
                                     {"name": "then", "clusters": {}}]
                if self.rollback:
                    rollout["onFailure"] = "Rollback"
            spec["rollout"] = rollout
        metadata: dict[str, Any] = {"name": self.name, "namespace": self.namespace,
                                    "generation": self.generation}
        if self.overridden:
            metadata["labels"] = {"robust": "yes"}
        if deleted:
            metadata["deleted"] = "2026-01-01T00:00:00Z"
        return encode({"api": "kubernetes", "kind": "Application", "metadata": metadata,
                       "spec": spec})


@dataclass
class Traffic:
    """The seeded stream; :meth:`step` makes one operation."""

    system: System
    rng: random.Random
    apps: dict[str, App] = field(default_factory=dict)
    deleted: dict[str, App] = field(default_factory=dict)
    ops: Counter[str] = field(default_factory=Counter)
    labels: dict[str, dict[str, str]] = field(default_factory=lambda: {
        "a": {"zone": "z1", "tier": "gold"}, "b": {"zone": "z2", "tier": "gold"},
        "c": {"zone": "z2", "tier": "silver"}})
    override_rev: int = 0
    made: int = 0
    deleted_at: dict[str, float] = field(default_factory=dict)  # time.monotonic()
    prices: dict[str, float] = field(default_factory=lambda: {"price_a": 2, "price_b": 2})
    team_rng: random.Random | None = None  # the team's own stream (None: no team)
    team: dict[str, App] = field(default_factory=dict)
    team_deleted: dict[str, App] = field(default_factory=dict)
    steps: int = 0

    def step(self) -> str:
        """One operation, chosen by the seed (and, every third, one of the team's); what
        it was."""
        live = list(self.apps)
        weights = {"create": 6 if len(live) < MAX_LIVE else 0, "update": 5 if live else 0,
                   "metric": 2, "relabel": 1, "override": 1, "delete": 2 if live else 0}
        kinds = [k for k, w in weights.items() for _ in range(w)]
        op = self.rng.choice(kinds)
        getattr(self, "_" + op)(live)
        self.ops[op] += 1
        self.steps += 1
        if self.team_rng is not None and self.steps % 3 == 0:
            self.ops[self._team(self.team_rng)] += 1
        return op

    def tenancy(self) -> list[Put]:
        """The team's cluster set and policy, written before the traffic begins."""
        return [Put(keys.resource_key("ClusterSet", TEAM_SET), encode({
                    "api": "core", "kind": "ClusterSet", "metadata": {"name": TEAM_SET},
                    "spec": {"namespaces": ["default"],
                             "clusters": {"names": sorted(TEAM_CLUSTERS)}}}), None),
                Put(keys.resource_key("NamespacePolicy", TEAM), encode({
                    "api": "core", "kind": "NamespacePolicy", "metadata": {"name": TEAM},
                    "spec": {"clusterSets": [TEAM_SET], "kinds": list(TEAM_KINDS),
                             "targetNamespaces": ["default"],
                             "quota": {"applications": TEAM_QUOTA}}}), None)]

    def _team(self, rng: random.Random) -> str:
        """One of the team's operations: what it was."""
        live = list(self.team)
        weights = {"create": 3 if len(live) < TEAM_MAX else 0, "update": 2 if live else 0,
                   "delete": 2 if live else 0}
        op = rng.choice([k for k, w in weights.items() for _ in range(w)])
        if op == "create":
            shape = "grab" if rng.random() < 0.2 else "cm"
            made = len(self.team) + len(self.team_deleted)  # not self.made: its stream stays
            app = App(f"t-{shape}-{made:04d}", shape, 0, namespace=TEAM)
            self._apply(app)
            self.team[app.name] = app
        elif op == "update":
            app = self.team[rng.choice(live)]
            app.generation += 1
            try:
                self._apply(app)
            except BaseException:
                app.generation -= 1
                raise
        else:
            app = self.team.pop(rng.choice(live))
            self._write(keys.resource_key("Application", app.name, TEAM),
                        app.document(deleted=True))
            self.team_deleted[app.name] = app
        return f"team {op}"

    def _apply(self, app: App) -> None:
        """Write the application as ``berth apply --force`` does: its generation and,
        in the same transaction, its manifest added to its history (which a rollout
        holds clusters back on and rolls back to)."""
        db = self.system.db
        write(db, plan(db, [to_document(app.name, msgspec.json.decode(app.document()))],
                       force=True))

    def _write(self, key: str, value: bytes) -> None:
        """Write ``value`` at ``key`` whatever it holds (as a user's apply); the model
        changes only once it is written."""
        self.system._commit([Put(key, value, None)])

    def _create(self, _live: list[str]) -> None:
        shape = self.rng.choice(SHAPES)
        name = f"r-{shape}-{self.made:04d}"
        self.made += 1
        rule = self.rng.randrange(len(RULES)) if shape in ("cm", "job", "thief") else self.rng.choice(
            [0, 1, 2])
        app = App(name, shape, rule, strategy=self.rng.choice(STRATEGIES),
                  overridden=self.rng.random() < 0.3,
                  rollback=self.made % 2 == 0)  # not a draw: the seed's stream stays
        if shape == "web":  # on a live ConfigMap application, placed where it is
            bases = sorted(n for n, a in self.apps.items() if a.shape == "cm")
            if bases:
                app.rule, app.depends_on = 0, self.rng.choice(bases)
            else:
                app.shape = "cm"
        self._apply(app)
        self.apps[name] = app

    def _update(self, live: list[str]) -> None:
        app = self.apps[self.rng.choice(live)]
        if app.shape == "job" and self.rng.random() < 0.7:  # a Job runs again: rarely
            return self._metric(live)
        was = app.bad
        app.generation += 1
        # a Staged rollout whose first stage (a) is among its targets: now and then a
        # generation that cannot become available there, so that the rollout halts (or
        # rolls back)
        app.bad = (app.shape == "deploy" and app.strategy == "Staged" and app.rule in (0, 1)
                   and self.rng.random() < 0.25)
        try:
            self._apply(app)
        except BaseException:
            app.generation -= 1
            app.bad = was
            raise

    def _metric(self, _live: list[str]) -> None:
        from berth_testkit.servers.kafka import produce

        which = self.rng.choice(["price_a", "price_b", "wind_c"])
        value = round(self.rng.uniform(0.5, 4.5), 2)
        if which == "wind_c":
            produce(self.system.kafka.bootstrap, "energy", [("wind_c", str(value).encode())])
        else:  # the Pushgateway's group is replaced whole: both prices, always
            self.prices[which] = value
            self.system.prometheus.push(**self.prices)

    def _relabel(self, _live: list[str]) -> None:
        """Cluster c between zones z2 and z1: the zone rules' applications there must
        move (forced), others may now go there."""
        c = dict(self.labels["c"], zone="z1" if self.labels["c"]["zone"] == "z2" else "z2")
        key = keys.resource_key("Cluster", "c", "default")
        doc = self.system.db.get(key)
        assert doc is not None
        body = msgspec.json.decode(doc.value)
        body["metadata"]["labels"] = c
        self._write(key, encode(body))
        self.labels["c"] = c

    def _override(self, _live: list[str]) -> None:
        rev = self.override_rev + 1
        self._write(keys.resource_key("Override", OVERRIDE, "default"), encode({
            "api": "core", "kind": "Override",
            "metadata": {"name": OVERRIDE, "namespace": "default", "generation": rev},
            "spec": {"applications": {"matchLabels": {"robust": "yes"}}, "clusters": {},
                     "rules": [{"labels": {"set": {
                         "robust-rev": str(rev), "robust-cluster": "${cluster.name}"}}}]}}))
        self.override_rev = rev

    def _delete(self, live: list[str]) -> None:
        """An application deleted, with the web tiers that depend on it (before it: its
        removal from a cluster waits for theirs)."""
        app = self.apps[self.rng.choice(live)]
        for gone in [*(a for a in self.apps.values() if a.depends_on == app.name), app]:
            self._write(keys.resource_key("Application", gone.name, "default"),
                        gone.document(deleted=True))
            del self.apps[gone.name]
            self.deleted[gone.name] = gone
            self.deleted_at[gone.name] = time.monotonic()


__all__ = ["FOREIGN", "RULES", "TEAM", "TEAM_CLUSTERS", "TEAM_KINDS", "TEAM_QUOTA", "App",
           "Traffic"]
