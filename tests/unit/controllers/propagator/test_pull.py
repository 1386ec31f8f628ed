"""What the propagator reads back of the works it writes for pull clusters: a value at a
work's key that is no work is garbage, to be written over, whatever fields it lacks.

The fault table's garbage row wrote ``{"kind": "Work"}`` over a work: the propagator's
light view of works, every field optional, read it as a work it had not written (digest
""), never sent the work again, and the copy waited for a report of that value for good
(DEGRADED, "not reported by its agent yet"). Its real-server twin is that row
(``test_garbage_in_every_kind_of_key`` in tests/faults/test_fault_table.py).
"""

from __future__ import annotations

import pytest

from berth.controllers.propagator.plan import App, Apply, Clear, Progress
from berth.controllers.propagator.pull import PullClusters, digest_of
from berth.store import decode, encode, keys
from berth.store.documents import ApplicationState, ClusterApplied, KubeObjectRef
from berth.store.documents.tenancy import Identity
from berth.store.documents.work import Intent, Work, WorkMeta, WorkSpec
from berth_testkit.memory import MemoryStore

CID = "default/b"
KEY = keys.work_key(CID, "default", "web")


def world() -> tuple[MemoryStore, PullClusters]:
    store = MemoryStore()
    return store, PullClusters(store, is_pull=lambda _cid: True, exists=lambda _cid: True)


def work() -> bytes:
    spec = WorkSpec(generation=1, objects=[{"apiVersion": "v1", "kind": "ConfigMap",
                                            "metadata": {"name": "web"}}])
    return encode(Work(WorkMeta("web", "default", CID, digest_of(spec)), spec))


def test_a_work_as_written_is_sent_and_not_sent_again() -> None:
    store, pull = world()
    revision = store.create(KEY, work())
    pull.works.sync()
    sent = pull.sent(KEY)
    assert sent is not None and sent.revision == revision and sent.digest
    assert not pull.resend(CID, "default", "web")


@pytest.mark.parametrize("garbage", [b'{"kind": "Work"}', b'{"metadata": {}, "spec": {}}',
                                     b'{"metadata": {"digest": "x"}}', b"[1, 2]", b"{"])
def test_a_value_that_is_no_work_is_sent_again(garbage: bytes) -> None:
    store, pull = world()
    store.create(KEY, work())
    pull.works.sync()
    kv = store.get(KEY)
    assert kv is not None
    revision = store.update(KEY, garbage, kv.mod_revision)
    pull.works.sync()
    sent = pull.sent(KEY)
    assert sent is not None and sent.revision == revision and sent.digest == ""
    assert pull.resend(CID, "default", "web")


def test_a_work_names_the_identity_its_objects_are_applied_and_removed_as() -> None:
    """docs/teams.md "Applied as the namespace's identity": in pull mode the agent
    impersonates the identity its work names (an apply's and a removal's alike)."""
    store, pull = world()
    team = Identity(service_account="default/deployer")
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "web"}}
    progress = Progress({}, ApplicationState())
    assert pull.apply(Apply(CID, 1, owner="default/web", identity=team),
                      App(1, bodies=(body,)), progress, lambda _state: None) is None
    kv = store.get(KEY)
    assert kv is not None and decode(kv.value, Work).spec.identity == team
    progress.applied[CID] = ClusterApplied(1, [KubeObjectRef("v1", "ConfigMap", "web",
                                                             "default")])
    pull.clear(Clear(CID, "default/web", team), progress)
    kv = store.get(KEY)
    assert kv is not None
    spec = decode(kv.value, Work).spec
    assert (spec.intent, spec.identity) == (Intent.DELETE, team)
