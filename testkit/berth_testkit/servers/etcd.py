"""A real etcd for tests and benchmarks, on free loopback ports.

The binary comes from ``$BERTH_ETCD_BIN`` (a directory holding ``etcd`` and
``etcdctl``) or from ``scripts/install-etcd.sh`` (built once from source into
``~/.cache/berth``, falling back to Debian's etcd-server). If neither works,
the caller gets an error that says how to install etcd.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import socket
import ssl
import subprocess
import tempfile
import threading
import time
import urllib.request
import weakref
from dataclasses import dataclass
from pathlib import Path

from berth_testkit.servers.launch import spawn

ROOT = Path(__file__).resolve().parents[3]  # the checkout (the kit is installed editable)
INSTALL = ROOT / "scripts" / "install-etcd.sh"
HOW = (
    "etcd is needed: run scripts/install-etcd.sh (builds etcd from source with Go and "
    "caches it in ~/.cache/berth), or `apt-get install etcd-server`, or set BERTH_ETCD_BIN "
    "to a directory holding etcd and etcdctl"
)


def stop_process(proc: subprocess.Popen[bytes] | None, timeout: float = 10.0) -> None:
    """Terminate ``proc`` (if running), killing it if it does not exit in ``timeout``."""
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        kill_process(proc)


def kill_process(proc: subprocess.Popen[bytes] | None) -> None:
    if proc is not None and proc.poll() is None:
        proc.kill()
        proc.wait()


def tail(path: Path, lines: int = 30) -> str:
    """The last ``lines`` of a server's log, for error messages."""
    if not path.exists():
        return ""
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


class ServerUnavailable(RuntimeError):
    """A real server the tests need could not be started; the message says how to get it."""


_given: set[int] = set()  # every port free_port has handed out in this process
_giving = threading.Lock()


