"""The etcd options every subcommand takes, the Store they build, and what to
tell the user when etcd cannot be reached.

``--etcd URL`` (default ``$BERTH_ETCD``, else http://127.0.0.1:2379), TLS
(``--etcd-ca``, ``--etcd-cert``, ``--etcd-key``, or ``BERTH_ETCD_CA`` /
``_CERT`` / ``_KEY``) and credentials (``--etcd-user``/``--etcd-password``, or
``BERTH_ETCD_USER`` / ``BERTH_ETCD_PASSWORD``; a password on the command
line is visible to other users of the machine, prefer the environment);
``--etcd-max-txn-ops`` (``BERTH_ETCD_MAX_TXN_OPS``): operations per transaction,
for an etcd started with a higher ``--max-txn-ops`` than its default 128.
"""

from __future__ import annotations

import argparse
import os

from berth.store import EtcdConfig, Store, StoreError, Unavailable
from berth.store.config import DEFAULT_URL


def add_etcd_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("etcd")
    group.add_argument("--etcd", metavar="URL[,URL...]",
                       help="the etcd cluster's members (gateway URLs, comma-separated; berth "
                            "moves to the next when one fails; default: $BERTH_ETCD or "
                            f"{DEFAULT_URL})")
    group.add_argument("--etcd-ca", metavar="FILE",
                       help="CA bundle to verify etcd's certificate (or $BERTH_ETCD_CA)")
    group.add_argument("--etcd-cert", metavar="FILE",
                       help="client certificate, PEM (or $BERTH_ETCD_CERT)")
    group.add_argument("--etcd-key", metavar="FILE",
                       help="client certificate key, PEM (or $BERTH_ETCD_KEY)")
    group.add_argument("--etcd-user", metavar="NAME", help="etcd user (or $BERTH_ETCD_USER)")
    group.add_argument("--etcd-password", metavar="PW",
                       help="etcd password (prefer $BERTH_ETCD_PASSWORD)")
    group.add_argument("--etcd-max-txn-ops", metavar="N", type=int,
                       help="operations per transaction, as etcd's own --max-txn-ops allows "
                            "(or $BERTH_ETCD_MAX_TXN_OPS; default 128, etcd's default)")


def etcd_config(args: argparse.Namespace) -> EtcdConfig:
    return EtcdConfig.from_env(
        url=args.etcd, ca=args.etcd_ca, cert=args.etcd_cert, key=args.etcd_key,
        user=args.etcd_user, password=args.etcd_password,
        max_txn_ops=getattr(args, "etcd_max_txn_ops", None),
    )


def open_store(args: argparse.Namespace) -> Store:
    return Store(etcd_config(args))


def where_etcd(args: argparse.Namespace) -> str:
    """Where the etcd URL came from, for an error message."""
    if getattr(args, "etcd", None):
        return "from --etcd"
    if os.environ.get("BERTH_ETCD"):
        return "from $BERTH_ETCD"
    return "the default; set another with --etcd URL or $BERTH_ETCD"


def explain_store_error(exc: StoreError, args: argparse.Namespace) -> str:
    """A store error for the person at the terminal: which etcd, and how to point
    berth at another one."""
    if isinstance(exc, Unavailable):
        url = etcd_config(args).url
        return f"cannot reach etcd at {url} ({where_etcd(args)}): {exc}"
    return str(exc)
