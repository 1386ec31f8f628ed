"""The agent's own client certificate and key, as files no other process opens and
none outlives.

TLS reads a client certificate from a path. Once ``berth cluster approve`` signed one
for the agent, its credential holds the pair whole; a connection needs them as files.
They are anonymous memory files (``memfd_create``), named through ``/proc/self/fd``:
nothing of them reaches a disk, and they are gone with the process however it ends (a
directory under /tmp, as before, outlived every agent that was stopped or killed, the
key in it). A renewal puts the new pair behind the same names at once (``dup2``): a
connection opened later reads the renewed one.

Where the system has no memory files (not Linux, or a sandbox refusing the call), a
directory of the process's own (mode 0700) holds them, removed when the process exits.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import threading
from pathlib import Path

_LOCK = threading.Lock()  # the two below
_HELD: dict[str, tuple[int, int]] = {}  # cluster → its certificate's and key's descriptors
_DIRECTORY: list[Path] = []  # without memory files: the process's directory, made once


def pem_files(cluster: str, cert_pem: str, key_pem: str) -> tuple[str, str]:
    """Paths this process alone reads ``cluster``'s certificate and key from: the same
    paths for the same cluster each time, holding what was given last."""
    with _LOCK:
        if hasattr(os, "memfd_create") and os.path.isdir("/proc/self/fd"):
            try:
                return _in_memory(cluster, cert_pem, key_pem)
            except OSError:  # a sandbox that refuses the call: the directory, then
                pass
        return _in_directory(cluster, cert_pem, key_pem)


def _in_memory(cluster: str, cert_pem: str, key_pem: str) -> tuple[str, str]:
    held = _HELD.get(cluster)
    made = [os.memfd_create(f"berth-agent-{what}", os.MFD_CLOEXEC) for what in ("cert", "key")]
    fds = []
    for i, (fd, text) in enumerate(zip(made, (cert_pem, key_pem), strict=True)):
        with open(fd, "w", closefd=False) as f:
            f.write(text)
        if held is not None:  # whole or not at all, as a connection opens it
            os.dup2(fd, held[i], inheritable=False)
            os.close(fd)
            fd = held[i]
        fds.append(fd)
    _HELD[cluster] = (fds[0], fds[1])
    return f"/proc/self/fd/{fds[0]}", f"/proc/self/fd/{fds[1]}"


def _in_directory(cluster: str, cert_pem: str, key_pem: str) -> tuple[str, str]:
    if not _DIRECTORY:
        _DIRECTORY.append(Path(tempfile.mkdtemp(prefix="berth-agent-")))
        atexit.register(shutil.rmtree, _DIRECTORY[0], True)
    base = _DIRECTORY[0] / cluster.replace("/", "_")
    paths = []
    for suffix, text in ((".crt", cert_pem), (".key", key_pem)):
        fd, tmp = tempfile.mkstemp(dir=_DIRECTORY[0])
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, f"{base}{suffix}")  # whole or not at all, as a connection reads it
        paths.append(f"{base}{suffix}")
    return paths[0], paths[1]


__all__ = ["pem_files"]
