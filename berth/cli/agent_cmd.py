"""``berth agent``: carry out one pull cluster's work, from inside (or next to) it.

``berth agent join ENDPOINTS --token T --ca-hash sha256:...`` asks to join as
the token's cluster, waits for ``berth cluster approve``, and writes the
agent's etcd credential to ``--credentials FILE`` (mode 0600; the password is
made here and only its hash is sent). ``berth agent --credentials FILE``
then runs the agent: it reaches its cluster with ``--kubeconfig FILE``, or in
a Pod with the service account's token
(``/var/run/secrets/kubernetes.io/serviceaccount``), and etcd as the
credential says (renewing it when a quarter of its life is left). Without
``--credentials``, ``--cluster`` names the cluster and the etcd options (or
``$BERTH_ETCD_USER``/``$BERTH_ETCD_PASSWORD``) the credential. Replicas elect
a leader on the cluster's heartbeat key; only the leader works
(docs/agents.md).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from berth.cli.controller_cmd import add_controller
from berth.controllers.propagator.agent.config import AgentConfig, dump_config, load_config
from berth.controllers.runtime.process import Controller
from berth.store import Store, keys

if TYPE_CHECKING:
    from berth.controllers.propagator.agent.join import Keeper

SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")


def in_cluster() -> dict[str, Any]:
    """A kubeconfig for the Pod's service account (its token file is read again as the
    kubelet rotates it); ValueError outside a Pod."""
    host = os.environ.get("KUBERNETES_SERVICE_HOST")
    port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    if not host or not (SERVICE_ACCOUNT / "token").exists():
        raise ValueError("not in a Pod (no $KUBERNETES_SERVICE_HOST or service account "
                         f"token in {SERVICE_ACCOUNT}): give --kubeconfig FILE")
    if ":" in host:
        host = f"[{host}]"
    namespace = (SERVICE_ACCOUNT / "namespace").read_text().strip() if (
        SERVICE_ACCOUNT / "namespace").exists() else "default"
    return {"apiVersion": "v1", "kind": "Config", "current-context": "in-cluster",
            "clusters": [{"name": "in-cluster", "cluster": {
                "server": f"https://{host}:{port}",
                "certificate-authority": str(SERVICE_ACCOUNT / "ca.crt")}}],
            "users": [{"name": "service-account", "user": {
                "tokenFile": str(SERVICE_ACCOUNT / "token")}}],
            "contexts": [{"name": "in-cluster", "context": {
                "cluster": "in-cluster", "user": "service-account", "namespace": namespace}}]}


def _cluster(value: str) -> str:
    namespace, sep, name = value.rpartition("/")
    cid = f"{namespace if sep else 'default'}/{name}"
    try:
        keys.work_prefix(cid)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return cid


def _kubeconfig(args: argparse.Namespace) -> dict[str, Any]:
    from berth.cli.cluster_cmd import kubeconfig

    return kubeconfig(args.kubeconfig, args.context) if args.kubeconfig else in_cluster()


def configure(p: argparse.ArgumentParser, _name: str) -> None:
    """``berth agent``'s arguments (its one-line help is in :data:`cli.main.COMMANDS`)."""
    p.add_argument("action", nargs="?", choices=["join"],
                   help="join: ask to join with a bootstrap token, and write the credential")
    p.add_argument("endpoints", nargs="?", metavar="ENDPOINTS",
                   help="join: etcd's members, as berth cluster token create printed them")
    p.add_argument("--cluster", type=_cluster, metavar="[NAMESPACE/]NAME",
                   help="the Cluster (spec.mode: Pull) whose work this agent carries out "
                   "(default: the one --credentials names)")
    p.add_argument("--credentials", metavar="FILE",
                   help="the agent's etcd credential, as join wrote it (and renewal rewrites "
                   "it); join: where to write it (default berth-agent.json)")
    p.add_argument("--credentials-secret", metavar="NAMESPACE/NAME",
                   help="the same, kept in a Secret of the agent's own cluster (in a Pod: "
                   "its files do not outlive it, a renewed password must)")
    p.add_argument("--kubeconfig", metavar="FILE",
                   help="the cluster's own credentials (default: the Pod's service account)")
    p.add_argument("--context", help="the kubeconfig context to use (default: its current)")
    p.add_argument("--token", help="join: the bootstrap token")
    p.add_argument("--ca-hash", metavar="sha256:HEX",
                   help="join: the hash of etcd's CA, as the token's minting printed it")
    p.add_argument("--join-timeout", type=float, default=600.0, metavar="SECONDS",
                   help="join: how long to wait for approval (default 600)")
    state: dict[str, Any] = {}  # what ``prepare`` read, for ``make``

    def prepare(args: argparse.Namespace) -> dict[str, Any]:
        """Before etcd is dialled: the cluster's credentials (or why not), the agent's
        etcd credential, and the election on the cluster's heartbeat key."""
        from berth.controllers.propagator.agent.beat import heartbeat_body

        state["kubeconfig"] = _kubeconfig(args)
        keeper = _keeper(args, state["kubeconfig"])
        if keeper is not None:
            made = keeper.load()
            state["credentials"], state["keeper"] = made, keeper
            # the credential's, unless the options or the environment say otherwise (in a
            # Pod: etcd's CA and the client pair it joined with are files mounted there);
            # a client certificate signed for the agent itself is used before the
            # environment's pair, renewed with the credential
            args.etcd = args.etcd or os.environ.get("BERTH_ETCD") or made.endpoints
            args.etcd_user, args.etcd_password = made.user, made.password
            pair = made.config() if made.cert_pem else None  # its own, written to files
            for attr, var, own, value in (
                    ("etcd_ca", "BERTH_ETCD_CA", None, made.ca),
                    ("etcd_cert", "BERTH_ETCD_CERT", pair and pair.cert, made.cert),
                    ("etcd_key", "BERTH_ETCD_KEY", pair and pair.key, made.key)):
                setattr(args, attr, getattr(args, attr) or own or os.environ.get(var) or value)
            args.cluster = args.cluster or made.cluster
        if not args.cluster:
            raise ValueError("name the cluster: --cluster NAMESPACE/NAME, or --credentials FILE")
        state["cluster"] = cid = args.cluster
        return {"election_key": keys.heartbeat_key(cid),
                "campaign": lambda identity, since: heartbeat_body(cid, identity, since)}

    def make(store: Store, config: Any, _lease_ttl: int) -> Controller:
        from berth.controllers.propagator.agent.agent import Agent

        return Agent(store, config, cluster=state["cluster"], kubeconfig=state["kubeconfig"],
                     credentials=state.get("credentials"), keeper=state.get("keeper"))

    add_controller(
        p, name="agent",
        description="Carry out a pull cluster's work (/berth/v1/work/<cluster>/) on that "
        "cluster with its own credentials; report each work and a heartbeat under "
        "/berth/v1/agents/<cluster>/. Replicas elect a leader on the heartbeat key. "
        "`berth agent join ENDPOINTS --token T --ca-hash H` joins first.",
        port=9104, load=load_config, dump_defaults=lambda: dump_config(AgentConfig()),
        make=make, lease_ttl=15, prepare=prepare)
    run = p.get_default("run")
    p.set_defaults(run=lambda args: join(args) if args.action == "join" else run(args))


