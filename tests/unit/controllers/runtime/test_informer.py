"""The informer's own writes echoed: kept as the writer knows them, nothing made again."""

from __future__ import annotations

from typing import Any

from berth.controllers.runtime import Event
from berth.controllers.runtime.informer import Informer
from berth.controllers.scheduler.subjects import compact_binding
from berth.controllers.scheduler.views import BindingView
from berth.store import Put, encode, keys
from berth.store.codec import decode
from berth_testkit.memory import MemoryStore


def binding(name: str) -> dict[str, Any]:
    return {"kind": "Binding", "api": "scheduling",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"resource": {"kind": "Application", "name": name, "namespace": "default"},
                     "generation": 1,
                     "targets": [{"kind": "Cluster", "name": "c1", "namespace": "default"}]},
            "status": {"state": "Scheduled", "reason": "fits"}}


def test_a_known_value_is_kept_and_handed_on_as_the_writer_holds_it() -> None:
    """The scheduler's own Binding echoed: the very object it assumed (already as the
    cache keeps it) reaches the handlers, neither decoded nor converted again — an
    object made again would index the decision a second time. Another writer's value
    is decoded and converted."""
    store = MemoryStore()
    mine, theirs = (keys.binding_key("Application", "default", n) for n in ("mine", "theirs"))
    store.commit([Put(mine, encode(binding("mine"))), Put(theirs, encode(binding("theirs")))])
    held = compact_binding(mine, decode(encode(binding("mine")), BindingView, mine))
    converted: list[str] = []

    def convert(key: keys.Key, view: BindingView) -> BindingView:
        converted.append(key)
        return compact_binding(key, view)

    informer: Informer[BindingView] = Informer(
        store, keys.BINDINGS, BindingView, convert=convert,
        known=lambda key, revision, read: held if key == mine else None)
    seen: dict[str, object] = {}

    def handler(event: Event[BindingView]) -> None:
        seen[event.key] = event.obj

    informer.add_handler(handler)
    informer.sync()
    assert seen[mine] is held and converted == [theirs]
    assert isinstance(seen[theirs], BindingView) and seen[theirs] is not held
