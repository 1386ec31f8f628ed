"""The ``berth`` command run in-process, as the tests that read its output call it."""

from __future__ import annotations

import contextlib
import io


def berth(*argv: str) -> tuple[int, str]:
    """Run ``berth ARGV...`` in this process: its exit code and standard output."""
    from berth.cli.main import main  # the CLI's imports only when a test runs it

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(list(argv))
    return code, out.getvalue()


__all__ = ["berth"]
