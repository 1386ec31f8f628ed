"""The setup a fresh machine runs: pins that resolve from the registries alone, and
setup steps that fail loudly.

A pin to a local file (a wheel in a temporary directory) resolves on the machine
that wrote it and nowhere else; a setup step whose failure bash swallowed printed
``ok`` and stamped the virtualenv as installed. Both passed CI on the machine that
had the file, so these tests resolve in a clean virtualenv with no cache and no
find-links, and run the step function itself on a failing command.
"""

from __future__ import annotations

import os
import re
import subprocess
import venv
from pathlib import Path

from berth_testkit.servers.etcd import ROOT

PIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*(\[[a-z0-9,_-]+\])?==[A-Za-z0-9.+!_-]+")


def test_every_constraint_is_a_plain_version_pin() -> None:
    lines = [line.split("#", 1)[0].strip()
             for line in (ROOT / "constraints.txt").read_text().splitlines()]
    odd = [line for line in lines if line and not PIN.fullmatch(line)]
    assert odd == [], f"constraints.txt must pin versions from the index only, not: {odd}"


def test_the_pins_resolve_from_the_registries_alone(tmp_path: Path) -> None:
    venv.create(tmp_path / "venv", with_pip=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env |= {"PIP_NO_CACHE_DIR": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    if "PIP_CERT" in os.environ:  # the machine's CA bundle, not a package source
        env["PIP_CERT"] = os.environ["PIP_CERT"]
    done = subprocess.run(
        [str(tmp_path / "venv" / "bin" / "python"), "-m", "pip", "install", "--isolated",
         "--dry-run", "--ignore-installed", "--no-cache-dir", "--quiet",
         "--report", str(tmp_path / "report.json"),
         "-c", str(ROOT / "constraints.txt"), f"{ROOT}[test,dev]"],
        env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    report = (tmp_path / "report.json").read_text()
    assert "file://" not in report.replace(f"file://{ROOT}", ""), \
        "something resolved to a local file"


def run_steps(tmp_path: Path, body: str) -> subprocess.CompletedProcess[str]:
    """The step function of scripts/setup.sh, as it is, run on ``body``."""
    setup = (ROOT / "scripts" / "setup.sh").read_text()
    step = re.search(r"^step\(\) \{.*?^\}$", setup, re.S | re.M)
    assert step is not None, "scripts/setup.sh defines step()"
    script = (f"set -euo pipefail\nsetup_log={tmp_path}/setup.log\n: >\"$setup_log\"\n"
              f"{step.group(0)}\n{body}\n")
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60)


def test_a_step_fails_when_any_command_in_it_fails(tmp_path: Path) -> None:
    done = run_steps(tmp_path, (
        "install() { echo fetching; false; echo 'installed anyway'; touch stamp; }\n"
        "step 'a step' install\n"
        "echo 'after the step'"))
    assert done.returncode != 0
    assert "setup: a step ... FAILED (exit 1)" in done.stderr
    assert "fetching" in done.stderr  # the log's tail is shown
    assert "installed anyway" not in done.stderr + done.stdout
    assert "after the step" not in done.stdout
    assert not Path("stamp").exists()


def test_a_step_that_succeeds_says_ok(tmp_path: Path) -> None:
    done = run_steps(tmp_path, "quiet() { echo to the log; }\nstep 'fine' quiet\necho next")
    assert done.returncode == 0, done.stderr
    assert re.search(r"setup: fine \.\.\. ok \(\d+ s\)", done.stderr)
    assert done.stdout == "next\n"
    assert "to the log" in (tmp_path / "setup.log").read_text()


def install_in(tmp_path: Path, pip_fails: bool) -> subprocess.CompletedProcess[str]:
    """install_python of scripts/setup.sh in a project of its own whose pip is a stand-in
    that records its calls (the resolving itself is the test above)."""
    setup = (ROOT / "scripts" / "setup.sh").read_text()
    body = re.search(r"^install_python\(\) \{.*?^\}$", setup, re.S | re.M)
    assert body is not None, "scripts/setup.sh defines install_python()"
    bindir = tmp_path / ".venv" / "bin"
    bindir.mkdir(parents=True, exist_ok=True)
    (bindir / "python").write_text("#!/bin/sh\n")
    (bindir / "pip").write_text(f"#!/bin/sh\necho pip >> {tmp_path}/calls\n"
                                f"exit {1 if pip_fails else 0}\n")
    for f in (bindir / "python", bindir / "pip"):
        f.chmod(0o755)
    script = f"set -euo pipefail\nhere={tmp_path}\n{body.group(0)}\ninstall_python\n"
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60)


def test_the_install_stamp_is_written_after_success_and_follows_the_pins(
        tmp_path: Path) -> None:
    (tmp_path / "constraints.txt").write_text("a==1\n")
    (tmp_path / "pyproject.toml").write_text("[project]\n")
    (tmp_path / "testkit").mkdir()
    (tmp_path / "testkit" / "pyproject.toml").write_text("[project]\n")
    stamp = tmp_path / ".venv" / ".berth-installed"
    calls = tmp_path / "calls"
    assert install_in(tmp_path, pip_fails=True).returncode != 0
    assert not stamp.exists()
    assert install_in(tmp_path, pip_fails=False).returncode == 0
    assert stamp.exists() and calls.read_text().count("pip") == 2
    assert install_in(tmp_path, pip_fails=False).returncode == 0
    assert calls.read_text().count("pip") == 2  # nothing changed: not installed again
    (tmp_path / "constraints.txt").write_text("a==2\n")
    assert install_in(tmp_path, pip_fails=True).returncode != 0
    assert not stamp.exists()  # a failed install leaves no stamp behind
    assert install_in(tmp_path, pip_fails=False).returncode == 0
    assert calls.read_text().count("pip") == 4
    (tmp_path / "testkit" / "pyproject.toml").write_text("[project]\nname = 'kit'\n")
    assert install_in(tmp_path, pip_fails=False).returncode == 0
    assert calls.read_text().count("pip") == 5  # the test kit's own pins count too
