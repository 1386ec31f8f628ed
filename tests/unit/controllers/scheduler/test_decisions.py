"""Decisions: assumed Bindings are compare-and-set, and placements are indexed by label."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from berth.controllers.runtime import Event, EventType
from berth.controllers.runtime.informer import Item
from berth.controllers.scheduler.decisions import PENDING, Decisions
from berth.controllers.scheduler.framework import Subject
from berth.controllers.scheduler.subjects import subject_from_application
from berth.controllers.scheduler.views import AppView, BindingView, Meta
from berth.store import keys
from berth.store.documents import BindingMeta, BindingSpec, ObjectRef, Target


@dataclass
class FakeInformer:
    """What Decisions reads of an informer: its cache and its handlers."""

    cache: dict[str, Item[Any]]
    handlers: list[Callable[[Event[Any]], None]]
    invalid: list[Callable[[str, int], None]] = field(default_factory=list)
    cleared: list[Callable[[str, int], None]] = field(default_factory=list)

    def get(self, key: str) -> Any:
        item = self.cache.get(key)
        return item.obj if item else None

    def item(self, key: str) -> Item[Any] | None:
        return self.cache.get(key)

    def __contains__(self, key: object) -> bool:
        return key in self.cache

    def add_handler(self, handler: Callable[[Event[Any]], None]) -> None:
        self.handlers.append(handler)

    def add_invalid_handler(self, handler: Callable[[str, int], None]) -> None:
        self.invalid.append(handler)

    def add_cleared_handler(self, handler: Callable[[str, int], None]) -> None:
        self.cleared.append(handler)

    def deliver(self, key: str, obj: Any, revision: int, kind: EventType = EventType.MODIFIED,
                old: Any = None) -> None:
        if kind is EventType.DELETED:
            self.cache.pop(key, None)
        else:
            self.cache[key] = Item(key, obj, revision)
        for h in self.handlers:
            h(Event(kind, key, obj, old, revision))


def app(name: str, labels: dict[str, str]) -> Subject:
    key = keys.resource_key("Application", name, "default")
    return subject_from_application(key, AppView(Meta(name, "default", labels)))


def bkey(name: str) -> str:
    return keys.binding_key("Application", "default", name)


def view(name: str, *clusters: str) -> BindingView:
    return BindingView(BindingMeta(name=name, namespace="default"),
                       BindingSpec(resource=ObjectRef("Application", name, "default"), generation=1,
                                   targets=[Target("Cluster", c, "default") for c in clusters]))


def setup(**apps: dict[str, str]) -> tuple[Decisions, FakeInformer, FakeInformer]:
    bindings, applications = FakeInformer({}, []), FakeInformer({}, [])
    for name, labels in apps.items():
        key = keys.resource_key("Application", name, "default")
        applications.cache[key] = Item(key, app(name, labels), 1)
    return Decisions(bindings, applications), bindings, applications


def test_an_assumed_decision_is_read_at_once_and_confirmed_by_the_watch() -> None:
    d, bindings, _ = setup(web={"app": "web"})
    doc = view("web", "c1")
    token = d.assume(bkey("web"), doc)
    assert d.get(bkey("web")) == (doc, PENDING)
    d.written(bkey("web"), token, 10)
    assert d.get(bkey("web")) == (doc, 10)
    bindings.deliver(bkey("web"), doc, 9)  # an older event does not confirm it
    assert d.assumed() == 1
    bindings.deliver(bkey("web"), doc, 10)
    assert d.assumed() == 0 and d.get(bkey("web")) == (doc, 10)


def test_a_late_write_or_event_never_drops_a_newer_decision() -> None:
    d, bindings, _ = setup(web={"app": "web"})
    first = d.assume(bkey("web"), view("web", "c1"))
    newer = view("web", "c2")
    d.assume(bkey("web"), newer)
    d.written(bkey("web"), first, 10)  # the first write landing does not replace the newer
    d.retract(bkey("web"), first)  # nor does it failing
    bindings.deliver(bkey("web"), view("web", "c1"), 10)  # nor its event on the watch
    assert d.get(bkey("web")) == (newer, PENDING)


def test_a_failed_write_is_retracted() -> None:
    d, bindings, _ = setup(web={"app": "web"})
    seen = view("web", "c1")
    bindings.deliver(bkey("web"), seen, 5, EventType.ADDED)
    token = d.assume(bkey("web"), view("web", "c2"))
    d.retract(bkey("web"), token)
    assert d.get(bkey("web")) == (seen, 5)


def test_a_deletion_is_assumed_too() -> None:
    d, bindings, _ = setup(web={"app": "web"})
    bindings.deliver(bkey("web"), view("web", "c1"), 5, EventType.ADDED)
    token = d.assume(bkey("web"), None)
    assert d.get(bkey("web")) == (None, 0) and not d.known(bkey("web"))
    assert d.placed("default") == []
    d.written(bkey("web"), token, 6)
    bindings.deliver(bkey("web"), view("web", "c1"), 6, EventType.DELETED)
    assert d.assumed() == 0 and d.get(bkey("web")) == (None, 0)


def test_an_application_without_a_binding_indexes_nothing_until_its_binding_comes() -> None:
    """A new application's event, no Binding stored nor decided: no index pass; the
    Binding seen after it is indexed with the application as it is by then."""
    d, bindings, applications = setup()
    key = keys.resource_key("Application", "web", "default")
    passes = d.passes
    applications.deliver(key, app("web", {"app": "web"}), 1, EventType.ADDED)
    assert d.passes == passes and d.placed("default") == []
    applications.deliver(key, app("web", {"app": "web", "tier": "1"}), 2)
    assert d.passes == passes
    bindings.deliver(bkey("web"), view("web", "c1"), 3, EventType.ADDED)
    assert [p.ref.name for p in d.placed("default", {"tier": "1"})] == ["web"]
    # once it has a Binding, the application's changes are indexed again
    applications.deliver(key, app("web", {"app": "other"}), 4)
    assert d.placed("default", {"tier": "1"}) == []
    assert [p.ref.name for p in d.placed("default", {"app": "other"})] == ["web"]


def test_placements_are_found_by_label_and_follow_every_change() -> None:
    d, _, applications = setup(a={"app": "db", "tier": "1"}, b={"app": "db"},
                               c={"app": "web"})
    for name in ("a", "b", "c"):
        d.assume(bkey(name), view(name, f"on-{name}"))
    assert {p.ref.name for p in d.placed("default")} == {"a", "b", "c"}
    assert {p.ref.name for p in d.placed("default", {"app": "db"})} == {"a", "b"}
    assert {p.ref.name for p in d.placed("default", {"app": "db", "tier": "1"})} == {"a"}
    assert d.placed("other", {"app": "db"}) == []
    assert {r.name: n for r, n in d.placed_on("default", "app", "db").items()} == {
        "on-a": 1, "on-b": 1}
    # a relabelled application moves in the index, and both groups change version
    db, web = d.version("default", {"app": "db"}), d.version("default", {"app": "web"})
    key = keys.resource_key("Application", "b", "default")
    old = applications.cache[key].obj
    applications.deliver(key, app("b", {"app": "web"}), 2, old=old)
    assert {p.ref.name for p in d.placed("default", {"app": "web"})} == {"b", "c"}
    assert d.version("default", {"app": "db"}) != db and d.version("default", {"app": "web"}) != web
    tier = d.version("default", {"tier": "1"})
    d.assume(bkey("b"), view("b", "elsewhere"))
    assert d.version("default", {"tier": "1"}) == tier  # "a" alone carries tier 1
    d.assume(bkey("a"), view("a", "elsewhere"))
    assert {r.name: n for r, n in d.placed_on("default", "app", "web").items()} == {
        "on-c": 1, "elsewhere": 1}
    assert {r.name: n for r, n in d.placed_on("default", "app", "db").items()} == {
        "elsewhere": 1}
    # a Binding without targets is no placement
    d.assume(bkey("c"), view("c"))
    assert {p.ref.name for p in d.placed("default", {"app": "web"})} == {"b"}
    assert [p.targets[0].name for p in d.placed("default", {"tier": "1"})] == ["elsewhere"]
    assert {r.name: n for r, n in d.placed_on("default", "app", "web").items()} == {
        "elsewhere": 1}


def test_the_changes_since_a_position_add_up_to_where_a_label_runs() -> None:
    """A reader that applies the journal's changes to what it read before always holds
    what ``placed_on`` says; one too far behind (or new) reads the whole again."""
    import random

    from berth.controllers.scheduler import decisions

    rng = random.Random(3)
    names = [f"a{i}" for i in range(40)]
    d, _, applications = setup(**{n: {"group": rng.choice("xy")} for n in names})

    def read(since: int, held: dict[str, int]) -> tuple[int, dict[str, int], bool]:
        end, changes, whole = d.placed_on_since("default", "group", "x", since)
        out = {} if whole else dict(held)
        for ref, n in changes:
            out[ref.name] = out.get(ref.name, 0) + n
        return end, {k: v for k, v in out.items() if v}, whole

    at, held, whole = read(-1, {})
    assert whole and held == {}
    for step in range(300):
        name = rng.choice(names)
        if step % 7 == 0:  # relabelled: it joins or leaves the group
            key = keys.resource_key("Application", name, "default")
            old = applications.cache[key].obj
            applications.deliver(key, app(name, {"group": rng.choice("xy")}), step + 2, old=old)
        else:
            d.assume(bkey(name), view(name, *rng.sample(["c1", "c2", "c3", "c4"],
                                                        rng.randint(0, 2))))
        if step % 3 == 0:
            at, held, whole = read(at, held)
            assert not whole
            assert held == {r.name: n for r, n in d.placed_on("default", "group", "x").items()}
    # far behind: the journal started again meanwhile
    old = decisions.JOURNAL
    decisions.JOURNAL = 4
    try:
        for name in names[:10]:
            d.assume(bkey(name), view(name, "c5"))
        _, held, whole = read(at, held)
    finally:
        decisions.JOURNAL = old
    assert whole
    assert held == {r.name: n for r, n in d.placed_on("default", "group", "x").items()}


def test_garbage_at_a_binding_key_is_no_decision_and_its_revision_is_known() -> None:
    d, bindings, _ = setup(web={"app": "web"})
    bindings.deliver(bkey("web"), view("web", "c1"), 5, EventType.ADDED)
    for h in bindings.invalid:  # someone wrote garbage over it with etcdctl
        h(bkey("web"), 7)
    assert d.get(bkey("web")) == (None, 0) and d.known(bkey("web"))
    assert d.stored_revision(bkey("web")) == 7  # what the replacing write compares with
    assert d.placed("default") == []
    bindings.deliver(bkey("web"), view("web", "c2"), 8)  # replaced by a good one
    assert d.get(bkey("web"))[1] == 8 and d.stored_revision(bkey("web")) == 8


def test_garbage_deleted_before_the_application_comes_is_forgotten() -> None:
    """Garbage at a Binding key, then deleted: a create guards on "absent" again (it
    guarded on the garbage's revision, and conflicted for ever)."""
    decisions, bindings, _ = setup()
    key = keys.binding_key("Application", "default", "later")
    for h in bindings.invalid:
        h(key, 7)
    assert decisions.stored_revision(key) == 7 and decisions.known(key)
    for h in bindings.cleared:
        h(key, 8)
    assert decisions.stored_revision(key) == 0 and not decisions.known(key)


def test_the_echo_of_a_write_is_known_by_its_revision_or_while_in_flight_by_its_bytes() -> None:
    """The watch may deliver our write before the writer has read etcd's answer (a fifth
    of the echoes in a burst): it is known by the bytes written, which need no decoding
    then. Other bytes, or no bytes recorded yet, are decoded as anyone's would be."""
    d, _, _ = setup(web={"app": "web"}, db={"app": "db"})
    mine = view("web", "c1")

    def read(b: bytes) -> Callable[[], bytes]:
        return lambda: b

    d.assume(bkey("web"), mine)
    assert d.echo(bkey("web"), 9, read(b"{}")) is None  # no bytes given: decoded
    token = d.assume(bkey("web"), mine, b'{"written": 1}')  # what the writer sends
    assert d.echo(bkey("web"), 9, read(b'{"written": 1}')) is mine
    assert d.echo(bkey("web"), 9, read(b'{"someone": "else"}')) is None
    d.written(bkey("web"), token, 9)
    assert d.echo(bkey("web"), 9, read(b"never read")) is mine  # landed here: by revision
    assert d.echo(bkey("web"), 10, read(b'{"written": 1}')) is None  # later: not ours
    d.assume(bkey("db"), None, b"")  # a deletion has no document to give
    assert d.echo(bkey("db"), 11, read(b"")) is None


def test_the_index_follows_writes_whether_their_echo_comes_before_or_after_the_answer(
        ) -> None:
    """The echo of an assumed write is not indexed again (nothing changed); any other
    document, a deletion or a write the watch delivers first is."""
    d, bindings, _ = setup(web={"app": "web"})

    def on() -> set[str]:
        return {r.name for r in d.placed_on("default", "app", "web")}

    mine = view("web", "c1")
    token = d.assume(bkey("web"), mine)
    passes = d.passes
    d.written(bkey("web"), token, 10)
    bindings.deliver(bkey("web"), mine, 10)  # the echo, after etcd's answer
    assert on() == {"c1"} and d.assumed() == 0
    assert d.passes == passes  # neither the answer nor the echo changed anything
    bindings.deliver(bkey("web"), view("web", "c2"), 11)  # someone else's write
    assert on() == {"c2"}
    mine = view("web", "c3")
    token = d.assume(bkey("web"), mine)
    bindings.deliver(bkey("web"), mine, 12)  # the echo first: still assumed
    d.written(bkey("web"), token, 12)  # then the answer: the watch was faster
    assert on() == {"c3"} and d.assumed() == 0
    token = d.assume(bkey("web"), view("web", "c4"))
    d.written(bkey("web"), token, 13)
    bindings.deliver(bkey("web"), view("web", "c4"), 13)  # decoded: equal, not the same
    assert on() == {"c4"} and d.assumed() == 0
    bindings.deliver(bkey("web"), view("web", "c4"), 14, EventType.DELETED)
    assert on() == set() and d.placed("default") == []


def test_a_binding_that_outlives_its_application_holds_its_share_until_it_goes() -> None:
    """An application is deleted before its Binding: what it placed still runs, and
    counts against its namespace's quota (and its clusters' room) until the Binding
    goes — the robustness run, seeds 14 and 29: a team five applications over a quota
    of four, the fifth placed between an application's deletion and its Binding's."""
    d, bindings, applications = setup(a={}, b={})
    freed: list[str | None] = []
    d.on_freed.append(freed.append)
    bindings.deliver(bkey("a"), view("a", "c1", "c2"), 5)
    bindings.deliver(bkey("b"), view("b", "c1"), 6)
    both = {"applications": 2, "copies": 3}
    assert d.used("default").listed() == both
    key = keys.resource_key("Application", "a", "default")
    applications.deliver(key, applications.cache[key].obj, 7, EventType.DELETED)
    assert d.used("default").listed() == both and not freed  # its Binding still places it
    bindings.deliver(bkey("a"), view("a", "c1", "c2"), 8, EventType.DELETED)
    assert d.used("default").listed() == {"applications": 1, "copies": 1}
    assert freed == ["default"]
    # a new leader reading a Binding whose application went before it started: the
    # Binding counts itself and its copies (what they asked went with the application)
    fresh, bindings, _ = setup()
    bindings.deliver(bkey("x"), view("x", "c1", "c2"), 9)
    assert fresh.used("default").listed() == {"applications": 1, "copies": 2}


def test_the_ranks_on_each_cluster_follow_placements_moves_and_deletions() -> None:
    """A plan bounds a cluster by the ranks placed there, before reading its occupants:
    they follow a Binding's targets and its application's priority, and go with them."""
    from dataclasses import replace

    from berth.controllers.scheduler.framework.types import candidate_key
    from berth.store.documents.resources import Demand, Resources

    d, bindings, applications = setup(a={}, b={})
    for name, priority in (("a", 1), ("b", 7)):
        key = keys.resource_key("Application", name, "default")
        asks = Demand(fixed=Resources(cpu=100), whole=Resources(cpu=100))
        applications.cache[key] = Item(key, replace(app(name, {}), priority=priority,
                                                    demand=asks), 1)
    one, seven = ("default", 1, None), ("default", 7, None)
    bindings.deliver(bkey("a"), view("a", "c1", "c2"), 5)
    bindings.deliver(bkey("b"), view("b", "c2"), 6)

    def on(cluster: str) -> list[object]:
        return sorted(d.ranks_on(candidate_key("Cluster", "default", cluster)), key=str)

    assert (on("c1"), on("c2"), sorted(d.ranks(), key=str)) == ([one], [one, seven],
                                                                 [one, seven])
    d.assume(bkey("a"), view("a", "c3"))  # moved
    assert (on("c1"), on("c2"), on("c3")) == ([], [seven], [one])
    key = keys.resource_key("Application", "b", "default")
    old = applications.cache[key].obj
    applications.deliver(key, replace(old, priority=3), 7, old=old)  # its priority changed
    assert on("c2") == [("default", 3, None)]
    bindings.deliver(bkey("b"), view("b", "c2"), 8, EventType.DELETED)
    assert on("c2") == [] and d.ranks() == [one]


def test_placements_that_ask_alike_share_what_they_ask() -> None:
    """What each placement asks is kept while it runs: equal asks are one object (memory
    at 100,000 placements), and each namespace's use still counts every one of them."""
    from dataclasses import replace

    from berth.controllers.scheduler.framework.types import candidate_key
    from berth.store.documents.resources import Demand, Resources

    d, bindings, applications = setup(a={}, b={})
    for name in ("a", "b"):
        key = keys.resource_key("Application", name, "default")
        asks = Demand(fixed=Resources(cpu=250), whole=Resources(cpu=250))  # equal, not one
        applications.cache[key] = Item(key, replace(app(name, {}), demand=asks), 1)
    bindings.deliver(bkey("a"), view("a", "c1"), 5)
    bindings.deliver(bkey("b"), view("b", "c1"), 6)
    (_, first), (_, second) = d.occupants(candidate_key("Cluster", "default", "c1"))
    assert first.ask is second.ask and first.ask == Resources(cpu=250)
    assert d.used("default").listed() == {"applications": 2, "copies": 2, "cpu": 500}
