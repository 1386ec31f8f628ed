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
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout.split()
    outside = re.compile(r"\.\./shared|DESIGN\.md|shared/seeds")
    found = [name for name in tracked if name != "tests/unit/test_docs.py"
             and (ROOT / name).is_file() and not name.endswith((".png", ".db"))
             and outside.search((ROOT / name).read_text(errors="replace"))]
    assert not found, found
