"""An agent joins berth, keeps its credential, and renews it (docs/agents.md).

* :func:`identity`: the cluster's identity, its ``kube-system`` namespace's uid
  (as Karmada's and OCM's agents use): a second cluster asking for a name
  already joined has another, and is refused.
* :func:`trusted_ca`: etcd's CA, found in its TLS handshake and trusted only if
  its hash is the one ``berth cluster token create`` printed (as ``kubeadm
  join --discovery-token-ca-cert-hash``), or a CA file given and checked.
* :func:`join`: a password made here, its bcrypt hash sent as the request (the
  password never leaves the agent), and the answer awaited; the credential is
  written to a file of its own (mode 0600) that ``berth agent --credentials``
  reads.
* :class:`Renewal`: with a quarter of the credential's life left, the agent
  asks again with a new password's hash, at its renewal key (which its own user
  alone may write: what proves the renewal is its); once etcd takes the new password
  (``berth cluster approve --watch`` approved it), the agent uses it and keeps
  it where its credential is kept (a file, or a Secret of its own cluster).
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
import secrets
import socket
import ssl
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

import msgspec

from berth.controllers.propagator.agent.pems import pem_files
from berth.controllers.propagator.kube import Connection, Unavailable
from berth.store import EtcdConfig, Put, Store, StoreError, Unauthorized, certs, encode, keys
from berth.store import agents as reg
from berth.store.auth import hashed
from berth.store.documents import KubeObjectRef, StatusMeta
from berth.store.documents.registration import JoinRequest, Registration

log = logging.getLogger(__name__)


class JoinError(Exception):
    """Joining failed; the message says why and what to do."""


def identity(kubeconfig: dict[str, Any], timeout: float = 10.0) -> str:
    """The uid of the cluster's ``kube-system`` namespace."""
    conn = Connection(kubeconfig, timeout)
    try:
        ns = conn.get(KubeObjectRef("v1", "Namespace", "kube-system"))
    except Unavailable as exc:
        raise JoinError(f"the cluster did not answer: {exc}") from exc
    finally:
        conn.close()
    if ns is None or not ns.metadata.uid:
        raise JoinError("the cluster has no kube-system namespace to identify it by")
    return ns.metadata.uid


def _pem(der: bytes) -> str:
    lines = base64.encodebytes(der).decode().replace("\n", "")
    body = "\n".join(lines[i:i + 64] for i in range(0, len(lines), 64))
    return f"-----BEGIN CERTIFICATE-----\n{body}\n-----END CERTIFICATE-----\n"


def _der_of(pem: str) -> bytes:
    begin, end = "-----BEGIN CERTIFICATE-----", "-----END CERTIFICATE-----"
    if begin not in pem:
        raise JoinError("no certificate in the CA file")
    return base64.b64decode("".join(pem.split(begin, 1)[1].split(end, 1)[0].split()))


def _hash(der: bytes) -> str:
    return "sha256:" + hashlib.sha256(der).hexdigest()


def trusted_ca(endpoint: str, ca_hash: str | None, ca_file: str | None, write_to: Path
               ) -> str | None:
    """The CA file to trust etcd with (None: plain http). A CA file given is checked
    against ``ca_hash``; without one, the certificates etcd shows in its handshake are
    searched for the one with that hash (etcd's ``--cert-file`` then holds the
    server's certificate followed by its CA), which is written to ``write_to``."""
    parts = urlsplit(endpoint)
    if parts.scheme != "https":
        return None
    if ca_file:
        if ca_hash and _hash(_der_of(Path(ca_file).read_text())) != ca_hash:
            raise JoinError(f"{ca_file}: its hash is not {ca_hash}: not the CA the token was "
                            "minted for")
        return ca_file
    if not ca_hash:
        raise JoinError("etcd speaks TLS: give --ca-hash (berth cluster token create prints "
                        "it) or --etcd-ca FILE")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE  # nothing is sent before the CA is checked below
    with socket.create_connection((parts.hostname or "", parts.port or 2379), timeout=10) as raw, \
            ctx.wrap_socket(raw) as tls:
        # Python 3.13 names it get_unverified_chain(); 3.11 has it on the SSL object.
        sslobj: Any = getattr(tls, "_sslobj", None)
        chain = sslobj.get_unverified_chain() if sslobj is not None else []
    for cert in chain:
        der = cert.public_bytes(ssl._ssl.ENCODING_DER)  # type: ignore[attr-defined]
        if _hash(der) == ca_hash:
            write_to.write_text(_pem(der))
            return str(write_to)
    raise JoinError(f"etcd at {endpoint} shows no certificate with hash {ca_hash} among "
                    f"its {len(chain)}: give the CA file with --etcd-ca (its hash is "
                    "checked)")