def _slice(first: int, last: int) -> tuple[int, int]:
    """This worker's share of the ports [first, last): the whole range outside pytest-xdist
    (and in any process a worker starts, which inherits its variables)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    try:
        count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
        index = int(worker.removeprefix("gw")) if worker else 0
    except ValueError:
        return first, last
    if count <= 1 or not 0 <= index < count:
        return first, last
    span = (last - first) // count
    return first + index * span, first + (index + 1) * span


def free_port() -> int:
    """A free loopback port below the kernel's ephemeral range, never one handed out before.

    A port the kernel hands out (bind to 0) is also one it may give, moments
    later, to some outgoing connection as its local port, before the server we
    start has bound it; ports below the ephemeral range are never used so. A port
    is only free until its server binds it: servers whose ports are picked
    together (an etcd cluster's members, each with a client and a peer port) must
    not be handed the same one, as a fault-table run once was. The suite's workers
    side by side (pytest-xdist) each pick from a slice of their own.
    """
    low = 32768
    with contextlib.suppress(OSError, ValueError, IndexError):
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    first, last = _slice(10000, max(10001, low))
    with _giving:
        for _ in range(100):
            port = random.randrange(first, last)
            if port in _given:
                continue
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    continue
            _given.add(port)
            return port
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        _given.add(port)
        return port


_bindir: Path | None = None


def etcd_bindir() -> Path:
    """The directory with etcd and etcdctl, building or installing them if needed."""
    global _bindir
    if _bindir is not None:
        return _bindir
    env = os.environ.get("BERTH_ETCD_BIN")
    if env:
        path = Path(env)
        if not (path / "etcd").exists():
            raise ServerUnavailable(f"BERTH_ETCD_BIN={env} holds no etcd binary. {HOW}")
        _bindir = path
        return path
    try:
        out = subprocess.run(["bash", str(INSTALL)], check=True, capture_output=True, text=True,
                             timeout=1800)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        stderr = getattr(exc, "stderr", "") or ""
        raise ServerUnavailable(f"{INSTALL.name} failed: {stderr[-2000:]}\n{HOW}") from None
    _bindir = Path(out.stdout.strip().splitlines()[-1])
    return _bindir


def etcd_version(bindir: Path) -> tuple[int, int]:
    out = subprocess.run([str(bindir / "etcd"), "--version"], capture_output=True, text=True)
    first = out.stdout.split("\n", 1)[0]  # "etcd Version: 3.6.16"
    major, minor = first.rsplit(" ", 1)[-1].split(".")[:2]
    return int(major), int(minor)


@dataclass
class Tls:
    """Files for a TLS etcd: CA, server pair, and a client pair (without a CN)."""

    ca: str
    server_cert: str
    server_key: str
    client_cert: str
    client_key: str


def make_tls(directory: Path) -> Tls:
    """A throwaway CA, a server certificate for 127.0.0.1 and a client certificate."""
    d = directory

    def run(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=d)

    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/O=berth test CA",
        "-keyout", "ca.key", "-out", "ca.crt")
    (d / "server.ext").write_text(
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n")
    (d / "client.ext").write_text("extendedKeyUsage=clientAuth\n")
    for name, subj in (("server", "/CN=localhost"), ("client", "/O=berth clients")):
        run("req", "-newkey", "rsa:2048", "-nodes", "-subj", subj,
            "-keyout", f"{name}.key", "-out", f"{name}.csr")
        run("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
            "-CAcreateserial", "-days", "2", "-extfile", f"{name}.ext", "-out", f"{name}.crt")
    return Tls(str(d / "ca.crt"), str(d / "server.crt"), str(d / "server.key"),
               str(d / "client.crt"), str(d / "client.key"))


class EtcdServer:
    """One etcd member; ``restart`` keeps its ports and data. Its data directory goes
    with :meth:`cleanup`, or when the object does (at the latest, as the process
    exits: a benchmark that only stopped it left a data directory per run)."""

    def __init__(self, *, tls: Tls | None = None, client_cert_auth: bool = False,
                 progress_interval: str = "1s", extra: list[str] | None = None,
                 name: str = "default") -> None:
        self.bindir = etcd_bindir()
        self.name = name
        self.initial_cluster = ""  # set by EtcdCluster; alone, the member is its cluster
        self.tls = tls
        self.client_cert_auth = client_cert_auth
        self.progress_interval = progress_interval
        self.extra = extra or []
        self.workdir = Path(tempfile.mkdtemp(prefix="berth-etcd-"))
        weakref.finalize(self, shutil.rmtree, self.workdir, True)
        self.port = free_port()
        self.peer_port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        scheme = "https" if tls else "http"
        self.url = f"{scheme}://127.0.0.1:{self.port}"

    def args(self) -> list[str]:
        peer = self.peer_url
        notify = ("--watch-progress-notify-interval" if etcd_version(self.bindir) >= (3, 6)
                  else "--experimental-watch-progress-notify-interval")
        args = [
            str(self.bindir / "etcd"), "--name", self.name,
            "--data-dir", str(self.workdir / "data"),
            "--listen-client-urls", self.url, "--advertise-client-urls", self.url,
            "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
            "--initial-cluster", self.initial_cluster or f"{self.name}={peer}",
            f"{notify}={self.progress_interval}", "--log-level", "warn",
            *self.extra,
        ]
        if self.tls:
            args += ["--cert-file", self.tls.server_cert, "--key-file", self.tls.server_key,
                     "--trusted-ca-file", self.tls.ca]
            if self.client_cert_auth:
                args.append("--client-cert-auth")
        return args

    @property
    def peer_url(self) -> str:
        return f"http://127.0.0.1:{self.peer_port}"

    def launch(self) -> None:
        """Start the process without waiting (a cluster's members start together)."""
        with open(self.workdir / "etcd.log", "ab") as log:  # the child keeps its own copy
            self.proc = spawn(self.args(), stdout=log, stderr=subprocess.STDOUT)

    def start(self, timeout: float = 30.0) -> EtcdServer:
        self.launch()
        return self.wait(timeout)

    def wait(self, timeout: float = 30.0) -> EtcdServer:
        """Wait until the member says it is healthy (for a member: its cluster has quorum)."""
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ServerUnavailable(f"etcd exited at start:\n{self.log_tail()}")
            if self._healthy():
                return self
            time.sleep(0.1)
        self.kill()
        raise ServerUnavailable(f"etcd did not become healthy in {timeout}s:\n{self.log_tail()}")

    def _healthy(self) -> bool:
        ctx = None
        if self.tls:
            ctx = ssl.create_default_context(cafile=self.tls.ca)
            ctx.load_cert_chain(self.tls.client_cert, self.tls.client_key)
        try:
            with urllib.request.urlopen(f"{self.url}/health", timeout=1, context=ctx) as r:
                return bool(r.status == 200)
        except OSError:
            return False

    def log_tail(self) -> str:
        return tail(self.workdir / "etcd.log")

    def stop(self) -> None:
        stop_process(self.proc)

    def kill(self) -> None:
        kill_process(self.proc)

    def restart(self) -> None:
        self.stop()
        self.start()

    def etcdctl(self, *args: str) -> str:
        cmd = [str(self.bindir / "etcdctl"), "--endpoints", self.url]
        if self.tls:
            cmd += ["--cacert", self.tls.ca, "--cert", self.tls.client_cert,
                    "--key", self.tls.client_key]
        out = subprocess.run([*cmd, *args], check=True, capture_output=True, text=True,
                             timeout=30)
        return out.stdout

    def cleanup(self) -> None:
        self.kill()
        shutil.rmtree(self.workdir, ignore_errors=True)


class EtcdCluster:
    """Three (or ``size``) etcd members on loopback, one cluster: kill one and the
    others keep quorum. ``url`` lists every member's client URL, comma-separated, the
    way ``--etcd`` takes them."""

    def __init__(self, size: int = 3, **member_options: object) -> None:
        self.members = [EtcdServer(name=f"m{i}", **member_options)  # type: ignore[arg-type]
                        for i in range(size)]
        initial = ",".join(f"{m.name}={m.peer_url}" for m in self.members)
        for m in self.members:
            m.initial_cluster = initial
        self.url = ",".join(m.url for m in self.members)

    def start(self, timeout: float = 60.0) -> EtcdCluster:
        for m in self.members:
            if m.proc is None or m.proc.poll() is not None:
                m.launch()
        for m in self.members:
            m.wait(timeout)
        return self

    def stop(self) -> None:
        for m in self.members:
            m.stop()

    def restart(self) -> None:
        """Every member stopped, then all started again (the whole cluster down)."""
        self.stop()
        self.start()

    def leader(self) -> EtcdServer:
        """The member that leads the raft group now."""
        for m in self.members:
            if m.proc is None or m.proc.poll() is not None:
                continue
            status = json.loads(m.etcdctl("endpoint", "status", "-w", "json"))
            head = status[0]["Status"]
            if int(head["leader"]) == int(head["header"]["member_id"]):
                return m
        raise AssertionError("no etcd member leads")

    def etcdctl(self, *args: str) -> str:
        live = next(m for m in self.members if m.proc is not None and m.proc.poll() is None)
        return live.etcdctl(*args)

    def cleanup(self) -> None:
        for m in self.members:
            m.cleanup()
