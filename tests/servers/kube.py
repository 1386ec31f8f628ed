"""A real Kubernetes API server on loopback, run as controller-runtime's envtest does.

``kube-apiserver`` is built from source by ``scripts/install-kube-apiserver.sh``
(cached in ``~/.cache/berth``) and runs with its own etcd (3.6: Debian's 3.4
is below what current Kubernetes supports), a secure port on 127.0.0.1, a
self-signed serving certificate, a static admin token (group
``system:masters``), and a service-account key and issuer. There are no
nodes and no controllers: objects are stored and served, which is all the
propagator needs. ``stop`` and ``start`` keep the port and the data.
"""

from __future__ import annotations

import base64
import secrets
import shutil
import ssl
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from tests.servers.etcd import (
    ROOT,
    EtcdServer,
    ServerUnavailable,
    free_port,
    stop_process,
    tail,
)

INSTALL = ROOT / "scripts" / "install-kube-apiserver.sh"
HOW = ("kube-apiserver is needed: run scripts/install-kube-apiserver.sh "
       "(builds it from source with Go, a few minutes the first time)")
_bindir: Path | None = None


def kube_bindir() -> Path:
    global _bindir
    if _bindir is None:
        try:
            out = subprocess.run(["bash", str(INSTALL)], check=True, capture_output=True,
                                 text=True, timeout=3600)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
            raise ServerUnavailable(
                f"{INSTALL.name} failed: {str(getattr(exc, 'stderr', ''))[-2000:]}\n{HOW}") from None
        _bindir = Path(out.stdout.strip().splitlines()[-1])
    return _bindir


class KubeApiServer:
    def __init__(self, name: str = "cluster") -> None:
        self.name = name
        self.binary = kube_bindir() / "kube-apiserver"
        self.workdir = Path(tempfile.mkdtemp(prefix=f"berth-kube-{name}-"))
        self.port = free_port()
        self.url = f"https://127.0.0.1:{self.port}"
        self.token = secrets.token_hex(16)
        (self.workdir / "tokens.csv").write_text(f'{self.token},admin,admin,"system:masters"\n')
        subprocess.run(["openssl", "genrsa", "-out", str(self.workdir / "sa.key"), "2048"],
                       check=True, capture_output=True)
        subprocess.run(["openssl", "rsa", "-in", str(self.workdir / "sa.key"), "-pubout",
                        "-out", str(self.workdir / "sa.pub")], check=True, capture_output=True)
        self.etcd = EtcdServer(progress_interval="5s").start()
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 90.0) -> KubeApiServer:
        if self.etcd.proc is None or self.etcd.proc.poll() is not None:
            self.etcd.start()
        w = self.workdir
        args = [
            str(self.binary), f"--etcd-servers={self.etcd.url}",
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
            f"--secure-port={self.port}", f"--cert-dir={w / 'certs'}",
            f"--token-auth-file={w / 'tokens.csv'}", "--authorization-mode=RBAC",
            f"--service-account-key-file={w / 'sa.pub'}",
            f"--service-account-signing-key-file={w / 'sa.key'}",
            "--service-account-issuer=https://kubernetes.default.svc",
            "--service-cluster-ip-range=10.0.0.0/16", "--allow-privileged=true",
            "--disable-admission-plugins=ServiceAccount", "--v=0",
        ]
        with open(w / "kube-apiserver.log", "ab") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ServerUnavailable(f"kube-apiserver exited:\n{self.log_tail()}")
            if self.ready():
                return self
            time.sleep(0.3)
        self.stop()
        raise ServerUnavailable(f"kube-apiserver not ready in {timeout}s:\n{self.log_tail()}")

    def ready(self) -> bool:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        req = urllib.request.Request(f"{self.url}/readyz",
                                     headers={"Authorization": f"Bearer {self.token}"})
        try:
            with urllib.request.urlopen(req, timeout=2, context=ctx) as r:
                return bool(r.status == 200)
        except OSError:
            return False

    def kubeconfig(self) -> dict[str, Any]:
        """A kubeconfig for berth's Cluster spec (the serving CA embedded)."""
        crt = (self.workdir / "certs" / "apiserver.crt").read_bytes()
        return {
            "apiVersion": "v1", "kind": "Config", "current-context": self.name,
            "clusters": [{"name": self.name, "cluster": {
                "server": self.url,
                "certificate-authority-data": base64.b64encode(crt).decode()}}],
            "users": [{"name": "admin", "user": {"token": self.token}}],
            "contexts": [{"name": self.name, "context": {"cluster": self.name,
                                                          "user": "admin"}}],
        }

    def log_tail(self) -> str:
        return tail(self.workdir / "kube-apiserver.log")

    def stop(self) -> None:
        stop_process(self.proc, timeout=20)

    def cleanup(self) -> None:
        self.stop()
        self.etcd.cleanup()
        shutil.rmtree(self.workdir, ignore_errors=True)
