"""The etcd options every subcommand takes, and the Store they build.

``--etcd URL`` (default ``$BERTH_ETCD``, else http://127.0.0.1:2379), TLS
(``--etcd-ca``, ``--etcd-cert``, ``--etcd-key``) and credentials
(``--etcd-user``/``--etcd-password``, or ``BERTH_ETCD_USER`` /
``BERTH_ETCD_PASSWORD``; a password on the command line is visible to other
users of the machine, prefer the environment).
"""

from __future__ import annotations

import argparse

from store import EtcdConfig, Store


def add_etcd_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("etcd")
    group.add_argument("--etcd", metavar="URL",
                       help="etcd gateway URL (default: $BERTH_ETCD or http://127.0.0.1:2379)")
    group.add_argument("--etcd-ca", metavar="FILE", help="CA bundle to verify etcd's certificate")
    group.add_argument("--etcd-cert", metavar="FILE", help="client certificate (PEM)")
    group.add_argument("--etcd-key", metavar="FILE", help="client certificate key (PEM)")
    group.add_argument("--etcd-user", metavar="NAME", help="etcd user (or $BERTH_ETCD_USER)")
    group.add_argument("--etcd-password", metavar="PW",
                       help="etcd password (prefer $BERTH_ETCD_PASSWORD)")


def etcd_config(args: argparse.Namespace) -> EtcdConfig:
    return EtcdConfig.from_env(
        url=args.etcd, ca=args.etcd_ca, cert=args.etcd_cert, key=args.etcd_key,
        user=args.etcd_user, password=args.etcd_password,
    )


def open_store(args: argparse.Namespace) -> Store:
    return Store(etcd_config(args))
