"""The scheduler's hot path compiled with mypyc, used only when built from these sources.

``scripts/build-native.py`` (``scripts/setup.sh`` runs it) compiles
:data:`MODULES` into ``<repository>/build/native`` and writes a manifest with
each source's SHA-256. :func:`install`, run when :mod:`berth` is imported,
puts a finder before the others that loads those modules from there — all of
them or none: if one source differs from the one compiled (edited since, or
checked out anew), every module is plain Python again. The compiled modules
call each other directly, so a mix could hold two versions of one class.
``BERTH_NATIVE=0`` leaves them out (py-spy sees no frames of compiled code).

Compiled or not, the modules do the same: they are the same source, and the
suite runs on what setup built. :data:`STATUS` says which it is; the scheduler
logs it when it starts and the benchmarks print it.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "build" / "native"
MANIFEST = "manifest.json"
GROUP = "berth_native"  # the shared library's name (mypyc's group)

# What a decision runs through, module by module. A module listed here must
# compile with mypyc and behave the same compiled (tests run on both).
MODULES = (
    "berth.store.keys",
    "berth.controllers.scheduler.framework.fleet",
    "berth.controllers.scheduler.framework.ranking",
    "berth.controllers.scheduler.framework.runner",
    "berth.controllers.scheduler.framework.status",
    "berth.controllers.scheduler.decide",
    "berth.controllers.scheduler.decisions",
    "berth.controllers.scheduler.selection",
)

STATUS = "not loaded"


def source(module: str) -> Path:
    """The source file of one of :data:`MODULES`."""
    return ROOT.joinpath(*module.split(".")).with_suffix(".py")


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class _Finder(importlib.abc.MetaPathFinder):
    """Finds the compiled modules (and their shared library) in the build."""

    def __init__(self, files: dict[str, Path]) -> None:
        self.files = files

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        file = self.files.get(fullname)
        if file is None:
            return None
        return importlib.util.spec_from_file_location(fullname, file)


def install() -> str:
    """Load :data:`MODULES` compiled from now on, if the build matches the sources; says
    why not otherwise (and sets :data:`STATUS`)."""
    global STATUS
    STATUS = _install()
    return STATUS


def _install() -> str:
    if os.environ.get("BERTH_NATIVE", "1") == "0":
        return "off (BERTH_NATIVE=0)"
    try:
        manifest = json.loads((OUT / MANIFEST).read_text())
    except FileNotFoundError:
        return "not built (scripts/build-native.py)"
    except (OSError, ValueError) as exc:
        return f"unreadable manifest {OUT / MANIFEST}: {exc}"
    if not isinstance(manifest, dict) or not isinstance(manifest.get("sources"), dict) or (
            not isinstance(manifest.get("files"), dict)):
        return f"unreadable manifest {OUT / MANIFEST}: not one build-native.py writes"
    if manifest.get("tag") != sys.implementation.cache_tag:
        return f"built for another Python than {sys.implementation.cache_tag}: build again"
    built: dict[str, str] = manifest["sources"]
    if sorted(built) != sorted(MODULES):
        return "built from another list of modules: build again"
    for module, want in built.items():
        try:
            if digest(source(module)) != want:
                return f"stale: {module} changed since the build (build again)"
        except OSError:
            return f"stale: {module} is gone"
    files = {name: OUT / str(file) for name, file in manifest["files"].items()}
    if not {*MODULES, f"{GROUP}__mypyc"} <= files.keys() or not all(
            f.is_file() for f in files.values()):
        return "incomplete build: build again"
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder(files))
    return f"in use ({len(MODULES)} modules compiled)"
