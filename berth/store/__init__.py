"""berth's access to etcd: the only package that imports the etcd client.

Everything else sees typed documents (:mod:`store.documents`), keys
(:mod:`store.keys`), revisions, and the errors of :mod:`store.errors`.
"""

from berth.store.client import MAX_TXN_OPS, Store
from berth.store.codec import decode, encode
from berth.store.config import EtcdConfig
from berth.store.errors import (
    Compacted,
    Conflict,
    Deposed,
    Invalid,
    NoSpace,
    NotFound,
    StoreError,
    Unauthorized,
    Unavailable,
)
from berth.store.lease import KeptLease
from berth.store.ops import KV, Delete, Fence, Op, Put
from berth.store.watch import Watch, WatchBatch, WatchEvent

__all__ = [
    "KV",
    "MAX_TXN_OPS",
    "Compacted",
    "Conflict",
    "Delete",
    "Deposed",
    "EtcdConfig",
    "Fence",
    "Invalid",
    "KeptLease",
    "NoSpace",
    "NotFound",
    "Op",
    "Put",
    "Store",
    "StoreError",
    "Unauthorized",
    "Unavailable",
    "Watch",
    "WatchBatch",
    "WatchEvent",
    "decode",
    "encode",
]
