"""The watch's line splitter: every line whole, however etcd's chunks cut it."""

from __future__ import annotations

import random

from berth.store.watch import _lines


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
