"""The graph of ``spec.dependsOn``: loops found and named, the index kept both ways."""

from __future__ import annotations

from berth.store import keys
from berth.store.dependencies import Dependencies, cycle, cycles, named


def k(name: str) -> keys.Key:
    return keys.resource_key("Application", name, "default")


def test_a_loop_is_found_from_any_of_its_members_and_named_in_order() -> None:
    graph = {"a": ["b"], "b": ["c"], "c": ["a"], "d": ["a"]}
    assert cycle("a", lambda n: graph.get(n, [])) == ["a", "b", "c", "a"]
    assert cycle("b", lambda n: graph.get(n, [])) == ["b", "c", "a", "b"]
    assert cycle("d", lambda n: graph.get(n, [])) is None  # depends on a loop, is not on it


def test_no_loop_in_a_diamond() -> None:
    graph = {"web": ["api", "cache"], "api": ["db"], "cache": ["db"], "db": []}
    assert cycles(graph) == []


def test_each_loop_once_and_a_self_loop_too() -> None:
    graph = {"a": ["b"], "b": ["a"], "c": ["c"], "d": ["e"], "e": ["f"], "f": ["d"]}
    assert cycles(graph) == [["a", "b", "a"], ["c", "c"], ["d", "e", "f", "d"]]


def test_a_long_chain_is_walked_without_recursion() -> None:
    graph = {str(i): [str(i + 1)] for i in range(5000)}
    graph["5000"] = ["0"]
    loop = cycle("0", lambda n: graph.get(n, []))
    assert loop is not None and len(loop) == 5002


def test_the_index_follows_changes_both_ways() -> None:
    deps = Dependencies()
    assert deps.put(k("web"), (k("db"), k("cfg"))) == {k("db"), k("cfg")}
    assert deps.of(k("db")) == {k("web")} and deps.on(k("web")) == (k("db"), k("cfg"))
    # dropping one: both the old and the new are concerned
    assert deps.put(k("web"), (k("db"),)) == {k("db"), k("cfg")}
    assert deps.of(k("cfg")) == set()
    deps.put(k("db"), (k("web"),))
    loop = deps.cycle(k("web"))
    assert loop is not None and named(loop) == "web → db → web"
    assert deps.put(k("web"), ()) == {k("db")}  # gone
    assert deps.of(k("db")) == set() and deps.cycle(k("db")) is None
