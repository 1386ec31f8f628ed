"""The watch's line splitter: every line whole, however etcd's chunks cut it."""

from __future__ import annotations

import base64
import json
import random

import pytest

from berth.store import Compacted, StoreError, Unavailable
from berth.store.watch import Watch, _lines


def test_lines_come_out_whole_however_the_chunks_cut_them() -> None:
    rng = random.Random(7)
    for _ in range(300):
        lines = [bytes(rng.choice(b"ab{}") for _ in range(rng.randrange(0, 40)))
                 for _ in range(rng.randrange(1, 8))]
        stream = b"\n".join(lines) + (b"\n" if rng.random() < 0.5 else b"")
        if not stream:
            continue
        cuts = sorted(rng.sample(range(1, len(stream)), min(len(stream) - 1,
                                                          rng.randrange(0, 6))))
        chunks = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]
        expected = stream.split(b"\n")
        if expected[-1] == b"":
            expected.pop()  # a stream that ends with its newline has no line after it
        assert list(_lines(iter(chunks))) == expected, (stream, chunks)


def test_a_long_line_in_many_chunks_is_joined_once() -> None:
    line = b"x" * 160_000
    chunks = [line[i:i + 4096] for i in range(0, len(line), 4096)] + [b"\n{}\n"]
    assert list(_lines(iter(chunks))) == [line, b"{}"]


def _watch() -> Watch:
    return Watch(None, "/berth/v1/", 5)  # type: ignore[arg-type]  # parsing reads no store


def test_a_watch_line_reads_as_the_gateway_writes_it() -> None:
    w = _watch()
    k, v = base64.b64encode(b"/berth/v1/a").decode(), base64.b64encode(b"{}").decode()
    line = json.dumps({"result": {"header": {"revision": "9"}, "events": [
        {"kv": {"key": k, "value": v, "mod_revision": "7", "create_revision": "6",
                "version": "2", "lease": "12"}},
        {"type": "DELETE", "kv": {"key": k, "mod_revision": "8"},
         "prev_kv": {"key": k, "value": v}},
    ]}}).encode()
    batch = w._parse(line)
    assert batch is not None and batch.revision == 9
    put, gone = batch.events
    assert (put.type, put.key, put.value, put.mod_revision, put.create_revision, put.version,
            put.lease, put.prev_value) == ("PUT", "/berth/v1/a", b"{}", 7, 6, 2, 12, None)
    assert (gone.type, gone.mod_revision, gone.value, gone.prev_value) == ("DELETE", 8, b"",
                                                                           b"{}")
    assert w.next_revision == 9
    assert w._parse(b'{"result": {"header": {"revision": "20"}}}') == (20, [])  # progress
    assert w.next_revision == 21
    assert w._parse(b'{"result": {"header": {"revision": "20"}, "created": true}}') is None


def test_a_watch_line_that_says_compacted_canceled_or_error_raises_what_it_says() -> None:
    w = _watch()
    with pytest.raises(Compacted):
        w._parse(b'{"result": {"canceled": true, "compact_revision": "4"}}')
    with pytest.raises(Compacted):
        w._parse(b'{"result": {"compact_revision": "4"}}')
    with pytest.raises(StoreError, match="permission denied"):
        w._parse(b'{"error": {"grpc_code": 7, "message": "etcdserver: permission denied"}}')
    for garbled in (b"{not json", b'{"result": {"events": [{"kv": {"key": "%%%"}}]}}',
                    b'{"result": {"header": {"revision": "x"}}}'):
        with pytest.raises(Unavailable, match="garbled stream"):
            w._parse(garbled)
