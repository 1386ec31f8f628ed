"""The status writer's read of a status: its own last write until the watch delivers it,
the watch's word after — and after a refused write, at once.

A replica paused past its lease and thawed (the fault table's row "the propagator
replica serving a paused ... thawed") found the status it had written deleted by its
successor: it read its own record of that write, and every guarded delete was refused,
retried every 0.1 s until the next resync. Its real-server twin is that row in
tests/faults/test_fault_table.py.
"""

from __future__ import annotations

from berth.controllers.propagator.status import StatusWriter
from berth.controllers.runtime import Informer
from berth.store import keys
from berth.store.documents import ApplicationState, ApplicationStatus
from berth_testkit.memory import MemoryStore

KEY = keys.status_key("Application", "default", "web")


def world() -> tuple[MemoryStore, Informer[ApplicationStatus], StatusWriter]:
    store = MemoryStore()
    statuses: Informer[ApplicationStatus] = Informer(
        store, keys.status_prefix("Application"), ApplicationStatus)
    return store, statuses, StatusWriter(store, statuses, ledger=False)


def test_a_status_deleted_by_another_after_the_watch_delivered_ours_reads_as_gone() -> None:
    store, statuses, writer = world()
    doc = writer.read("default", "web")
    assert doc.write(ApplicationState(state="RUNNING")) is None
    statuses.sync()  # the watch delivered our write
    store.delete(KEY)  # a successor removed it
    statuses.sync()  # ... and the watch delivered that too
    doc = writer.read("default", "web")
    assert doc.old is None  # not our own record of what is no longer there
    assert writer.remove(doc, None) is None  # nothing to delete, nothing refused


def test_a_refused_write_forgets_our_record_so_the_retry_reads_the_watch() -> None:
    store, statuses, writer = world()  # the watch delivers nothing: it lags
    doc = writer.read("default", "web")
    assert doc.write(ApplicationState(state="RUNNING")) is None
    store.delete(KEY)  # deleted by another, not yet seen
    doc = writer.read("default", "web")
    assert doc.old is not None  # our write, newer than anything the watch showed
    refused = writer.remove(doc, None)
    assert refused is not None and "deleted since it was read" in refused.reason
    again = writer.read("default", "web")
    assert again.old is None and writer.remove(again, None) is None
    # a write refused the same way: the next one is guarded by what the watch says
    assert again.write(ApplicationState(state="RUNNING")) is None
    kv = store.get(KEY)
    assert kv is not None
    store.update(KEY, kv.value, kv.mod_revision)  # another writer's, unseen
    refused = writer.write(writer.read("default", "web"),
                           ApplicationState(state="DEGRADED"))
    assert refused is not None
    statuses.sync()
    assert writer.read("default", "web").revision == statuses.revision
