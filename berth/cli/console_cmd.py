"""``berth console``: serve the web console (berth.console) until interrupted."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from berth.cli.etcd_options import open_store

PORT = 9190
TOKEN_ENV = "BERTH_CONSOLE_TOKEN"


def configure(p: argparse.ArgumentParser, _name: str) -> None:
    """``berth console``'s arguments (its one-line help is in :data:`cli.main.COMMANDS`)."""
    p.description = (
        "Serve a web console over the fleet as etcd has it: clusters, applications with "
        "their explanation, health, rollout and ledger, metrics over time, what-if. It "
        "reads; with a credential an operator may approve, pause and resume rollouts.")
    p.add_argument("--listen", default=f"127.0.0.1:{PORT}", metavar="HOST:PORT",
                   help=f"default 127.0.0.1:{PORT} (port 0: any); another host than a "
                   "loopback one needs --token-file or --tls-client-ca")
    p.add_argument("--token-file", metavar="FILE",
                   help=f"a bearer token (or ${TOKEN_ENV}): required of every request, and "
                   "what lets an operator act; without one (nor client certificates) the "
                   "console only reads")
    p.add_argument("--team-token", action="append", default=[], metavar="NAMESPACES=FILE",
                   help="a team's bearer token, read from FILE: it sees and acts on the "
                   "applications of NAMESPACES (comma-separated) alone, and the clusters "
                   "they may use (repeat for each team; docs/console.md)")
    p.add_argument("--tls-cert", metavar="FILE", help="serve HTTPS with this certificate")
    p.add_argument("--tls-key", metavar="FILE", help="its key")
    p.add_argument("--tls-client-ca", metavar="FILE",
                   help="require client certificates signed by this CA (with --tls-cert)")
    p.add_argument("--history-points", type=int, default=720, metavar="N",
                   help="values kept per metric for the charts (default 720)")
    p.add_argument("--prometheus", metavar="URL",
                   help="a Prometheus that scrapes the metrics-cache: the charts show its "
                   "history of berth_metric_value (then the console's own)")
    p.add_argument("--prometheus-window", type=float, default=6.0, metavar="HOURS",
                   help="how far back the charts read Prometheus (default 6)")
    p.add_argument("--coalesce", type=float, default=0.5, metavar="SECONDS",
                   help="pages hear of changes at most this often (default 0.5)")
    p.set_defaults(run=run)


def _token(args: argparse.Namespace) -> str:
    if args.token_file:
        token = _read(args.token_file, f"--token-file {args.token_file}")
    else:
        token = _checked(os.environ.get(TOKEN_ENV, "").strip(), f"${TOKEN_ENV}")
    return token


def _read(path: str, source: str) -> str:
    try:
        token = Path(path).read_text().strip()
    except OSError as exc:
        raise ValueError(f"{source}: cannot read: {exc}") from None
    return _checked(token, source)


def _checked(token: str, source: str) -> str:
    if token and (len(token) < 16 or any(c.isspace() for c in token)):
        raise ValueError(f"{source}: a token of at least 16 characters without spaces, please")
    return token


def _teams(args: argparse.Namespace, own: str) -> dict[str, frozenset[str]]:
    """Each ``--team-token NAMESPACES=FILE``: its token → its namespaces."""
    from berth.store import keys

    teams: dict[str, frozenset[str]] = {}
    for given in args.team_token:
        said, sep, path = given.partition("=")
        source = f"--team-token {given}"
        names = [n.strip() for n in said.split(",") if n.strip()]
        if not sep or not path or not names:
            raise ValueError(f"{source}: NAMESPACES=FILE, e.g. team-a,team-a-ci=/etc/team-a")
        for name in names:
            try:
                keys.check_namespace(name)
            except ValueError as exc:
                raise ValueError(f"{source}: {exc}") from None
        token = _read(path, source)
        if not token:
            raise ValueError(f"{source}: the file holds no token")
        if token == own or token in teams:
            raise ValueError(f"{source}: the same token as another credential of this "
                             "console; each needs its own")
        teams[token] = frozenset(names)
    return teams


def run(args: argparse.Namespace) -> int:
    from berth.console.fleet import Fleet
    from berth.console.prometheus import History
    from berth.console.server import Access, Listen, build, check_exposure, serve
    from berth.controllers.runtime.process import parse_listen

    host, port = parse_listen(args.listen)
    if bool(args.tls_cert) != bool(args.tls_key):
        raise ValueError("--tls-cert and --tls-key go together")
    if args.tls_client_ca and not args.tls_cert:
        raise ValueError("--tls-client-ca needs --tls-cert and --tls-key (HTTPS)")
    if args.tls_client_ca and args.team_token:
        raise ValueError("--team-token with --tls-client-ca: a client certificate is the "
                         "console's own credential, every team's with it; give the console "
                         "--token-file instead")
    own = _token(args)
    access = Access(token=own, client_certs=bool(args.tls_client_ca), teams=_teams(args, own))
    if args.prometheus and not args.prometheus.startswith(("http://", "https://")):
        raise ValueError(f"--prometheus {args.prometheus!r}: an http:// or https:// URL")
    if not 0 < args.prometheus_window <= 24 * 90:
        raise ValueError("--prometheus-window: hours, more than 0 and at most 2160")
    prometheus = History(args.prometheus, window=args.prometheus_window * 3600) if (
        args.prometheus) else None
    check_exposure(host, access)
    store = open_store(args)
    fleet = Fleet(store, points=args.history_points)
    fleet.start()

    def started(url: str) -> None:
        what = "reads and acts with its credential" if access.can_act else "reads only"
        print(f"berth console: {url} ({what})", file=sys.stderr, flush=True)

    try:
        serve(build(store, fleet, access, coalesce=args.coalesce, prometheus=prometheus),
              Listen(host, port, args.tls_cert or "", args.tls_key or "",
                     args.tls_client_ca or ""), started=started)
    finally:  # uvicorn ends on SIGINT and SIGTERM
        fleet.stop()
    return 0
