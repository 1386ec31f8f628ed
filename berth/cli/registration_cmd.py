"""``berth cluster token create``, ``approve`` and ``revoke``: a pull cluster's agent
joins, renews and is cut off (docs/agents.md "Joining a cluster").

Each manages etcd users and roles, so it runs as a user with etcd's root role
(``--etcd-user root``). ``token create NAME`` mints a bootstrap token that can
only ask to join as NAME; ``approve NAME`` gives the asking agent its own etcd
user (with the password hash it sent) and a role confined to its cluster's
prefixes, spends the token, and creates the Cluster in Pull mode if there is
none (with ``--signer-cert``/``--signer-key``, the CA etcd trusts for client
certificates, it also signs the certificate the agent asked for); ``approve
--watch`` does so for tokens minted with ``--approve`` and for
renewals, and removes credentials and tokens that expired unused; ``revoke NAME``
removes the agent's user and its cluster's work. A join is never approved for a
cluster in Push mode, nor, without ``--replace``, for one whose agent holds a live
credential (``berth.store.agents.refusal``).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import signal
import sys
import threading
from datetime import UTC, datetime
from pathlib import Path

from berth.bootstrap import LoadErrors, plan, write
from berth.bootstrap.load import to_document
from berth.cli.etcd_options import etcd_config, open_store
from berth.store import Invalid, Store, StoreError, certs, keys
from berth.store import agents as reg
from berth.store.documents.durations import DurationError, seconds


def add_chores(chores: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    t = chores.add_parser("token", help="bootstrap tokens for pull clusters' agents")
    tokens = t.add_subparsers(dest="token_chore", required=True, metavar="CHORE")
    c = tokens.add_parser("create", help="mint a token an agent joins NAME with (as root)")
    _name(c)
    c.add_argument("--ttl", default="1h", type=duration, metavar="DURATION",
                   help="how long the token may be used (default 1h)")
    c.add_argument("--credential-ttl", default="30d", type=duration,
                   metavar="DURATION", help="how long an approved agent's credential lives "
                   "before it must be renewed (default 30d; renewed with a quarter left)")
    c.add_argument("--approve", action="store_true",
                   help="approve the join without an operator (berth cluster approve --watch)")
    c.set_defaults(run=token_create)
    a = chores.add_parser("approve", help="approve an agent's request to join or renew (as "
                          "root)")
    a.add_argument("name", metavar="[NAMESPACE/]NAME", nargs="?")
    a.add_argument("-n", "--namespace", default="default", help="default: default")
    a.add_argument("--watch", action="store_true",
                   help="keep approving renewals and tokens minted with --approve, and "
                   "removing credentials that expired")
    a.add_argument("--replace", action="store_true",
                   help="approve a join although the cluster's agent holds a live "
                   "credential (it lost it): that credential stops working")
    a.add_argument("--signer-cert", type=Path, metavar="FILE",
                   help="the CA etcd trusts for client certificates (--trusted-ca-file): "
                   "sign a client certificate for the key the agent asks with")
    a.add_argument("--signer-key", type=Path, metavar="FILE", help="that CA's key")
    a.add_argument("--interval", type=float, default=2.0, help=argparse.SUPPRESS)
    a.set_defaults(run=approve)
    r = chores.add_parser("revoke", help="cut an agent off: its etcd user and its work go "
                          "(as root)")
    _name(r)
    r.set_defaults(run=revoke)


def duration(text: str) -> float:
    try:
        return seconds(text)
    except DurationError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _name(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", metavar="[NAMESPACE/]NAME")
    p.add_argument("-n", "--namespace", default="default", help="default: default")


def _cluster(args: argparse.Namespace) -> str:
    namespace, _, name = args.name.rpartition("/")
    cid = f"{namespace or args.namespace}/{name}"
    keys.work_prefix(cid)  # ValueError naming what is wrong
    return cid


def ca_hash(path: str) -> str:
    """``sha256:<hex>`` of the first certificate in a PEM file (its DER bytes)."""
    text = Path(path).read_text()
    begin, end = "-----BEGIN CERTIFICATE-----", "-----END CERTIFICATE-----"
    if begin not in text:
        raise ValueError(f"{path}: no certificate in it")
    body = text.split(begin, 1)[1].split(end, 1)[0]
    return "sha256:" + hashlib.sha256(base64.b64decode("".join(body.split()))).hexdigest()


def token_create(args: argparse.Namespace) -> int:
    cid = _cluster(args)
    store = open_store(args)
    token = reg.mint(store, cid, ttl=args.ttl, credential_ttl=args.credential_ttl,
                     auto=args.approve, now=datetime.now(UTC))
    config = etcd_config(args)
    print(token)
    print(f"# valid {args.ttl:g} s; on the cluster, as its own credentials:", file=sys.stderr)
    join = f"berth agent join {config.url} --token <the token above>"
    if config.ca:
        join += f" --ca-hash {ca_hash(config.ca)}"
    print(f"#   {join}", file=sys.stderr)
    if not args.approve:
        print(f"# then: berth cluster approve {cid}", file=sys.stderr)
    return 0


def _signer(args: argparse.Namespace) -> certs.Signer | None:
    if (args.signer_cert is None) != (args.signer_key is None):
        raise ValueError("give --signer-cert and --signer-key together")
    if args.signer_cert is None:
        return None
    return certs.Signer.load(args.signer_cert, args.signer_key)


def approve(args: argparse.Namespace) -> int:
    try:
        signer = _signer(args)
    except ValueError as exc:  # CertificateError among them, naming the file
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.watch and args.replace:
        print("error: --replace is an operator's act on one join: not with --watch",
              file=sys.stderr)
        return 2
    store = open_store(args)
    if not args.watch:
        if not args.name:
            print("error: name the cluster, or give --watch", file=sys.stderr)
            return 2
        cid = _cluster(args)
        ask = reg.asked(store, cid)
        try:
            said = reg.approve(store, cid, now=datetime.now(UTC), signer=signer, ask=ask,
                               replace=args.replace)
        except reg.Refused as exc:
            print(f"error: refused: {exc}", file=sys.stderr)
            return 1
        print(said)
        if ask is reg.Ask.JOIN:
            _ensure_cluster(store, cid)
        return 0
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    print("approving renewals and tokens minted with --approve; Ctrl-C stops",
          file=sys.stderr)
    try:
        for cid in reg.refresh_roles(store):
            print(f"cluster {cid}: its agent's role rewritten to this berth's grants",
                  flush=True)
    except StoreError as exc:
        print(f"warning: agents' roles not checked: {exc}", file=sys.stderr)
    while not stop.wait(args.interval):
        try:
            _round(store, args.name and _cluster(args), signer)
        except StoreError as exc:
            print(f"warning: {exc}", file=sys.stderr)
    return 0


def _round(store: Store, only: str | None, signer: certs.Signer | None) -> None:
    """Approve what may be approved without an operator; expire what was not renewed."""
    now = datetime.now(UTC)
    for cid, ask in reg.requests(store):
        if only and cid != only:
            continue
        if ask is reg.Ask.JOIN:
            try:
                registration, _ = reg.read(store, cid)
            except Invalid as exc:
                print(f"refused: {cid}: {exc}", file=sys.stderr, flush=True)
                continue
            if registration is None or not (registration.spec.auto or only):
                continue  # an operator approves it
        try:
            print(reg.approve(store, cid, now=now, signer=signer, ask=ask), flush=True)
        except reg.Refused as exc:
            print(f"refused: {cid}: {exc}", file=sys.stderr, flush=True)
            continue
        if ask is reg.Ask.JOIN:
            _ensure_cluster(store, cid)
    for line in reg.expire(store, now=now):
        print(line, flush=True)


def _ensure_cluster(store: Store, cid: str) -> None:
    """A Cluster in Pull mode for an approved agent, if there is none."""
    namespace, _, name = cid.partition("/")
    if store.get(keys.resource_key("Cluster", name, namespace)) is not None:
        return
    try:
        loaded = to_document(f"cluster {cid}", {
            "api": "kubernetes", "kind": "Cluster",
            "metadata": {"name": name, "namespace": namespace}, "spec": {"mode": "Pull"}})
        write(store, plan(store, [loaded], force=False))
    except (Invalid, LoadErrors) as exc:
        print(f"warning: cluster {cid} not created: {exc}", file=sys.stderr)
        return
    print(f"cluster/{cid} created (mode Pull)")


def revoke(args: argparse.Namespace) -> int:
    cid = _cluster(args)
    store = open_store(args)
    done = reg.revoke(store, cid, now=datetime.now(UTC))
    print(f"cluster {cid}: revoked ({', '.join(done) or 'nothing to remove'})")
    return 0
