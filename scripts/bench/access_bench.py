"""Giving many people access to a namespace (docs/teams.md "Access"), measured.

    python scripts/bench/access_bench.py [--users 1000]

On an etcd of its own, with authentication on (a root user), it gives ``--users``
new users their team's access to namespace ``team-a`` with ``berth access grant``'s
own code (``berth.store.teams.grant``: the role brought to exactly its grants, the
user made with a new password, the role given), and prints the time per user beside
the floor measured in the same run: etcd making as many users with a password and
giving each a role that exists, with two calls and nothing read. etcd hashes every
password it is given (bcrypt, its cost 10): that is most of the floor, and no grant
can do without it.
"""

from __future__ import annotations

import argparse
import secrets
import time

from berth.store import EtcdConfig, Store
from berth.store import auth as etcd_auth
from berth.store.teams import grant, members, team_role
from berth_testkit.servers.etcd import EtcdServer


def floor(store: Store, n: int) -> float:
    """Seconds to add ``n`` users with a password and give each an existing role."""
    etcd_auth.define_role(store, "floor", [])
    t = time.perf_counter()
    for i in range(n):
        store.call("auth/user/add", {"name": f"floor-{i}", "password": secrets.token_hex(16)},
                   "adding a user")
        store.call("auth/user/grant", {"user": f"floor-{i}", "role": "floor"}, "granting")
    return time.perf_counter() - t


def granted(store: Store, n: int) -> float:
    """Seconds for ``berth access grant team-a --user <u>`` of ``n`` new users."""
    t = time.perf_counter()
    for i in range(n):
        grant(store, "team-a", f"dev-{i}")
    return time.perf_counter() - t


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=1000)
    args = parser.parse_args()
    server = EtcdServer().start()
    try:
        root = secrets.token_hex(16)
        server.etcdctl("user", "add", f"root:{root}")
        server.etcdctl("user", "grant-role", "root", "root")
        server.etcdctl("auth", "enable")
        store = Store(EtcdConfig(url=server.url, user="root", password=root))
        base = floor(store, args.users)
        ours = granted(store, args.users)
        held = members(store, "team-a")
        assert len(held) == args.users, f"{len(held)} members of {team_role('team-a')}"
        print(f"{args.users} users: floor (user add + grant, etcd hashing each password) "
              f"{base:.1f} s, {base / args.users * 1e3:.1f} ms each")
        print(f"{args.users} users: berth access grant {ours:.1f} s, "
              f"{ours / args.users * 1e3:.1f} ms each")
        print(f"  ratio grant/floor: {ours / base:.2f}")
        store.close()
    finally:
        server.cleanup()


if __name__ == "__main__":
    main()