@dataclass(frozen=True, slots=True)
class Credentials:
    """What ``berth agent join`` writes and ``berth agent --credentials`` reads: the
    etcd user and password, and the TLS files given to join with — or, once
    ``berth cluster approve`` signed one, the agent's own client certificate and
    key, held here whole (a Secret keeps them as a file does)."""

    cluster: str
    endpoints: str
    user: str
    password: str
    identity: str
    ca: str | None = None
    cert: str | None = None
    key: str | None = None
    cert_pem: str = ""
    key_pem: str = ""

    def config(self) -> EtcdConfig:
        """The connection's settings; the agent's own certificate as files only this
        process reads (``pems.py``: the same names again after a renewal, so a new
        connection takes the renewed one)."""
        cert, key = self.cert, self.key
        if self.cert_pem and self.key_pem:
            cert, key = pem_files(self.cluster, self.cert_pem, self.key_pem)
        return EtcdConfig(url=self.endpoints, ca=self.ca, cert=cert, key=key,
                          user=self.user, password=self.password)

    def save(self, path: Path) -> None:
        FileKeeper(path).save(self)

    @classmethod
    def load(cls, path: Path) -> Credentials:
        return FileKeeper(path).load()


class Keeper(Protocol):
    """Where an agent's credential is kept between runs (renewal writes it there)."""

    where: str

    def load(self) -> Credentials: ...

    def save(self, made: Credentials) -> None: ...


