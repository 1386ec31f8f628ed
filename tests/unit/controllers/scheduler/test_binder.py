"""The Binding writer carries the leader's record of moves with the Bindings: the
newest said, in the next transaction, once."""

from __future__ import annotations

from berth.controllers.scheduler.binder import BindingWriter, Write
from berth.store import keys
from berth.store.documents import Binding, BindingMeta, BindingSpec, BindingStatus, ObjectRef
from berth_testkit.memory import MemoryStore
from berth_testkit.scheduler_env import TokensOnly


def _write(name: str, generation: int = 1) -> Write:
    doc = Binding(BindingMeta(name, "default"), BindingSpec(
        ObjectRef("Application", name, "default"), generation), BindingStatus("Scheduled"))
    return Write(f"default/{name}", keys.binding_key("Application", "default", name), doc)


def test_the_record_of_moves_lands_with_the_binding_submitted_after_it(
        store: MemoryStore) -> None:
    writer = BindingWriter(store, TokensOnly(), lambda _: 0, retry=lambda _: None)
    writer.start()
    try:
        writer.moves(b"first")
        writer.moves(b"second")  # the newest said is what goes
        writer.submit(_write("web"))
        store.memory.wait_until(lambda: writer.idle() and store.get(
            keys.binding_key("Application", "default", "web")) is not None)
        moves = store.get(keys.SCHEDULER_MOVES)
        web = store.get(keys.binding_key("Application", "default", "web"))
        assert moves is not None and web is not None
        assert moves.value == b"second" and moves.mod_revision == web.mod_revision
        writer.submit(_write("api"))  # nothing new said: not written again
        store.memory.wait_until(lambda: store.get(
            keys.binding_key("Application", "default", "api")) is not None)
        again = store.get(keys.SCHEDULER_MOVES)
        assert again is not None and again.mod_revision == moves.mod_revision
        # a transaction is one operation short of etcd's limit: room for the record
        assert writer.batch == store.room - 1
    finally:
        writer.stop()
