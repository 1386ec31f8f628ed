"""The scheduler's hot path compiled with mypyc, used only when built from these sources.

``scripts/build-native.py`` (``scripts/setup.sh`` runs it) compiles
:data:`MODULES` into ``<repository>/build/native`` and writes a manifest with
the SHA-256 of every source of the package and of ``constraints.txt``.
:func:`install`, called by a process's entry before it imports any of them (the
``berth`` command for the processes and ``explain``; the suite's ``conftest``; a
benchmark), puts a finder before the others that loads those modules from there —
all of them or none, and only if nothing changed since the build and none of them
was imported already: compiled code can hold what it imported at
build time (a constant, a class's layout), and the compiled modules call each
other directly, so a mix could hold two versions of one class. One file
edited (or another checkout) and every module is plain Python again.
``BERTH_NATIVE=0`` leaves them out (py-spy sees no frames of compiled code).

A module-level constant read on the hot path is declared ``Final``: compiled
code reads it as a C global, any other module-level name by a lookup in the
module's dict, every time (``_BYTE_ORDINALS`` in ``ordinals``' inner loop,
``STEP`` in the rooms' columns). One a test changes stays a plain name
(``ranking.DENSE_FROM``): compiled code would not see the change.

Compiled or not, the modules do the same: they are the same source. What ships
(the image, the wheel, the systemd install) runs them plain, and so does the
whole suite; the unit tests run again on what setup built, the reference-
equivalence properties among them. :data:`STATUS` says which it is; each
process logs it when it starts and the benchmarks print it.
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

# What is compiled, and why each is (docs/development.md "The compiled hot path"):
# the kernels, where a decision computes (the fleet's bitsets, the evaluation and
# ranking, the rooms and standing, selection, the plugins, resource arithmetic);
# the scheduler's own per-application path (the loop and what it writes, its cache
# and what it keeps of each document); and the plumbing every event of the
# scheduler goes through (the informer, the key layout, the queues). Each group
# measured a gain of its own. A module listed here must compile with mypyc and
# behave the same compiled (the unit tests run on them).
KERNELS = (
    "berth.store.documents.resources",
    "berth.store.labels",
    "berth.controllers.scheduler.framework.evaluation",
    "berth.controllers.scheduler.framework.fleet",
    "berth.controllers.scheduler.framework.helpers.expressions",
    "berth.controllers.scheduler.framework.helpers.metric_columns",
    "berth.controllers.scheduler.framework.helpers.selectors",
    "berth.controllers.scheduler.framework.ranking",
    "berth.controllers.scheduler.framework.rooms",
    "berth.controllers.scheduler.framework.runner",
    "berth.controllers.scheduler.framework.selection",
    "berth.controllers.scheduler.framework.standing",
    "berth.controllers.scheduler.framework.state",
    "berth.controllers.scheduler.framework.status",
    "berth.controllers.scheduler.framework.types",
    "berth.controllers.scheduler.plugins.candidate_online",
    "berth.controllers.scheduler.plugins.capacity",
    "berth.controllers.scheduler.plugins.cluster_affinity",
    "berth.controllers.scheduler.plugins.failed_targets",
    "berth.controllers.scheduler.plugins.label_constraints",
    "berth.controllers.scheduler.plugins.metric_constraints",
    "berth.controllers.scheduler.plugins.metric_score",
    "berth.controllers.scheduler.plugins.placement_fixed",
    "berth.controllers.scheduler.plugins.taint_toleration",
    "berth.controllers.scheduler.plugins.topology_spread",
    "berth.controllers.scheduler.plugins.workload_affinity",
)
PER_APPLICATION = (
    "berth.controllers.scheduler.binder",
    "berth.controllers.scheduler.cache",
    "berth.controllers.scheduler.decide",
    "berth.controllers.scheduler.decisions",
    "berth.controllers.scheduler.outcome",
    "berth.controllers.scheduler.record",
    "berth.controllers.scheduler.roombook",
    "berth.controllers.scheduler.scheduler",
    "berth.controllers.scheduler.subjects",
    "berth.controllers.scheduler.sweep",
)
PLUMBING = (
    "berth.store.keys",
    "berth.store.ledger",
    "berth.controllers.runtime.informer",
    "berth.controllers.scheduler.queue.active",
    "berth.controllers.scheduler.queue.scheduling_queue",
)
MODULES = KERNELS + PER_APPLICATION + PLUMBING

STATUS = "not loaded"


def source(module: str) -> Path:
    """The source file of one of :data:`MODULES`."""
    return ROOT.joinpath(*module.split(".")).with_suffix(".py")


def digests() -> dict[str, str]:
    """The SHA-256 of each source of the package and of ``constraints.txt``, by path
    relative to the repository."""
    files = sorted((ROOT / "berth").rglob("*.py"))
    files += [c for c in (ROOT / "constraints.txt",) if c.exists()]
    return {str(f.relative_to(ROOT)): hashlib.sha256(f.read_bytes()).hexdigest()
            for f in files}


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
    if manifest.get("modules") != list(MODULES):
        return "built from another list of modules: build again"
    try:
        now = digests()
    except OSError as exc:
        return f"cannot read the sources: {exc}"
    built: dict[str, object] = manifest["sources"]
    changed = [f for f in sorted(now.keys() | built.keys()) if now.get(f) != built.get(f)]
    if changed:
        return f"stale: {changed[0]} changed since the build (build again)"
    files = {name: OUT / str(file) for name, file in manifest["files"].items()}
    if not {*MODULES, f"{GROUP}__mypyc"} <= files.keys() or not all(
            f.is_file() for f in files.values()):
        return "incomplete build: build again"
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        early = next((m for m in MODULES if m in sys.modules), None)
        if early is not None:  # loading the rest compiled would mix the two
            return f"not loaded: {early} was imported before (install first)"
        sys.meta_path.insert(0, _Finder(files))
    return f"in use ({len(MODULES)} modules compiled)"
