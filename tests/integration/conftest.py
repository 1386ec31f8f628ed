"""Fixtures shared by integration modules: a secured etcd (mutual TLS, authentication,
scripts/etcd-secure.sh's users and roles)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from berth.store import EtcdConfig, Store
from berth_testkit.servers.etcd import ROOT, EtcdServer, ServerUnavailable, Tls, make_tls


@dataclass
class Secure:
    etcd: EtcdServer
    tls: Tls
    passwords: Path

    def env(self, user: str) -> dict[str, str]:
        return {"BERTH_ETCD": self.etcd.url, "BERTH_ETCD_CA": self.tls.ca,
                "BERTH_ETCD_CERT": self.tls.client_cert, "BERTH_ETCD_KEY": self.tls.client_key,
                "BERTH_ETCD_USER": user,
                "BERTH_ETCD_PASSWORD": (self.passwords / user).read_text().strip()}

    def store(self, user: str) -> Store:
        env = self.env(user)
        return Store(EtcdConfig(url=self.etcd.url, ca=self.tls.ca, cert=self.tls.client_cert,
                                key=self.tls.client_key, user=user,
                                password=env["BERTH_ETCD_PASSWORD"], timeout=5))

    def berth(self, user: str, *args: str, stdin: str | None = None) -> str:
        done = subprocess.run([sys.executable, "-m", "berth.cli.main", *args], input=stdin,
                              capture_output=True, text=True, timeout=60, cwd=ROOT,
                              env={**os.environ, **self.env(user)})
        assert done.returncode == 0, done.stderr
        return done.stdout + done.stderr


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secure]:
    tls = make_tls(tmp_path_factory.mktemp("tls"))
    try:
        etcd = EtcdServer(tls=tls, client_cert_auth=True).start()
    except ServerUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)
    passwords = tmp_path_factory.mktemp("passwords")
    env = {**os.environ, "ETCDCTL_ENDPOINTS": etcd.url, "ETCDCTL_CACERT": tls.ca,
           "ETCDCTL_CERT": tls.client_cert, "ETCDCTL_KEY": tls.client_key,
           "ETCDCTL": str(etcd.bindir / "etcdctl")}
    for _ in range(2):  # a second run changes nothing and succeeds
        done = subprocess.run(["bash", str(ROOT / "scripts/etcd-secure.sh"), str(passwords)],
                              env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
    assert oct(passwords.stat().st_mode)[-3:] == "700"
    yield Secure(etcd, tls, passwords)
    etcd.cleanup()


