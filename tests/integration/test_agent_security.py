"""An agent joins with a bootstrap token, works under an etcd role confined to its own
cluster's prefixes, renews its credential, and is cut off when revoked (#61 items 4
and 5). On a real etcd with mutual TLS and authentication (scripts/etcd-secure.sh),
and real kube-apiservers: the agent's cluster and an impostor under the same name."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from berth.cli import registration_cmd
from berth.controllers.propagator.agent.join import Credentials
from berth.store import (
    Delete,
    EtcdConfig,
    Fence,
    Put,
    Store,
    StoreError,
    Unauthorized,
    auth,
    certs,
    decode,
    encode,
    keys,
)
from berth.store import agents as reg_agents
from berth.store.agents import Token, agent_grants, agent_user, join_user
from berth.store.auth import Access, Grant, hashed
from berth.store.documents import StatusMeta
from berth.store.documents.registration import JoinRequest, Registration
from berth.store.documents.work import Heartbeat
from berth_testkit.scheduler_env import AgentProcess, PropagatorProcess, wait_for
from berth_testkit.servers.etcd import ROOT
from berth_testkit.servers.kube import KubeCluster
from berth_testkit.servers.serving import serving_all
from tests.integration.conftest import Secure
from tests.integration.test_propagator_apply import AGENT, app, bind, config_map, status

CID = "default/edge"


@pytest.fixture(scope="module")
def clusters() -> Iterator[dict[str, KubeCluster]]:
    yield from serving_all(KubeCluster, ("edge", "impostor"))


def berth(secure: Secure, user: str | None, *args: str, check: bool = True,
          ) -> subprocess.CompletedProcess[str]:
    """The command as ``user`` (None: no etcd user, as an agent that only has a token)."""
    env = {**os.environ, **secure.env(user or "root")}
    if user is None:
        env.pop("BERTH_ETCD_USER")
        env.pop("BERTH_ETCD_PASSWORD")
    done = subprocess.run([sys.executable, "-m", "berth.cli.main", *args], capture_output=True,
                          text=True, timeout=120, cwd=ROOT, env=env)
    if check:
        assert done.returncode == 0, done.stderr
    return done


def join(secure: Secure, tmp_path: Path, token: str, kube: KubeCluster, name: str
         ) -> tuple[subprocess.Popen[str], Path]:
    """``berth agent join`` in the background, with the cluster's own kubeconfig and
    etcd's CA checked against the hash the token came with."""
    kubeconfig = tmp_path / f"{name}.kubeconfig"
    kubeconfig.write_text(json.dumps(kube.kubeconfig()))
    out = tmp_path / f"{name}.credentials.json"
    env = {k: v for k, v in {**os.environ, **secure.env("root")}.items()
           if k not in ("BERTH_ETCD_USER", "BERTH_ETCD_PASSWORD")}
    ca_hash = registration_cmd.ca_hash(secure.tls.ca)  # as token create printed it
    proc = subprocess.Popen(
        [sys.executable, "-m", "berth.cli.main", "agent", "join", secure.etcd.url,
         "--token", token, "--ca-hash", ca_hash, "--kubeconfig", str(kubeconfig),
         "--credentials", str(out), "--join-timeout", "60"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env)
    return proc, out


def asked(store: Store, joining: subprocess.Popen[str]) -> None:
    """Wait for the join's request (or say why the join ended without one)."""
    def request() -> object:
        if joining.poll() is not None:
            raise AssertionError(f"berth agent join ended: {joining.communicate()}")
        return store.get(keys.registration_request_key(CID))
    wait_for(request, timeout=30)


def registration(store: Store, cid: str = CID) -> Registration:
    kv = store.get(keys.registration_key(cid))
    assert kv is not None
    return decode(kv.value, Registration, kv.key)


def refused(call: Callable[[], Any]) -> bool:
    try:
        result = call()
        if hasattr(result, "__iter__") and not isinstance(result, (bytes, str, tuple, list)):
            next(iter(result))  # a watch is refused when it is opened
    except Unauthorized:
        return True
    return False


def test_an_agent_joins_works_confined_to_its_prefixes_and_is_revoked(
    secure: Secure, clusters: dict[str, KubeCluster], tmp_path: Path
) -> None:
    root = secure.store("root")
    minted = berth(secure, "root", "cluster", "token", "create", CID, "--ttl", "10m")
    token = minted.stdout.strip()
    assert token.startswith("default.edge.")
    assert f"--ca-hash {registration_cmd.ca_hash(secure.tls.ca)}" in minted.stderr
    joining, creds = join(secure, tmp_path, token, clusters["edge"], "edge")
    asked(root, joining)
    said = berth(secure, "root", "cluster", "approve", CID).stdout
    assert f"cluster {CID}: joined as " in said and f"etcd user {agent_user(CID)}" in said
    assert "no client certificate signed (give --signer-cert" in said  # it asked for one
    assert "cluster/default/edge created (mode Pull)" in said
    out, err = joining.communicate(timeout=60)
    assert joining.returncode == 0, err
    assert oct(creds.stat().st_mode)[-3:] == "600"
    made = Credentials.load(creds)
    assert made.user == agent_user(CID) and made.password not in said + err + out
    assert not made.cert_pem and made.cert == secure.tls.client_cert  # the pair it joined with
    uid = clusters["edge"].request("GET", "/api/v1/namespaces/kube-system")["metadata"]["uid"]
    assert registration(root).status.identity == uid == made.identity
    # the bootstrap credential is spent: its user and role are gone
    users = root.call("auth/user/list", {}, "users").get("users", [])
    assert join_user(CID) not in users and agent_user(CID) in users
    assert made.password not in json.dumps(root.list_prefix(keys.REGISTRATIONS)[0],
                                           default=str)  # only its hash was sent

    prop = PropagatorProcess(secure.etcd.url, tmp_path, config="probe_interval: 0.5\n",
                             env=secure.env("berth-propagator")).start()
    agent = AgentProcess(secure.etcd.url, tmp_path, cluster=CID, credentials=creds,
                         kubeconfig=clusters["edge"].kubeconfig(), config=AGENT, name="edge",
                         env={k: v for k, v in secure.env("root").items()
                              if k.startswith("BERTH_ETCD_C") or k == "BERTH_ETCD_KEY"}).start()
    edge = clusters["edge"]
    try:
        app(root, "web", [config_map("web", a="1")])
        bind(root, "web", 1, "edge")
        wait_for(lambda: status(root, "web"), lambda s: s.status.state == "RUNNING",
                 timeout=90)
        assert edge.request("GET", "/api/v1/namespaces/default/configmaps/web")["data"] == {
            "a": "1"}

        # What the agent may do, and every verb outside its prefixes, refused by etcd.
        mine = Store(made.config())
        own_work = keys.work_key(CID, "default", "web")
        assert mine.get(own_work) is not None
        assert mine.list_prefix(keys.work_prefix(CID))[0]
        other = "default/other"
        lease = mine.grant(30)  # leases need no grant: attaching one to a key does
        attempts: dict[str, Callable[[], Any]] = {
            "get an application": lambda: mine.get(keys.resource_key("Application", "web",
                                                                     "default")),
            "get another cluster's work": lambda: mine.get(keys.work_key(other, "default",
                                                                         "web")),
            "range everything": lambda: mine.list_prefix(keys.ROOT),
            "range the secrets": lambda: mine.list_prefix(keys.SECRETS),
            "range every work": lambda: mine.list_prefix(keys.WORK),
            "watch every work": lambda: mine.watch(keys.WORK, mine.revision()),
            "watch another agent's prefix": lambda: mine.watch(keys.agent_prefix(other),
                                                               mine.revision()),
            "write an application": lambda: mine.commit([Put(keys.resource_key(
                "Application", "evil", "default"), b"{}", None)]),
            "write its own work": lambda: mine.commit([Put(own_work, b"{}", None)]),
            "write another agent's report": lambda: mine.commit([Put(keys.report_key(
                other, "default", "web"), b"{}", None)]),
            "write its registration": lambda: mine.commit([Put(keys.registration_key(CID),
                                                               b"{}", None)]),
            "delete a status": lambda: mine.commit([Delete(keys.status_key(
                "Application", "default", "web"))]),
            "delete its work": lambda: mine.commit([Delete(own_work)]),
            "a transaction comparing a foreign key": lambda: mine.commit([
                Put(keys.report_key(CID, "default", "x"), b"{}", None),
                Fence(keys.lease_key("scheduler"), 1)]),
            "a lease attached to a foreign key": lambda: mine.commit([Put(keys.resource_key(
                "Application", "evil", "default"), b"{}", None, lease)]),
            "add a user": lambda: mine.call("auth/user/add", {"name": "evil",
                                                              "password": "x"}, "add"),
            "grant itself a role": lambda: mine.call("auth/user/grant", {
                "user": agent_user(CID), "role": "root"}, "grant"),
        }
        allowed = [what for what, call in attempts.items() if not refused(call)]
        assert not allowed, f"the agent may {allowed}"
        assert root.get(keys.resource_key("Application", "evil", "default")) is None
        assert "permission denied" not in agent.output()  # its own work never is
        shown = secure.berth("berth-admin", "get", "clusters")
        assert shown.splitlines()[0].split()[:4] == ["NAME", "STATE", "MODE", "CREDENTIAL"]
        assert shown.splitlines()[1].split()[:6] == ["edge", "ONLINE", "Pull", "expires",
                                                     "in", "29d"]
        shown = secure.berth("berth-admin", "describe", "cluster", "edge")
        assert f"Agent:       etcd user {agent_user(CID)}, cluster identity {uid}" in shown

        # Revoked: every new request refused at once, its work gone, none written again.
        said = berth(secure, "root", "cluster", "revoke", CID).stdout
        assert f"cluster {CID}: revoked (user {agent_user(CID)}, role {agent_user(CID)}" in said
        assert refused(lambda: Store(made.config()).get(own_work))
        assert refused(lambda: mine.get(own_work))  # the session it had, too
        assert root.list_prefix(keys.work_prefix(CID))[0] == []
        app(root, "web", [config_map("web", a="2")], generation=2)
        bind(root, "web", 2, "edge")
        failed = wait_for(lambda: status(root, "web"), lambda s: "revoked" in s.status.errors.get(
            "default/edge", ""), timeout=30)
        assert "berth cluster revoke" in failed.status.errors["default/edge"]
        time.sleep(1)
        assert root.list_prefix(keys.work_prefix(CID))[0] == []  # nothing for its open watch
        row = secure.berth("berth-admin", "get", "clusters").splitlines()[1].split()
        assert row[0] == "edge" and row[2:4] == ["Pull", "revoked"], row
        # the cluster keeps what it had: revoking removes nothing there
        assert edge.request("GET", "/api/v1/namespaces/default/configmaps/web")["data"] == {
            "a": "1"}
        mine.close()
    finally:
        for p in (agent, prop):
            p.stop()
            print(p.output()[-3000:])
        root.close()
    assert made.password not in agent.output() + prop.output()


def test_a_taken_name_is_refused_and_a_credential_is_renewed_before_it_expires(
    secure: Secure, clusters: dict[str, KubeCluster], tmp_path: Path
) -> None:
    root = secure.store("root")
    token = berth(secure, "root", "cluster", "token", "create", CID, "--ttl", "10m",
                  "--credential-ttl", "24s", "--approve").stdout.strip()
    # etcd wants client certificates: the watcher, given the CA etcd trusts for them,
    # signs one for the key each agent asks with
    signer = Path(secure.tls.ca).parent / "ca.key"
    watcher = subprocess.Popen(
        [sys.executable, "-m", "berth.cli.main", "cluster", "approve", "--watch",
         "--interval", "0.5", "--signer-cert", secure.tls.ca, "--signer-key", str(signer)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT,
        env={**os.environ, **secure.env("root")})
    agent: AgentProcess | None = None
    try:
        # the first test's cluster joined as edge: another cluster may not take the name
        impostor, _ = join(secure, tmp_path, token, clusters["impostor"], "impostor")
        _, err = impostor.communicate(timeout=60)
        assert impostor.returncode == 1
        assert "refused: the name is taken: it joined as cluster identity" in err, err
        # the cluster itself may join again (tokens minted with --approve need nobody)
        token = berth(secure, "root", "cluster", "token", "create", CID, "--ttl", "10m",
                      "--credential-ttl", "24s", "--approve").stdout.strip()
        joining, creds = join(secure, tmp_path, token, clusters["edge"], "edge2")
        _out, err = joining.communicate(timeout=60)
        assert joining.returncode == 0, err
        first = Credentials.load(creds)
        expires = registration(root).status.expires
        assert expires is not None
        assert "a client certificate of its own, valid until" in err, err
        assert certs.belongs(first.cert_pem, first.key_pem)
        assert abs((certs.expiry(first.cert_pem) - expires).total_seconds()) < 1  # X.509: s
        # the agent has its own pair and no other: the one it joined with is forgotten
        Credentials.save(dataclasses.replace(first, cert=None, key=None), creds)
        agent = AgentProcess(secure.etcd.url, tmp_path, cluster=CID, credentials=creds,
                             kubeconfig=clusters["edge"].kubeconfig(),
                             config=AGENT + "renew_check_interval: 0.5\n", name="edge2",
                             env={"BERTH_ETCD_CA": secure.tls.ca})
        agent.start()
        # renewed with a quarter of its life left (6 s), before it expires
        renewed = wait_for(lambda: Credentials.load(creds), lambda c: c.password !=
                           first.password, timeout=40)
        assert registration(root).status.expires > expires  # type: ignore[operator]
        wait_for(lambda: agent.output() if agent else "",
                 lambda o: "the agent's credential was renewed" in o, timeout=10)
        time.sleep(max(0.0, (expires - datetime.now(UTC)).total_seconds()) + 1)
        # past the first credential's end: the old password is refused, the agent works
        old_password = dataclasses.replace(first, cert_pem=renewed.cert_pem)
        assert refused(lambda: Store(old_password.config()).get(keys.heartbeat_key(CID)))
        beat = Store(renewed.config()).get(keys.heartbeat_key(CID))
        assert beat is not None and decode(beat.value, Heartbeat, beat.key).status.state == (
            "ONLINE")
        # its certificate was renewed with it, for the same key; the first one has expired
        # and etcd refuses a connection that shows it
        assert renewed.key_pem == first.key_pem and renewed.cert_pem != first.cert_pem
        renewal = registration(root).status.expires
        assert renewal is not None and abs((certs.expiry(renewed.cert_pem) - renewal
                                            ).total_seconds()) < 1
        with pytest.raises(StoreError):
            Store(dataclasses.replace(renewed, cert_pem=first.cert_pem).config())
        # the auth change made etcd reject every token once (re-authenticated, said at
        # INFO); nothing failed for it, and the agent led throughout
        out = agent.output()
        assert not [line for line in out.splitlines() if "permission denied" in line and (
            " WARNING " in line or " ERROR " in line)], out
        assert "lost leadership" not in out and out.count("leading; starting") == 1
    finally:
        watcher.terminate()
        print(watcher.communicate(timeout=10)[0][-3000:])
        if agent is not None:
            agent.stop()
            print(agent.output()[-3000:])
        root.close()


def as_token(secure: Secure, token: str) -> Store:
    """etcd as a bootstrap token's holder, with the TLS pair etcd asks every client for."""
    t = Token.parse(token)
    return Store(EtcdConfig(url=secure.etcd.url, ca=secure.tls.ca, cert=secure.tls.client_cert,
                            key=secure.tls.client_key, user=t.user, password=t.secret,
                            timeout=5))


def as_agent(secure: Secure, cid: str, password: str) -> Store:
    return Store(EtcdConfig(url=secure.etcd.url, ca=secure.tls.ca, cert=secure.tls.client_cert,
                            key=secure.tls.client_key, user=agent_user(cid),
                            password=password, timeout=5))


def ask(store: Store, cid: str, identity: str, password: str, *, renewal: bool = False,
        key: str | None = None) -> None:
    """Write a request as ``store``'s user: a join (or one that says it renews) at the
    join key, or at ``key``."""
    namespace, _, name = cid.partition("/")
    store.commit([Put(key or keys.registration_request_key(cid), encode(JoinRequest(
        StatusMeta(name, namespace), identity, hashed(password, 4), datetime.now(UTC),
        renewal=renewal)), None)])


def test_a_bootstrap_token_never_takes_over_a_joined_cluster(
    secure: Secure, clusters: dict[str, KubeCluster], tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """#72 item 1, as a token's holder would: a token minted (--ttl 2s) for a cluster
    already joined, used after it expired, reads the identity the agent joined with and
    asks to renew as it; and an unexpired token, minted for manual approval or with
    --approve, asks to join as that identity. Every one refused; the agent's own
    password works throughout, the holder's never; the expired token's user is gone.
    Then --replace hands the cluster over, as an operator's act. And (#72 item 2) a
    Push cluster's name is refused to a join until its mode is Pull."""
    root = secure.store("root")
    cid = "default/edge3"
    token = berth(secure, "root", "cluster", "token", "create", cid, "--ttl", "10m"
                  ).stdout.strip()
    joining, creds = join(secure, tmp_path, token, clusters["edge"], "edge3")
    wait_for(lambda: root.get(keys.registration_request_key(cid)), timeout=30)
    berth(secure, "root", "cluster", "approve", cid)
    _out, err = joining.communicate(timeout=60)
    assert joining.returncode == 0, err
    agent = Credentials.load(creds)

    def intact() -> None:
        """The agent's password works; the token holder's is refused."""
        as_agent(secure, cid, agent.password).get(keys.registration_key(cid))
        assert refused(lambda: as_agent(secure, cid, "stolen"))

    def approve_round() -> tuple[str, str]:
        """One round of `berth cluster approve --watch`."""
        capsys.readouterr()
        registration_cmd._round(root, None, None)
        done = capsys.readouterr()
        return done.out, done.err

    try:
        # 1. an expired token: its user is there until the approver sees it, and reads
        expired = berth(secure, "root", "cluster", "token", "create", cid, "--ttl", "2s"
                        ).stdout.strip()
        time.sleep(2.5)
        thief = as_token(secure, expired)
        seen = registration(thief, cid)
        assert seen.status.identity == agent.identity  # not a secret: no proof either
        # where the agent asks to renew, etcd refuses it
        assert refused(lambda: ask(thief, cid, agent.identity, "stolen", renewal=True,
                                   key=keys.renewal_key(cid)))
        # where a token asks to join, berth's approver refuses what says it renews
        ask(thief, cid, agent.identity, "stolen", renewal=True)
        out, err = approve_round()  # the watching approver leaves a join to an operator
        assert f"its bootstrap token expired unused: user {join_user(cid)} removed" in out
        assert "renewed" not in out + err
        done = berth(secure, "root", "cluster", "approve", cid, check=False)
        assert done.returncode == 1, done.stdout
        assert "refused: a renewal is asked by the agent itself at " \
               f"{keys.renewal_key(cid)}" in done.stderr, done.stderr
        intact()
        assert refused(lambda: as_token(secure, expired))  # its user is gone
        assert refused(lambda: thief.get(keys.registration_key(cid)))  # its session, too
        thief.close()

        # 2. an unexpired token for manual approval asks to join as the same identity
        fresh = berth(secure, "root", "cluster", "token", "create", cid, "--ttl", "10m"
                      ).stdout.strip()
        thief = as_token(secure, fresh)
        ask(thief, cid, agent.identity, "stolen")
        done = berth(secure, "root", "cluster", "approve", cid, check=False)
        assert done.returncode == 1, done.stdout
        assert "refused: its agent holds a live credential (etcd user " \
               f"{agent_user(cid)} until " in done.stderr, done.stderr
        assert "approve with --replace" in done.stderr
        intact()
        # ... and a token minted with --approve: the watching approver refuses it too
        auto = berth(secure, "root", "cluster", "token", "create", cid, "--ttl", "10m",
                     "--approve").stdout.strip()
        thief.close()
        thief = as_token(secure, auto)
        ask(thief, cid, agent.identity, "stolen")
        out, err = approve_round()
        assert f"refused: {cid}: its agent holds a live credential" in err, err
        intact()
        # an agent joined under an older berth has its role rewritten to today's grants
        # (the renewal key) when the approver starts
        old = [g for g in agent_grants(cid) if g.key != keys.renewal_key(cid)] + [
            Grant(Access.READWRITE, keys.registration_request_key(cid))]
        auth.set_role(root, agent_user(cid), old, agent_user(cid))
        assert reg_agents.refresh_roles(root) == [cid]
        assert reg_agents.refresh_roles(root) == []  # done once
        # the agent's own renewal, at its own key, is approved as before
        mine = as_agent(secure, cid, agent.password)
        ask(mine, cid, agent.identity, "renewed-pw", renewal=True, key=keys.renewal_key(cid))
        out, _ = approve_round()
        assert f"cluster {cid}: renewed as {agent.identity}" in out, out
        as_agent(secure, cid, "renewed-pw").close()
        assert root.get(keys.renewal_key(cid)) is None
        # an operator hands the name over on purpose: --replace
        ask(thief, cid, agent.identity, "handed")
        said = berth(secure, "root", "cluster", "approve", cid, "--replace").stdout
        assert f"cluster {cid}: joined, replacing its agent, as {agent.identity}" in said
        assert refused(lambda: as_agent(secure, cid, "renewed-pw"))
        as_agent(secure, cid, "handed").close()
        mine.close()
        thief.close()

        # 3. a Push cluster's name: refused to a join until switched to Pull on purpose
        pushed = "default/pushed"
        doc = tmp_path / "pushed.json"
        doc.write_text(json.dumps({"api": "kubernetes", "kind": "Cluster", "metadata": {
            "name": "pushed", "namespace": "default"}, "spec": {
            "kubeconfig": clusters["impostor"].kubeconfig()}}))
        secure.berth("berth-admin", "apply", "-f", str(doc))
        token = berth(secure, "root", "cluster", "token", "create", pushed, "--ttl", "10m"
                      ).stdout.strip()
        holder = as_token(secure, token)
        ask(holder, pushed, "uid-impostor", "pw")
        done = berth(secure, "root", "cluster", "approve", pushed, check=False)
        assert done.returncode == 1
        assert f"refused: cluster {pushed} is registered in Push mode: an agent joins it " \
               "only once its spec.mode is Pull" in done.stderr, done.stderr
        assert refused(lambda: as_agent(secure, pushed, "pw"))
        doc.write_text(json.dumps({"api": "kubernetes", "kind": "Cluster", "metadata": {
            "name": "pushed", "namespace": "default"}, "spec": {"mode": "Pull"}}))
        secure.berth("berth-admin", "apply", "-f", str(doc))
        ask(holder, pushed, "uid-impostor", "pw")
        said = berth(secure, "root", "cluster", "approve", pushed).stdout
        assert f"cluster {pushed}: joined as uid-impostor" in said
        holder.close()
    finally:
        root.close()


def test_join_trusts_etcd_only_through_the_ca_whose_hash_it_was_given(tmp_path: Path) -> None:
    """`berth agent join --ca-hash`: the CA is found among the certificates the server shows
    in its TLS handshake (its certificate file holding its chain), and trusted only if its
    hash is the one given; a CA file given is checked the same way (kubeadm's
    --discovery-token-ca-cert-hash, for etcd)."""
    import socket
    import ssl
    import threading

    import pytest

    from berth.controllers.propagator.agent.join import JoinError, trusted_ca
    from berth_testkit.servers.etcd import make_tls

    tls = make_tls(tmp_path)
    chained = tmp_path / "server-chain.crt"
    chained.write_text(Path(tls.server_cert).read_text() + Path(tls.ca).read_text())
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(str(chained), tls.server_key)
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    stop = threading.Event()

    def serve() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            try:
                with ctx.wrap_socket(conn, server_side=True):
                    pass
            except (ssl.SSLError, OSError):
                pass

    server = threading.Thread(target=serve, daemon=True)
    server.start()
    try:
        right = registration_cmd.ca_hash(tls.ca)
        found = trusted_ca(f"https://127.0.0.1:{port}", right, None, tmp_path / "found.crt")
        assert found == str(tmp_path / "found.crt")
        assert registration_cmd.ca_hash(found) == right  # the CA itself, written down
        wrong = "sha256:" + "0" * 64
        with pytest.raises(JoinError, match="shows no certificate with hash"):
            trusted_ca(f"https://127.0.0.1:{port}", wrong, None, tmp_path / "no.crt")
        with pytest.raises(JoinError, match="its hash is not"):
            trusted_ca(f"https://127.0.0.1:{port}", wrong, tls.ca, tmp_path / "no.crt")
        assert trusted_ca(f"https://127.0.0.1:{port}", right, tls.ca, tmp_path / "x") == tls.ca
        with pytest.raises(JoinError, match="give --ca-hash"):
            trusted_ca(f"https://127.0.0.1:{port}", None, None, tmp_path / "x")
        assert trusted_ca("http://127.0.0.1:1", None, None, tmp_path / "x") is None
    finally:
        stop.set()
        server.join()  # closing the socket under a waiting accept() raises in the thread
        listener.close()
