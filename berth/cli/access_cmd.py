"""``berth access grant NAMESPACE --user NAME``, ``revoke`` and ``show``: a team's etcd
access to its berth namespace (docs/teams.md "Access").

Each manages etcd users and roles, so it runs as a user with etcd's root role
(``--etcd-user root``). ``grant`` gives the user the namespace's role
(``berth-team.<namespace>``: its applications, overrides, secrets, histories and
rollout controls to write; their Bindings, statuses, ledger and events, and the
namespace's clusters, to read — ``berth.store.teams``), making the role and, if
needed, the user: a new user's password is printed once, on standard output, unless
``--password-stdin`` gave it. ``revoke`` takes the role away (a user left with none
is deleted); ``show`` lists who holds it and what it grants.
"""

from __future__ import annotations

import argparse
import sys

from berth.cli.etcd_options import open_store
from berth.store import auth, keys, teams


def configure(p: argparse.ArgumentParser, _name: str) -> None:
    p.description = "Give people and CI systems access to one berth namespace (as root)."
    chores = p.add_subparsers(dest="chore", required=True, metavar="CHORE")
    g = chores.add_parser("grant", help="give a user the namespace's access (made if new)")
    _namespace(g)
    g.add_argument("--user", required=True, help="the etcd user")
    g.add_argument("--password-stdin", action="store_true",
                   help="read the user's password from standard input (default: a new "
                   "user gets one, printed once)")
    g.set_defaults(run=grant)
    r = chores.add_parser("revoke", help="take the namespace's access from a user")
    _namespace(r)
    r.add_argument("--user", required=True)
    r.set_defaults(run=revoke)
    s = chores.add_parser("show", help="who holds the namespace's access, and what it grants")
    _namespace(s)
    s.set_defaults(run=show)


def _namespace(p: argparse.ArgumentParser) -> None:
    p.add_argument("namespace", metavar="NAMESPACE", type=_checked)


def _checked(text: str) -> str:
    try:
        keys.check_namespace(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def grant(args: argparse.Namespace) -> int:
    password = sys.stdin.readline().rstrip("\n") if args.password_stdin else None
    if args.password_stdin and not password:
        raise ValueError("--password-stdin: no password on standard input")
    made = teams.grant(open_store(args), args.namespace, args.user, password)
    role = teams.team_role(args.namespace)
    if made is not None and password is None:
        print(made)
        print(f"# user {args.user} made with the password above (shown once), role {role}",
              file=sys.stderr)
    else:
        print(f"user {args.user}: role {role}" + (" (made)" if made else ""), file=sys.stderr)
    return 0


def revoke(args: argparse.Namespace) -> int:
    store = open_store(args)
    if not teams.revoke(store, args.namespace, args.user):
        print(f"user {args.user} has no access to namespace {args.namespace}", file=sys.stderr)
        return 1
    gone = args.user not in auth.users(store)
    print(f"user {args.user}: access to namespace {args.namespace} revoked"
          + (" (no role left: the user is deleted)" if gone else ""))
    return 0


def show(args: argparse.Namespace) -> int:
    store = open_store(args)
    role = teams.team_role(args.namespace)
    granted = auth.role_grants(store, role)
    if granted is None:
        print(f"namespace {args.namespace}: nobody has access (no role {role})")
        return 0
    print(f"role {role}: users {', '.join(teams.members(store, args.namespace)) or '-'}")
    for g in sorted(granted, key=lambda g: (g.key, g.access.value)):
        print(f"  {g.access.value.lower():9} {g.key}{'*' if g.prefix else ''}")
    return 0
