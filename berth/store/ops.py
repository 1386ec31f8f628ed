"""What goes over the wire to etcd's gateway, as values: keys in base64, stored
key-values, and the operations of a transaction (:class:`Put`, :class:`Delete`,
and the :class:`Fence` a leader's writes carry)."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any, NamedTuple

import msgspec

from berth.store.keys import Key


def b64(data: str | bytes) -> str:
    raw = data.encode() if isinstance(data, str) else data
    return base64.b64encode(raw).decode("ascii")


def unb64(data: str | bytes | None) -> bytes:
    return base64.b64decode(data) if data else b""


def key_text(raw: bytes) -> str:
    """A key as text. One that is not UTF-8 (written by hand) keeps its bad bytes as
    ``\\xNN``: printable, and never one of berth's (``keys.problem``) — never a reason
    for a list or a watch to fail."""
    return raw.decode("utf-8", "backslashreplace")


def prefix_end(prefix: str) -> str:
    """The range end that selects every key starting with ``prefix``."""
    raw = bytearray(prefix.encode())
    while raw:
        if raw[-1] < 0xFF:
            raw[-1] += 1
            return raw.decode("latin-1")
        raw.pop()
    return "\0"


class KV(NamedTuple):
    """One stored key with its revisions."""

    key: Key
    value: bytes
    mod_revision: int
    create_revision: int
    version: int
    lease: int = 0

    @classmethod
    def from_json(cls, kv: dict[str, Any]) -> KV:
        """From a key-value of a range response, as the gateway wrote it."""
        return msgspec.convert(kv, GatewayKV, strict=False).stored()


class GatewayKV(msgspec.Struct):
    """A key-value as etcd's gateway writes it, in range responses and watch events:
    int64s as strings (``strict=False`` reads them), zeros left out."""

    key: bytes = b""  # base64 in the JSON: msgspec decodes it
    value: str = ""  # left base64: a watcher may never need to read it
    mod_revision: int = 0
    create_revision: int = 0
    version: int = 0
    lease: int = 0

    def stored(self) -> KV:
        return KV(Key(key_text(self.key)), unb64(self.value), self.mod_revision,
                  self.create_revision, self.version, self.lease)


@dataclass(frozen=True, slots=True)
class Put:
    """Write ``value`` at ``key`` if it is still at ``mod_revision`` (0: create; None:
    whatever it holds — only for what no one else writes and nothing decides on, as
    events)."""

    key: Key
    value: bytes
    mod_revision: int | None = 0
    lease: int = 0
    keep_lease: bool = False  # stay on the lease the key is on (etcd's ignore_lease)


@dataclass(frozen=True, slots=True)
class Delete:
    """Delete ``key`` if it is still at ``mod_revision`` (None: whatever it is)."""

    key: Key
    mod_revision: int | None = None


@dataclass(frozen=True, slots=True)
class Fence:
    """A term: ``key`` still exists with ``create_revision`` = ``term`` (the revision
    at which a leader won its election key, or a replica created its claim). As an
    operation of a transaction it writes nothing and requires that; a fenced store adds
    its fence to every write transaction, so a replica whose term is over cannot land
    a write in etcd itself, whatever it had queued or however late it runs.

    A term is a revision, never 0: etcd's compare of a revision with 0 succeeds on an
    absent key, which is exactly when nobody leads. :meth:`Store.commit` refuses a
    fence of term 0 (``Deposed``) without sending anything."""

    key: Key
    term: int
    mod: bool = False  # compare the key's mod_revision instead: never written since

    @property
    def target(self) -> str:
        return "MOD" if self.mod else "CREATE"


Op = Put | Delete | Fence


__all__ = ["KV", "Delete", "Fence", "GatewayKV", "Op", "Put", "b64", "key_text", "prefix_end",
           "unb64"]