class FileKeeper:
    """A file of its own, written whole or not at all, readable by its owner alone."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.where = str(path)

    def load(self) -> Credentials:
        try:
            return msgspec.json.decode(self.path.read_bytes(), type=Credentials)
        except (OSError, msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise ValueError(f"--credentials {self.path}: {exc}") from None

    def save(self, made: Credentials) -> None:
        path = self.path
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(msgspec.to_builtins(made), f, indent=1)
            os.chmod(tmp, 0o600)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


SECRET_KEY = "credentials.json"


class SecretKeeper:
    """A Kubernetes Secret in the agent's own cluster (``credentials.json``), read and
    written with the agent's service account: a Pod's files are gone with it, and a
    renewed password must outlive the Pod that renewed it."""

    def __init__(self, kubeconfig: dict[str, Any], namespace: str, name: str,
                 timeout: float = 10.0) -> None:
        self.kubeconfig = kubeconfig
        self.namespace, self.name = namespace, name
        self.where = f"Secret {namespace}/{name}"
        self.timeout = timeout

    def _path(self) -> str:
        return f"/api/v1/namespaces/{self.namespace}/secrets/{self.name}"

    def load(self) -> Credentials:
        conn = Connection(self.kubeconfig, self.timeout)
        try:
            resp = conn.http.request("GET", self._path())
        except Exception as exc:
            raise ValueError(f"{self.where}: not read: {exc}") from None
        finally:
            conn.close()
        if resp.status != 200:
            raise ValueError(f"{self.where}: not read (HTTP {resp.status})")
        try:
            data = msgspec.json.decode(resp.body)["data"][SECRET_KEY]
            return msgspec.json.decode(base64.b64decode(data), type=Credentials)
        except (KeyError, TypeError, ValueError, msgspec.DecodeError,
                msgspec.ValidationError) as exc:
            raise ValueError(f"{self.where}: no {SECRET_KEY} in it ({exc})") from None

    def save(self, made: Credentials) -> None:
        body = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "data": {SECRET_KEY: base64.b64encode(msgspec.json.encode(made)).decode()}}
        conn = Connection(self.kubeconfig, self.timeout)
        try:
            kind, ref = conn.locate(body)
            conn.apply(kind, ref, body)
        except Unavailable as exc:
            raise JoinError(f"{self.where}: not written: {exc}") from exc
        finally:
            conn.close()


def join(endpoints: str, token: reg.Token, *, kubeconfig: dict[str, Any], ca: str | None,
         cert: str | None, key: str | None, timeout: float, out: Keeper,
         say: Callable[[str], None] = print) -> Credentials:
    """Ask to join as the token's cluster, wait for the answer, write the credential."""
    cid = token.cluster
    who = identity(kubeconfig)
    password = secrets.token_hex(24)
    digest = hashed(password)
    own_key = certs.new_key() if cert else ""  # etcd wants client certificates
    config = EtcdConfig(url=endpoints, ca=ca, cert=cert, key=key, user=token.user,
                        password=token.secret, timeout=10)
    try:
        store = Store(config)
    except Unauthorized as exc:
        raise JoinError(f"etcd refused the token ({exc}): it expired, was spent, or was "
                        "never minted") from exc
    namespace, _, name = cid.partition("/")
    try:
        before, _ = _registration(store, cid)
        store.commit([Put(keys.registration_request_key(cid), encode(JoinRequest(
            StatusMeta(name, namespace), who, digest, datetime.now(UTC),
            csr=certs.request(own_key, cid) if own_key else "")), None)])
        say(f"asked to join as cluster {cid} (identity {who}); waiting for approval "
            f"(berth cluster approve {cid})")
        deadline = time.monotonic() + timeout
        signed = ""
        while time.monotonic() < deadline:
            time.sleep(0.5)
            try:
                now, _ = _registration(store, cid)
                pending = store.get(keys.registration_request_key(cid)) is not None
            except Unauthorized:  # the token was spent: approved (or revoked) meanwhile
                break
            if now is not None and now.status.granted == reg.granted(digest):
                signed = now.status.certificate
                break
            if now is not None and not pending and now.status.refused and (
                    before is None or now != before):
                raise JoinError(f"refused: {now.status.refused}")
        else:
            raise JoinError(f"not approved within {timeout:g} s (berth cluster approve {cid})")
    finally:
        store.close()
    made = Credentials(cid, endpoints, reg.agent_user(cid), password, who, ca, cert, key)
    try:
        mine = Store(made.config())  # the password works (with the certificate joined with)
    except Unauthorized as exc:
        raise JoinError(f"etcd does not take the new credential: refused, or revoked ({exc})"
                        ) from exc
    try:
        if own_key and not signed:  # the token was spent before the answer was read
            now, _ = _registration(mine, cid)
            if now is not None and now.status.granted == reg.granted(digest):
                signed = now.status.certificate
    finally:
        mine.close()
    if signed and certs.belongs(signed, own_key):
        made = replace(made, cert_pem=signed, key_pem=own_key)
        try:
            Store(made.config()).close()  # and so does the certificate signed for it
        except StoreError as exc:
            raise JoinError(f"etcd does not take the client certificate signed for the "
                            f"agent: was it signed by the CA etcd trusts? ({exc})") from exc
        until = certs.expiry(signed)
        say(f"a client certificate of its own, valid until {until:%Y-%m-%d %H:%M} UTC")
    elif own_key:
        say("no client certificate was signed for it (berth cluster approve without "
            "--signer-cert): it keeps using the one it joined with")
    out.save(made)
    return made


def _registration(store: Store, cid: str) -> tuple[Registration | None, int]:
    kv = store.get(keys.registration_key(cid))
    if kv is None:
        return None, 0
    return msgspec.json.decode(kv.value, type=Registration), kv.mod_revision


