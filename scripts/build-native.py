"""Compile the scheduler's hot path (``berth.native.MODULES``) with mypyc into
``build/native``, unless it holds them compiled from these sources already.

    .venv/bin/python scripts/build-native.py

``scripts/setup.sh`` runs it; any failure (no C compiler, a module mypyc
cannot compile) fails that step. Berth runs without the build, only slower:
see berth/native.py for when the compiled modules are used.
"""

from __future__ import annotations

import importlib.machinery
import json
import os
import shutil
import sys
import tempfile
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's berth

from berth import native


def build() -> None:
    wanted = {"tag": sys.implementation.cache_tag, "modules": list(native.MODULES),
              "sources": native.digests()}
    try:
        old = json.loads((native.OUT / native.MANIFEST).read_text())
        if all(old.get(k) == v for k, v in wanted.items()):
            print(f"build-native: {len(native.MODULES)} modules already compiled from"
                  " these sources")
            return
    except (OSError, ValueError, AttributeError):
        pass
    from mypyc.build import mypycify
    from setuptools import setup

    native.OUT.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=native.OUT.parent) as tmp:
        work = Path(tmp)
        os.chdir(native.ROOT)  # mypy reads its configuration (pyproject.toml) from here
        paths = [str(native.source(m).relative_to(native.ROOT)) for m in native.MODULES]
        extensions = mypycify(paths, opt_level="3", target_dir=str(work / "c"),
                              group_name=native.GROUP)
        with warnings.catch_warnings():  # setuptools on pyproject.toml's [tool.setuptools]
            warnings.simplefilter("ignore")
            setup(name="berth-native", ext_modules=extensions, py_modules=[], packages=[],
                  script_args=["--quiet", "build_ext", "--build-lib", str(work / "lib"),
                               "--build-temp", str(work / "obj")])
        suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
        files = {".".join(so.relative_to(work / "lib").parts)[: -len(suffix)]:
                 str(so.relative_to(work / "lib"))
                 for so in (work / "lib").rglob(f"*{suffix}")}
        missing = [m for m in native.MODULES if m not in files]
        if missing:
            raise SystemExit(f"build-native: the build made no module for {missing}")
        (work / "lib" / native.MANIFEST).write_text(json.dumps(
            {**wanted, "files": files}, indent=1, sort_keys=True))
        shutil.rmtree(native.OUT, ignore_errors=True)
        (work / "lib").rename(native.OUT)
    print(f"build-native: compiled {len(native.MODULES)} modules into {native.OUT}")


if __name__ == "__main__":
    build()
