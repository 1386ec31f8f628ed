"""The front door holds: README.md is short and its links lead somewhere, and no file
of the project points outside the repository. (``scripts/docs.sh``, run by the test
command, builds docs/ with every warning an error: a broken link there fails it.)"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINK = re.compile(r"\[[^\]]*\]\(([^)#\s]+)(#[^)\s]*)?\)")


def test_the_readme_is_short_and_its_links_lead_somewhere() -> None:
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 250
    targets = [m.group(1) for m in LINK.finditer(text) if "://" not in m.group(1)]
    assert "docs/index.md" in targets and "LICENSE" in targets
    missing = [t for t in targets if not (ROOT / t).exists()]
    assert not missing, missing


def test_no_file_points_outside_the_repository() -> None:
    """A relative path in a tracked file never climbs out of the checkout (a user of
    berth has only the repository)."""
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout.split()
    climb = re.compile(r"(?:\.\./)+[\w.-]+")
    found = []
    for name in tracked:
        path = ROOT / name
        if not path.is_file() or name.endswith((".png", ".db")):
            continue
        for m in climb.finditer(path.read_text(errors="replace")):
            target = (path.parent / m.group(0)).resolve()
            if not target.is_relative_to(ROOT):
                found.append(f"{name}: {m.group(0)}")
    assert not found, found


def test_a_module_over_600_lines_says_why_at_its_top() -> None:
    """docs/development.md's rule: a long module is split, or its docstring says why
    it is not."""
    long = []
    for folder in ("berth", "testkit", "scripts"):
        for path in (ROOT / folder).rglob("*.py"):
            text = path.read_text()
            if len(text.splitlines()) > 600 and "Over 600 lines" not in text.split('"""')[1]:
                long.append(str(path.relative_to(ROOT)))
    assert not long, long
