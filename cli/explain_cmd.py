"""``berth explain application NS/NAME``: why a resource is placed where it is.

Reads the resource's Binding and prints the decision, the reason, the best
candidates with their score breakdown, and the rejected ones grouped by the
plugin and reason that rejected them.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from cli.etcd_options import open_store
from store import StoreError, decode, keys
from store.documents import Binding


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("explain", help="explain a scheduling decision",
                       description="Print a Binding's decision and explanation as tables.")
    p.add_argument("kind", choices=["application", "cluster"],
                   help="application (placed on clusters) or cluster (placed on a cloud)")
    p.add_argument("name", metavar="[NAMESPACE/]NAME", help="namespace defaults to 'default'")
    p.set_defaults(run=run)


def _metrics(entry: dict[str, Any]) -> str:
    parts = []
    for name, m in (entry.get("metrics") or {}).items():
        if "normalized" in m:
            parts.append(f"{name}={m['normalized']:g}x{m['weight']:g}")
        else:
            parts.append(f"{name}: {m.get('reason', '?')}")
    return " ".join(parts)


def render(b: Binding) -> str:
    spec, status = b.spec, b.status
    ref = spec.resource
    lines = [
        f"{ref.kind} {ref.namespace}/{ref.name}: {status.state or '?'} "
        f"(generation {spec.generation}"
        + (f", decided {spec.scheduled:%Y-%m-%d %H:%M:%S}Z)" if spec.scheduled else ")"),
        f"reason: {status.reason}",
        "targets: " + (", ".join(f"{t.kind} {t.namespace + '/' if t.namespace else ''}{t.name}"
                                 + (f" (score {t.score:.4f})" if t.score is not None else "")
                                 for t in spec.targets) or "none"),
    ]
    ranked = [e for e in status.explanation if "score" in e]
    rejected = [e for e in status.explanation if "rejected_by" in e]
    if ranked:
        lines += ["", f"{'CANDIDATE':<40} {'SCORE':>8} {'TIER':>4}  BREAKDOWN"]
        for e in ranked:
            breakdown = " ".join(f"{k}={v:.4f}" for k, v in e.get("scores", {}).items())
            extra = _metrics(e)
            lines.append(f"{e['candidate']:<40} {e['score']:>8.4f} {e.get('tier', 0):>4}  "
                         f"{breakdown}{'  ' + extra if extra else ''}")
    if rejected:
        lines += ["", f"{'REJECTED BY':<20} {'COUNT':>5}  REASON  (CANDIDATES)"]
        for e in rejected:
            names = ", ".join(c.rsplit("/", 1)[-1] for c in e.get("candidates", []))
            more = "" if e.get("count", 0) <= len(e.get("candidates", [])) else ", ..."
            lines.append(f"{e['rejected_by']:<20} {e.get('count', 1):>5}  {e['reason']}"
                         f"  ({names}{more})")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    namespace, _, name = args.name.rpartition("/")
    kind = "Application" if args.kind == "application" else "Cluster"
    try:
        key = keys.binding_key(kind, namespace or "default", name)
        kv = open_store(args).get(key)
        if kv is None:
            print(f"no Binding at {key}: not scheduled (yet), or left to another scheduler",
                  file=sys.stderr)
            return 1
        print(render(decode(kv.value, Binding, key)))
    except (ValueError, StoreError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0
