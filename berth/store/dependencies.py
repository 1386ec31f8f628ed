"""Which applications depend on which: the graph ``spec.dependsOn`` draws.

An application's dependencies are applications of its namespace
(docs/order.md "Dependencies"). The scheduler places a dependent where its
dependencies are placed, and the propagator applies its copy on a cluster only
once theirs is there; both keep a :class:`Dependencies` index, fed by the
applications they watch, to find whom a change concerns: a dependency's Binding
or status changed, its dependents are decided again; a dependent's, its
dependencies (whose removal waits for it). :func:`cycle` finds a loop, which
``berth apply`` refuses and neither process acts on.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Iterable, Mapping

from berth.store import keys


def dependency_keys(namespace: str, names: Iterable[str]) -> tuple[keys.Key, ...]:
    """The keys of the applications ``names`` of ``namespace``."""
    return tuple(keys.resource_key("Application", n, namespace) for n in names)


def cycle(start: str, edges: Callable[[str], Collection[str]]) -> list[str] | None:
    """A loop of dependencies through ``start``, from it back to it (``[a, b, a]``);
    None when there is none. ``edges(x)``: what ``x`` depends on."""
    path: list[str] = [start]
    on_path = {start}
    done: set[str] = set()
    stack: list[tuple[str, list[str]]] = [(start, sorted(edges(start)))]
    while stack:
        node, todo = stack[-1]
        if not todo:
            stack.pop()
            path.pop()
            on_path.discard(node)
            done.add(node)
            continue
        nxt = todo.pop(0)
        if nxt == start:
            return [*path, start]
        if nxt in on_path or nxt in done:
            continue
        path.append(nxt)
        on_path.add(nxt)
        stack.append((nxt, sorted(edges(nxt))))
    return None


def cycles(graph: Mapping[str, Collection[str]]) -> list[list[str]]:
    """Each loop of ``graph`` once (named from its least member)."""
    found: list[list[str]] = []
    seen: set[frozenset[str]] = set()
    for node in sorted(graph):
        loop = cycle(node, lambda n: graph.get(n, ()))
        if loop is not None and (members := frozenset(loop)) not in seen:
            seen.add(members)
            found.append(loop)
    return found


def named(loop: list[str]) -> str:
    """``a → b → a`` of keys, by application name."""
    return " → ".join(keys.parse_key(k).name for k in loop)


class Dependencies:
    """Each application's dependencies and dependents, as the watched applications
    say. One lock; fed by one watch's events, read by any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._on: dict[str, tuple[keys.Key, ...]] = {}  # dependent → its dependencies
        self._of: dict[str, set[keys.Key]] = {}  # dependency → its dependents

    def put(self, key: keys.Key, on: tuple[keys.Key, ...]) -> set[keys.Key]:
        """``key`` now depends on ``on`` (nothing: it is gone); the dependencies it had
        or has now (a change concerns them)."""
        with self._lock:
            was = self._on.pop(key, ())
            for d in was:
                left = self._of.get(d)
                if left is not None:
                    left.discard(key)
                    if not left:
                        del self._of[d]
            if on:
                self._on[key] = on
                for d in on:
                    self._of.setdefault(d, set()).add(key)
            return {*was, *on}

    def on(self, key: str) -> tuple[keys.Key, ...]:
        """What ``key`` depends on."""
        with self._lock:
            return self._on.get(key, ())

    def of(self, key: str) -> set[keys.Key]:
        """What depends on ``key``."""
        with self._lock:
            return set(self._of.get(key, ()))

    def cycle(self, key: str) -> list[str] | None:
        """A loop through ``key`` (None: none): walked under the lock, over what it reaches
        alone (no copy of the whole graph per reconcile)."""
        with self._lock:
            return cycle(key, lambda k: self._on.get(k, ()))
