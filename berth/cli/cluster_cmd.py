"""``berth cluster register`` and ``berth cordon``/``uncordon``: the cluster chores
(and an agent's ``token create``, ``approve`` and ``revoke``: ``registration_cmd.py``).

``register NAME --kubeconfig FILE`` writes a Cluster from a kubeconfig file:
only the chosen context, its cluster and its user are kept (the other
credentials in the file are not copied), validated as bootstrap validates,
created or updated with a compare-and-swap; the kubeconfig is never printed.

``cordon CLUSTER`` adds the taint ``berth.dev/cordoned`` — ``NoSchedule``,
which in berth also moves the applications already there, make-before-break
(a drain); ``--soft`` makes it ``PreferNoSchedule``, which only steers new
placements away. ``uncordon`` removes it. Both bump the generation, so the
scheduler re-decides at once.
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec

from berth import yamlfile
from berth.bootstrap import LoadErrors, Planned, plan, write
from berth.bootstrap.load import to_document
from berth.cli.etcd_options import open_store
from berth.store import Conflict, Invalid, Store, decode, encode, keys
from berth.store.documents import Cluster
from berth.store.documents.infrastructure import Taint

CORDON = "berth.dev/cordoned"


def configure(p: argparse.ArgumentParser, name: str) -> None:
    """``berth cluster register``, ``berth cordon`` and ``berth uncordon``."""
    if name == "cluster":
        p.description = ("Register a Kubernetes cluster from a kubeconfig file; mint, approve "
                         "and revoke a pull cluster's agent.")
        chores = p.add_subparsers(dest="chore", required=True, metavar="CHORE")
        r = chores.add_parser("register", help="create or update a Cluster from a kubeconfig")
        r.add_argument("name", metavar="[NAMESPACE/]NAME")
        r.add_argument("-n", "--namespace", default="default", help="default: default")
        r.add_argument("--kubeconfig", required=True, metavar="FILE")
        r.add_argument("--context", help="the kubeconfig context to use (default: its current)")
        r.add_argument("--label", action="append", default=[], metavar="KEY=VALUE")
        r.add_argument("--metric", action="append", default=[], metavar="NAME=WEIGHT",
                       help="a GlobalMetric (or ns/NAME=WEIGHT for a namespaced Metric) and its "
                       "weight in the score")
        r.set_defaults(run=register)
        from berth.cli.registration_cmd import add_chores

        add_chores(chores)
        return
    p.description = (
        "Keep applications off a cluster (a taint)." if name == "cordon"
        else "Take the cordon's taint away.")
    p.add_argument("cluster", metavar="[NAMESPACE/]NAME")
    p.add_argument("-n", "--namespace", default="default", help="default: default")
    if name == "cordon":
        p.add_argument("--soft", action="store_true",
                       help="PreferNoSchedule: steer new placements away, keep the rest")
    p.set_defaults(run=cordon if name == "cordon" else uncordon)


def kubeconfig(path: str, context: str | None) -> dict[str, Any]:
    """The kubeconfig reduced to one context, its cluster and its user; ValueError
    naming the file and what is missing."""
    try:
        data = yamlfile.one(Path(path).read_text(), path)
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"--kubeconfig {path}: {exc}") from None
    except yamlfile.YamlRefused as exc:
        raise ValueError(f"--kubeconfig {exc}") from None
    if not isinstance(data, dict):
        raise ValueError(f"--kubeconfig {path}: not a kubeconfig (expected a mapping)")
    chosen = context or data.get("current-context")
    if not chosen:
        raise ValueError(f"--kubeconfig {path}: no current-context; give --context")

    def named(section: str, name: str) -> dict[str, Any]:
        for entry in data.get(section) or []:
            if isinstance(entry, dict) and entry.get("name") == name:
                return entry
        known = ", ".join(str(e.get("name")) for e in data.get(section) or []
                          if isinstance(e, dict))
        raise ValueError(f"--kubeconfig {path}: no {section[:-1]} {name!r} (has: {known or '-'})")

    ctx = named("contexts", chosen)
    inner = ctx.get("context") or {}
    return {"apiVersion": "v1", "kind": "Config", "current-context": chosen,
            "contexts": [ctx],
            "clusters": [named("clusters", str(inner.get("cluster")))],
            "users": [named("users", str(inner.get("user")))]}


def _pairs(items: list[str], what: str) -> list[tuple[str, str]]:
    out = []
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--{what} {item!r}: expected KEY=VALUE")
        out.append((key, value))
    return out


def register(args: argparse.Namespace) -> int:
    namespace, _, name = args.name.rpartition("/")
    namespace = namespace or args.namespace
    metrics = []
    for metric, weight in _pairs(args.metric, "metric"):
        try:
            metrics.append({"name": metric.rpartition("/")[2], "weight": float(weight),
                            "namespaced": "/" in metric})
        except ValueError:
            raise ValueError(f"--metric {metric}={weight}: the weight is not a number") from None
    data = {"api": "kubernetes", "kind": "Cluster",
            "metadata": {"name": name, "namespace": namespace,
                         "labels": dict(_pairs(args.label, "label"))},
            "spec": {"kubeconfig": kubeconfig(args.kubeconfig, args.context),
                     "metrics": metrics}}
    try:
        loaded = to_document(f"cluster {namespace}/{name}", data)
    except Invalid as exc:
        for line in str(exc).splitlines():
            print(f"error: {line}", file=sys.stderr)
        return 1
    store = open_store(args)
    try:
        planned: list[Planned] = plan(store, [loaded], force=True)
    except LoadErrors as exc:
        for line in exc.errors:
            print(f"error: {line}", file=sys.stderr)
        return 1
    write(store, planned)
    p = planned[0]
    print(f"cluster/{namespace}/{name} "
          f"{'unchanged' if p.unchanged else 'configured' if p.old else 'created'}")
    return 0


def cordon(args: argparse.Namespace) -> int:
    taint = Taint(CORDON, "PreferNoSchedule" if args.soft else "NoSchedule")
    return _taint(args, lambda taints: [*(t for t in taints if t.key != CORDON), taint],
                  f"cordoned ({taint.effect})")


def uncordon(args: argparse.Namespace) -> int:
    return _taint(args, lambda taints: [t for t in taints if t.key != CORDON], "uncordoned")


def _taint(args: argparse.Namespace, change: Any, said: str) -> int:
    namespace, _, name = args.cluster.rpartition("/")
    namespace = namespace or args.namespace
    key = keys.resource_key("Cluster", name, namespace)
    store = open_store(args)
    for _ in range(3):  # a concurrent change: read again and redo
        kv = store.get(key)
        if kv is None:
            print(f"error: cluster {namespace}/{name} not found", file=sys.stderr)
            return 1
        doc = decode(kv.value, Cluster, key)
        taints = change(doc.spec.taints)
        if taints == doc.spec.taints:
            print(f"cluster/{namespace}/{name} unchanged ({said} already)")
            return 0
        updated = msgspec.structs.replace(
            doc, spec=msgspec.structs.replace(doc.spec, taints=taints),
            metadata=msgspec.structs.replace(doc.metadata, generation=doc.metadata.generation
                                             + 1, modified=datetime.now(UTC)))
        if _update(store, key, encode(updated), kv.mod_revision):
            print(f"cluster/{namespace}/{name} {said}")
            return 0
    print(f"error: {key} keeps changing; try again", file=sys.stderr)
    return 1


def _update(store: Store, key: keys.Key, value: bytes, revision: int) -> bool:
    try:
        store.update(key, value, revision)
    except Conflict:
        return False
    return True
