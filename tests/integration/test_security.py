"""TLS and etcd authentication against real etcd servers of their own."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from berth.store import EtcdConfig, Store, StoreError, Unauthorized, Unavailable, Watch, WatchEvent
from berth_testkit.servers.etcd import EtcdServer, make_tls


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    return make_tls(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def tls_etcd(tls) -> Iterator[EtcdServer]:  # type: ignore[no-untyped-def]
    server = EtcdServer(tls=tls, client_cert_auth=True).start()
    yield server
    server.cleanup()


def enable_auth(server: EtcdServer) -> None:
    server.etcdctl("user", "add", "root", "--new-user-password=rootpw")
    server.etcdctl("role", "add", "berth")
    server.etcdctl("role", "grant-permission", "berth", "--prefix=true", "readwrite", "/berth/")
    server.etcdctl("user", "add", "berth", "--new-user-password=berthpw")
    server.etcdctl("user", "grant-role", "berth", "berth")
    server.etcdctl("auth", "enable")


@pytest.fixture(scope="module")
def auth_etcd() -> Iterator[EtcdServer]:
    server = EtcdServer(extra=["--auth-token-ttl=2"]).start()
    enable_auth(server)
    yield server
    server.cleanup()


def test_tls_with_a_client_certificate(tls, tls_etcd: EtcdServer,  # type: ignore[no-untyped-def]
                                       monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # The machine-wide CA bundle variable must not override the CA we pass.
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(tmp_path / "no-such-bundle.pem"))
    s = Store(EtcdConfig(url=tls_etcd.url, ca=tls.ca, cert=tls.client_cert, key=tls.client_key))
    rev = s.create("/berth/v1/tls/a", b"secure")
    assert s.get("/berth/v1/tls/a").value == b"secure"  # type: ignore[union-attr]
    batch = next(iter(w := Watch(s, "/berth/v1/tls/", rev)))
    w.close()
    assert batch.events[0].value == b"secure"


def test_tls_without_the_ca_or_certificate_is_refused(tls, tls_etcd: EtcdServer) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(Unavailable):
        Store(EtcdConfig(url=tls_etcd.url, timeout=3)).get("/berth/v1/x")
    with pytest.raises(Unavailable):
        Store(EtcdConfig(url=tls_etcd.url, ca=tls.ca, timeout=3)).get("/berth/v1/x")


def test_auth_with_user_and_password(auth_etcd: EtcdServer) -> None:
    s = Store(EtcdConfig(url=auth_etcd.url, user="berth", password="berthpw"))
    s.create("/berth/v1/auth/a", b"1")
    assert s.get("/berth/v1/auth/a").value == b"1"  # type: ignore[union-attr]
    with pytest.raises(Unauthorized):
        s.get("/elsewhere")  # outside the role's prefix


def test_wrong_password_and_no_credentials_are_unauthorized(auth_etcd: EtcdServer) -> None:
    with pytest.raises(Unauthorized, match="authenticating as 'berth'"):
        Store(EtcdConfig(url=auth_etcd.url, user="berth", password="wrong"))
    with pytest.raises(Unauthorized):
        Store(EtcdConfig(url=auth_etcd.url)).get("/berth/v1/auth/a")


def test_an_expired_token_is_renewed(auth_etcd: EtcdServer) -> None:
    s = Store(EtcdConfig(url=auth_etcd.url, user="berth", password="berthpw"))
    start = s.revision() + 1
    seen: list[WatchEvent] = []
    watch = Watch(s, "/berth/v1/renew/", start, idle_timeout=1)

    def read() -> None:
        for batch in watch:
            seen.extend(batch.events)

    reader = threading.Thread(target=read)
    reader.start()
    s.create("/berth/v1/renew/a", b"1")
    time.sleep(3.5)  # the token's TTL is 2 s; the idle watch reconnects meanwhile
    s.create("/berth/v1/renew/b", b"2")  # succeeds after authenticating again
    deadline = time.monotonic() + 10
    while len(seen) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    watch.close()
    reader.join(5)
    assert [ev.key for ev in seen] == ["/berth/v1/renew/a", "/berth/v1/renew/b"]


def test_tls_and_auth_together_with_a_certificate_without_common_name(tls) -> None:  # type: ignore[no-untyped-def]
    server = EtcdServer(tls=tls, client_cert_auth=True).start()
    try:
        enable_auth(server)
        s = Store(EtcdConfig(url=server.url, ca=tls.ca, cert=tls.client_cert, key=tls.client_key,
                             user="berth", password="berthpw"))
        s.create("/berth/v1/both/a", b"1")
        assert s.get("/berth/v1/both/a") is not None
    except StoreError as exc:
        pytest.fail(f"TLS + auth failed: {exc}")
    finally:
        server.cleanup()