def join(args: argparse.Namespace) -> int:
    """``berth agent join``: ask, wait for approval, write the credential."""
    from berth.cli.etcd_options import etcd_config
    from berth.controllers.propagator.agent.join import JoinError, trusted_ca
    from berth.controllers.propagator.agent.join import join as ask
    from berth.store.agents import Token

    if not args.endpoints or not args.token:
        raise ValueError("join: give ENDPOINTS and --token")
    token = Token.parse(args.token)
    kubeconfig = _kubeconfig(args)
    if not args.credentials_secret:
        args.credentials = args.credentials or "berth-agent.json"
    keeper = _keeper(args, kubeconfig)
    assert keeper is not None
    first = args.endpoints.split(",")[0].strip()
    tls = etcd_config(args)  # --etcd-ca/-cert/-key, or $BERTH_ETCD_CA/_CERT/_KEY
    try:
        ca = trusted_ca(first, args.ca_hash, tls.ca, Path(args.credentials).with_suffix(
            ".ca.crt") if args.credentials else Path(tempfile.gettempdir()) / "berth-ca.crt")
        made = ask(args.endpoints, token, kubeconfig=kubeconfig, ca=ca,
                   cert=tls.cert, key=tls.key, timeout=args.join_timeout,
                   out=keeper, say=lambda line: print(line, file=sys.stderr, flush=True))
    except JoinError as exc:
        print(f"berth agent join: {exc}", file=sys.stderr)
        return 1
    how = (f"--credentials-secret {args.credentials_secret}" if args.credentials_secret
           else f"--credentials {args.credentials}")
    print(f"joined as cluster {made.cluster}; credential in {keeper.where} (keep it "
          f"secret); run: berth agent {how}" + (
              f" --kubeconfig {args.kubeconfig}" if args.kubeconfig else ""))
    return 0


def _keeper(args: argparse.Namespace, kubeconfig: dict[str, Any]) -> Keeper | None:
    """Where the agent's credential is kept: a file, or a Secret of its own cluster."""
    from berth.controllers.propagator.agent.join import FileKeeper, SecretKeeper

    if args.credentials and args.credentials_secret:
        raise ValueError("--credentials or --credentials-secret, not both")
    if args.credentials_secret:
        namespace, sep, name = args.credentials_secret.partition("/")
        if not sep or not namespace or not name:
            raise ValueError(f"--credentials-secret {args.credentials_secret!r}: expected "
                             "NAMESPACE/NAME")
        return SecretKeeper(kubeconfig, namespace, name)
    return FileKeeper(Path(args.credentials)) if args.credentials else None
