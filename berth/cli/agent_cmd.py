"""``berth agent``: carry out one pull cluster's work, from inside (or next to) it.

``berth agent --cluster NAMESPACE/NAME [--kubeconfig FILE]`` reaches its
cluster with that kubeconfig, or in a Pod with the service account's token
(``/var/run/secrets/kubernetes.io/serviceaccount``), and etcd with the user
its registration gave it (``$BERTH_ETCD_USER``/``$BERTH_ETCD_PASSWORD``).
Replicas elect a leader on the cluster's heartbeat key; only the leader works
(docs/agents.md).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from berth.cli.controller_cmd import add_controller
from berth.controllers.propagator.agent.config import AgentConfig, dump_config, load_config
from berth.controllers.runtime.process import Controller
from berth.store import Store, keys

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


def configure(p: argparse.ArgumentParser, _name: str) -> None:
    """``berth agent``'s arguments (its one-line help is in :data:`cli.main.COMMANDS`)."""
    p.add_argument("--cluster", required=True, type=_cluster, metavar="[NAMESPACE/]NAME",
                   help="the Cluster (spec.mode: Pull) whose work this agent carries out")
    p.add_argument("--kubeconfig", metavar="FILE",
                   help="the cluster's own credentials (default: the Pod's service account)")
    p.add_argument("--context", help="the kubeconfig context to use (default: its current)")
    state: dict[str, Any] = {}  # what ``prepare`` read, for ``make``

    def prepare(args: argparse.Namespace) -> dict[str, Any]:
        """Before etcd is dialled: the cluster's credentials (or why not), and the
        election on the cluster's heartbeat key."""
        from berth.cli.cluster_cmd import kubeconfig
        from berth.controllers.propagator.agent.agent import heartbeat_body

        state["cluster"] = cid = args.cluster
        state["kubeconfig"] = (kubeconfig(args.kubeconfig, args.context) if args.kubeconfig
                               else in_cluster())
        return {"election_key": keys.heartbeat_key(cid),
                "campaign": lambda identity, since: heartbeat_body(cid, identity, since)}

    def make(store: Store, config: Any, _lease_ttl: int) -> Controller:
        from berth.controllers.propagator.agent.agent import Agent

        return Agent(store, config, cluster=state["cluster"], kubeconfig=state["kubeconfig"])

    add_controller(
        p, name="agent",
        description="Carry out a pull cluster's work (/berth/v1/work/<cluster>/) on that "
        "cluster with its own credentials; report each work and a heartbeat under "
        "/berth/v1/agents/<cluster>/. Replicas elect a leader on the heartbeat key.",
        port=9104, load=load_config, dump_defaults=lambda: dump_config(AgentConfig()),
        make=make, lease_ttl=15, prepare=prepare)
