"""framework.enabled: a profile's plugins made once and bound to the Protocols they
implement, each point in the profile's order."""

from __future__ import annotations

import re

import pytest

from berth.controllers.scheduler.config import Extender, PluginSpec, SchedulerConfig
from berth.controllers.scheduler.framework import plugin as points
from berth.controllers.scheduler.framework.enabled import enable
from berth.controllers.scheduler.plugins import REGISTRY


def names(plugins: tuple[points.Named, ...]) -> list[str]:
    return [p.name for p in plugins]


def test_the_default_profile_is_bound_point_by_point_in_order() -> None:
    on = enable(SchedulerConfig(), REGISTRY, {"stickiness_weight": 0.3})
    config = SchedulerConfig()
    assert names(on.filters) == [s.name for s in config.plugins["filter"]]
    assert names(on.pre_filters) == [s.name for s in config.plugins["preFilter"]]
    assert [(p.name, w) for p, w in on.scores] == [
        (s.name, s.weight) for s in config.plugins["score"]]
    assert on.queue_sort is not None and on.queue_sort.name == "PrioritySort"
    assert names(on.permits) == ["Gang"] and names(on.rejecters) == ["Gang"]
    assert names(on.binds) == ["DefaultBinder"] and not on.batch_filters
    # one instance per plugin, whatever points enable it
    assert len({id(p) for p in on.filters if p.name == "Capacity"} | {
        id(p) for p, _ in on.scores if p.name == "Capacity"}) == 1
    # a shared argument reaches only the plugins that take it
    assert on.instances["MetricScore"].args == {"stickiness_weight": 0.3}
    assert on.instances["Capacity"].args == {}


def test_optional_forms_are_bound_by_what_each_plugin_implements() -> None:
    on = enable(SchedulerConfig(), REGISTRY)
    for forms, proto in ((on.filter_sets, points.FilterSet), (on.score_sets, points.ScoreSet),
                         (on.tiers, points.Tier), (on.adjusters, points.Adjust),
                         (on.normalizers, points.Normalize)):
        assert all(isinstance(p, proto) and p.name == n for n, p in forms.items())
    assert set(on.score_values) <= set(on.score_sets)
    assert not set(on.score_bases) & set(on.normalizers)  # a base must not normalize
    assert not set(on.score_sets) & (set(on.tiers) | set(on.score_bases))
    assert {"Capacity", "MetricScore"} <= set(names(on.describers))
    assert "TopologySpread" in names(on.selectors)
    blind = {n for n, p in on.instances.items() if not p.reads_metric_values}
    assert on.metric_blind == blind and "LabelConstraints" in blind


def test_an_extender_filters_in_one_batch_scores_in_bulk_and_may_veto_the_bind() -> None:
    config = SchedulerConfig(extenders=[Extender(url="http://127.0.0.1:1", filter_verb="f",
                                                 prioritize_verb="p", weight=2.0)])
    on = enable(config, REGISTRY)
    assert names(on.batch_filters) == ["Extender[0]"]
    assert "Extender[0]" not in names(on.filters)  # it has no per-candidate filter
    assert [(p.name, w) for p, w in on.scores][-1] == ("Extender[0]", 2.0)
    assert "Extender[0]" in on.score_alls and names(on.pre_binds) == ["Extender[0]"]


@pytest.mark.parametrize(("plugins", "said"), [
    ({"sideways": [PluginSpec("Gang")]}, "unknown extension point 'sideways'"),
    ({"filter": [PluginSpec("NoSuchPlugin")]}, "plugins.filter: unknown plugin 'NoSuchPlugin'"),
    ({"permit": [PluginSpec("Capacity")]}, "plugins.permit: Capacity does not implement permit"),
    ({"score": [PluginSpec("Capacity", args={"nonsense": 1})]}, "unknown argument(s) nonsense"),
    ({"permit": [PluginSpec("Gang", args={"timeout": "soon"})]},
     "plugin Gang: argument timeout: Expected 'float', got 'str'"),
    ({"filter": [PluginSpec("FailedTargets", args={"backoff": -1})]},
     "plugin FailedTargets: argument backoff: Expected 'float' >= 0.0"),
    ({"filter": [PluginSpec("Capacity", args={"strategy": "MostAllocated"})],
      "score": [PluginSpec("Capacity", args={"strategy": "LeastAllocated"})]},
     "Capacity argument 'strategy' is 'MostAllocated' in plugins.filter and "
     "'LeastAllocated' in plugins.score"),
])
def test_a_profile_that_cannot_be_bound_is_refused_naming_the_entry(
        plugins: dict[str, list[PluginSpec]], said: str) -> None:
    with pytest.raises(ValueError) as exc:
        enable(SchedulerConfig(plugins=plugins), REGISTRY)
    assert said in str(exc.value)


def test_a_plugin_is_bound_by_the_points_it_declares_and_refused_when_they_disagree(
        ) -> None:
    """A plugin declares its points as its bases (mypy checks each signature against the
    point's); when the profile is enabled, a declared point's method missing (a
    misspelling: ``filtr`` would never be called), a point's method defined without the
    point declared, or a public method named nearly as a point are refused, naming the
    plugin."""
    from berth.controllers.scheduler.framework import Status
    from berth.controllers.scheduler.framework.plugin import Plugin

    class Misspelt(Plugin, points.Filter):
        name = "Misspelt"

        def filtr(self, state: object, subject: object, candidate: object,
                  snapshot: object) -> Status:
            raise AssertionError("never called")

    class Undeclared(Plugin, points.Filter):
        name = "Undeclared"

        def filter(self, state: object, subject: object, candidate: object,  # type: ignore[override]
                   snapshot: object) -> Status:
            raise AssertionError("never called")

        def normalize(self, state: object, subject: object, scores: object) -> None:
            return None

    class Typo(Plugin, points.Filter):
        name = "Typo"

        def filter(self, state: object, subject: object, candidate: object,  # type: ignore[override]
                   snapshot: object) -> Status:
            raise AssertionError("never called")

        def scroe(self, state: object, subject: object, candidate: object) -> float:
            return 1.0

        def nearby_helper(self) -> int:  # a helper of another name is fine
            return 1

    for cls, said in ((Misspelt, "plugin Misspelt: declares Filter but defines no filter()"),
                      (Undeclared, "plugin Undeclared: defines normalize() but does not "
                                   "declare points.Normalize among its bases"),
                      (Typo, "plugin Typo: 'scroe' is no extension point; is it 'score' "
                             "misspelt?")):
        config = SchedulerConfig(plugins={"filter": [PluginSpec(cls.name)]})
        with pytest.raises(ValueError, match=re.escape(said)):
            enable(config, {**REGISTRY, cls.name: cls})


def test_every_registered_plugin_passes_the_check_of_its_declarations() -> None:
    from berth.controllers.scheduler.framework.enabled import check_declarations

    checked = 0
    for name, cls in REGISTRY.items():
        if isinstance(cls, type):
            check_declarations(name, cls)
            assert any(proto in cls.__mro__ for proto in points.EXTENSION_POINTS.values())
            checked += 1
    assert checked >= 18
