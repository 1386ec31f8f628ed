"""A benchmark's scratch directory: its processes' configurations and logs, removed when
the run ends well and kept, named, when it does not (the logs say why).

    work = scratch("berth-x-bench-")   # in main()
    ...
    if __name__ == "__main__":
        run_bench(main)
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

_MADE: list[Path] = []


def scratch(prefix: str) -> Path:
    """A new directory under the system's temporary one, removed by :func:`run` if the
    run ends well."""
    made = Path(tempfile.mkdtemp(prefix=prefix))
    _MADE.append(made)
    return made


def run_bench(main: Callable[[], object]) -> None:
    """``main()``; then its scratch directories are removed, or, if it failed, named."""
    try:
        main()
    except BaseException:
        for made in _MADE:
            print(f"logs kept in {made}", file=sys.stderr, flush=True)
        raise
    for made in _MADE:
        shutil.rmtree(made, ignore_errors=True)


__all__ = ["run_bench", "scratch"]
