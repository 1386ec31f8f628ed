"""berth.native: the compiled hot path is used only when built from exactly these
sources, and the suite runs on it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from berth import native


def test_the_suite_runs_on_the_compiled_modules() -> None:
    """What setup built is what the tests exercise (BERTH_NATIVE=0 runs them plain)."""
    from berth.controllers.scheduler.framework import selection

    if native.STATUS.startswith("off"):
        assert selection.__file__.endswith(".py")
        return
    assert native.STATUS.startswith("in use"), (
        f"berth.native: {native.STATUS}; build with `.venv/bin/python scripts/build-native.py`"
        " (scripts/setup.sh does), or run with BERTH_NATIVE=0")
    assert not selection.__file__.endswith(".py"), selection.__file__


def manifest(out: Path, **change: object) -> None:
    files = {m: f"{m}.so" for m in (*native.MODULES, f"{native.GROUP}__mypyc")}
    doc: dict[str, object] = {"tag": sys.implementation.cache_tag,
                              "modules": list(native.MODULES),
                              "sources": native.digests(), "files": files}
    doc.update(change)
    out.mkdir(parents=True, exist_ok=True)
    for f in files.values():
        (out / f).write_bytes(b"")
    (out / native.MANIFEST).write_text(json.dumps(doc))


EDITED = "berth/controllers/scheduler/framework/fleet.py"


@pytest.mark.parametrize(("change", "said"), [
    ({"tag": "cpython-10"}, "built for another Python"),
    ({"modules": list(native.MODULES[:-1])}, "built from another list of modules"),
    ({"modules": 7}, "built from another list of modules"),
    ({"sources": {**native.digests(), EDITED: "0" * 64}}, f"stale: {EDITED} changed"),
    ({"sources": {**native.digests(), "berth/gone.py": "0" * 64}}, "stale: berth/gone.py"),
    ({"sources": {**native.digests(), EDITED: [1]}}, f"stale: {EDITED} changed"),
    ({"files": {native.MODULES[0]: "x.so"}}, "incomplete build"),
    ({"files": 7}, "unreadable manifest"),
    ({"sources": ["a"]}, "unreadable manifest"),
])
def test_a_build_that_does_not_match_is_not_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 change: dict[str, object], said: str) -> None:
    """Another Python, another list, any source of the package edited (compiled code
    may hold what it imported), a file missing, a manifest nobody wrote: every module
    stays plain, and the status says why."""
    monkeypatch.delenv("BERTH_NATIVE", raising=False)  # the suite may run with it 0
    monkeypatch.setattr(native, "OUT", tmp_path)
    manifest(tmp_path, **change)
    finders = list(sys.meta_path)
    assert said in native._install()
    assert sys.meta_path == finders


@pytest.mark.parametrize("content", [b"\xff\xfe garbage", b"[1, 2]", b"{"])
def test_a_garbage_manifest_is_said_not_raised(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               content: bytes) -> None:
    monkeypatch.delenv("BERTH_NATIVE", raising=False)
    monkeypatch.setattr(native, "OUT", tmp_path)
    (tmp_path / native.MANIFEST).write_bytes(content)
    assert native._install().startswith("unreadable manifest")


def test_not_built_and_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BERTH_NATIVE", raising=False)
    monkeypatch.setattr(native, "OUT", tmp_path / "nothing")
    assert native._install().startswith("not built")
    manifest(tmp_path)
    monkeypatch.setattr(native, "OUT", tmp_path)
    monkeypatch.setenv("BERTH_NATIVE", "0")
    assert native._install() == "off (BERTH_NATIVE=0)"


def _python(code: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != "BERTH_NATIVE"}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, env=env).stdout.strip()


def test_importing_berth_loads_nothing_compiled() -> None:
    """The process's entry decides (``berth.cli.main``, conftest, a benchmark): importing
    berth hashes no source and puts no finder in place."""
    said = _python("import sys, berth.store.keys, berth.native as n; "
                   "print(n.STATUS, any(type(f).__name__ == '_Finder' for f in sys.meta_path))")
    assert said == "not loaded False"


def test_a_module_imported_before_install_keeps_every_module_plain(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Loading the others compiled after one was imported plain would mix the two."""
    monkeypatch.delenv("BERTH_NATIVE", raising=False)
    monkeypatch.setattr(native, "OUT", tmp_path)
    manifest(tmp_path)  # a build that matches
    monkeypatch.setattr(sys, "meta_path", [f for f in sys.meta_path
                                           if not isinstance(f, native._Finder)])
    finders = list(sys.meta_path)
    said = native._install()  # this process has imported some of them already
    assert said.startswith("not loaded: berth.") and said.endswith(
        " was imported before (install first)"), said
    assert sys.meta_path == finders


@pytest.mark.parametrize(("status", "compiled"), [
    ("in use (41 modules compiled)", True), ("off (BERTH_NATIVE=0)", False)])
def test_a_benchmark_measures_the_build_or_plain_python_on_purpose(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], status: str,
        compiled: bool) -> None:
    from berth_testkit import compiled as benchmark

    monkeypatch.setattr(native, "_install", lambda: status)
    monkeypatch.setattr(native, "STATUS", native.STATUS)  # install() sets it
    monkeypatch.setattr(benchmark, "_SAID", [])
    assert benchmark.load() is compiled
    assert benchmark.load() is compiled  # a benchmark importing another's helpers
    assert capsys.readouterr().out == f"berth.native: {status}\n"


@pytest.mark.parametrize("status", [
    f"stale: {EDITED} changed since the build (build again)", "not built (scripts/build-native.py)",
    "not loaded: berth.store.keys was imported before (install first)"])
def test_a_benchmark_refuses_a_build_its_processes_would_not_use(
        monkeypatch: pytest.MonkeyPatch, status: str) -> None:
    """Its processes would run plain Python, a third slower, behind one line of output."""
    from berth_testkit import compiled as benchmark

    monkeypatch.setattr(native, "_install", lambda: status)
    monkeypatch.setattr(native, "STATUS", native.STATUS)
    with pytest.raises(SystemExit) as exited:
        benchmark.load()
    said = str(exited.value.code)
    assert said.startswith(f"berth.native: {status}.")
    assert "scripts/build-native.py" in said and "BERTH_NATIVE=0" in said