class Renewal:
    """Keeps an agent's credential alive: asks to renew with a quarter of its life left,
    and uses the new password once etcd takes it."""

    def __init__(self, store: Store, credentials: Credentials | None, keeper: Keeper | None
                 ) -> None:
        self.store = store
        self.credentials = credentials
        self.keeper = keeper
        self.expires: datetime | None = None
        self.approved: datetime | None = None
        self._pending: tuple[str, str] | None = None  # (password, its hash) asked for

    def step(self, now: datetime) -> None:
        """Read the registration; ask to renew when due; switch to a renewed password (and
        certificate)."""
        if self.credentials is None or self.keeper is None:
            return  # given on the command line or the environment: nothing to renew into
        cid = self.credentials.cluster
        try:
            current, _ = _registration(self.store, cid)
        except Unauthorized:  # approved: the old password is gone
            if self._pending is not None and self._use_password():
                self._renewed(self._certificate(cid))
            return
        except (StoreError, msgspec.DecodeError, msgspec.ValidationError) as exc:
            log.info("registration of %s not read: %s", cid, exc)
            return
        if current is None:
            return
        st = current.status
        self.expires, self.approved = st.expires, st.approved
        if self._pending is not None and st.granted == reg.granted(self._pending[1]):
            if self._use_password():
                self._renewed(st.certificate)
            return
        if self._pending is None and st.expires is not None and st.approved is not None:
            life = (st.expires - st.approved).total_seconds()
            if (st.expires - now).total_seconds() <= life * reg.RENEW_AT:
                self._ask(cid)

    def _ask(self, cid: str) -> None:
        assert self.credentials is not None
        password = secrets.token_hex(24)
        digest = hashed(password)
        namespace, _, name = cid.partition("/")
        key = self.credentials.key_pem  # a certificate of its own: renewed for the same key
        try:
            self.store.commit([Put(keys.renewal_key(cid), encode(JoinRequest(
                StatusMeta(name, namespace), self.credentials.identity, digest,
                datetime.now(UTC), renewal=True,
                csr=certs.request(key, cid) if key else "")), None)])
        except StoreError as exc:
            log.warning("cluster %s: asking to renew the agent's credential: %s", cid, exc)
            return
        self._pending = (password, digest)
        log.info("cluster %s: the agent's credential expires at %s: asked to renew it", cid,
                 self.expires)

    def _use_password(self) -> bool:
        """Authenticate with the password asked for; True if etcd takes it (else the old
        one stays in use)."""
        assert self._pending is not None and self.credentials is not None
        try:
            self.store.use_password(self._pending[0])
        except StoreError as exc:
            log.info("the renewed password is not taken yet: %s", exc)
            try:
                self.store.use_password(self.credentials.password)
            except StoreError as again:
                log.warning("neither the agent's password nor the renewed one is taken: "
                            "%s", again)
            return False
        return True

    def _certificate(self, cid: str) -> str:
        """The certificate the registration carries now ("" if it cannot be read)."""
        try:
            current, _ = _registration(self.store, cid)
        except (StoreError, msgspec.DecodeError, msgspec.ValidationError) as exc:
            log.warning("cluster %s: the renewed registration not read: %s", cid, exc)
            return ""
        return current.status.certificate if current is not None else ""

    def _renewed(self, certificate: str) -> None:
        """The new password is in use: take the certificate renewed with it (new
        connections present it), and keep both."""
        assert self._pending is not None and self.credentials is not None
        made = replace(self.credentials, password=self._pending[0])
        if (made.key_pem and certificate and certificate != made.cert_pem
                and certs.belongs(certificate, made.key_pem)):
            made = replace(made, cert_pem=certificate)
            made.config()  # rewrites this process's certificate file
            self.store.reload_tls()
        self.credentials = made
        self._pending = None
        assert self.keeper is not None
        try:
            self.keeper.save(made)
        except (OSError, ValueError, JoinError) as exc:  # it runs on; a restart would not
            log.error("cluster %s: the renewed credential could not be kept in %s (%s): "
                      "the agent works on, but a restart would find the old one, no longer "
                      "valid", made.cluster, self.keeper.where, exc)
        log.info("cluster %s: the agent's credential was renewed", made.cluster)


__all__ = ["Credentials", "FileKeeper", "JoinError", "Keeper", "Renewal", "SecretKeeper",
           "identity", "join", "trusted_ca"]
