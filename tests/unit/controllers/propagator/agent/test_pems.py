"""The agent's own certificate and key: readable here, by nobody else, gone with the
process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from berth.controllers.propagator.agent.pems import pem_files


def test_the_pair_is_read_here_under_the_same_names_after_a_renewal() -> None:
    cert, key = pem_files("default/one", "CERT 1", "KEY 1")
    assert (Path(cert).read_text(), Path(key).read_text()) == ("CERT 1", "KEY 1")
    assert pem_files("default/one", "CERT 2", "KEY 1") == (cert, key)
    assert (Path(cert).read_text(), Path(key).read_text()) == ("CERT 2", "KEY 1")
    other = pem_files("default/two", "CERT 3", "KEY 3")
    assert other != (cert, key) and Path(other[0]).read_text() == "CERT 3"
    assert Path(cert).read_text() == "CERT 2"
    # another process, given the names, finds nothing of them (its own descriptors)
    seen = subprocess.run([sys.executable, "-c", f"print(open({key!r}).read())"],
                          capture_output=True, text=True, check=False)
    assert "KEY 1" not in seen.stdout


def test_without_memory_files_a_directory_of_its_own_holds_them_until_exit() -> None:
    script = ("import os, sys\n"
              "del os.memfd_create\n"
              "from pathlib import Path\n"
              "from berth.controllers.propagator.agent.pems import pem_files\n"
              "cert, key = pem_files('default/one', 'CERT 1', 'KEY 1')\n"
              "cert, key = pem_files('default/one', 'CERT 2', 'KEY 2')\n"
              "assert Path(cert).read_text() == 'CERT 2' and Path(key).read_text() == 'KEY 2'\n"
              "assert oct(Path(key).parent.stat().st_mode & 0o777) == '0o700'\n"
              "print(Path(key).parent)\n")
    ran = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=False)
    assert ran.returncode == 0, ran.stderr
    where = Path(ran.stdout.strip())
    assert where.name.startswith("berth-agent-") and not where.exists()
