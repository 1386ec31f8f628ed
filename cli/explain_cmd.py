"""``berth explain application NS/NAME``: why a resource is placed where it is.

Reads the resource's Binding and prints the decision, the reason, the best
candidates with their score breakdown, and the rejected ones grouped by the
plugin and reason that rejected them. For an application, the propagator's
state comes next to the scheduler's: placed is not running, and a FAILED
application makes the command exit 1.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from cli.etcd_options import open_store
from store import Store, decode, keys
from store.documents import ApplicationStatus, Binding


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


def propagation(status: ApplicationStatus | None) -> str:
    """The propagator's side of an application, in one line."""
    if status is None:
        return "propagator: no status yet (not applied anywhere)"
    st = status.status
    where = ", ".join(f"{r.namespace + '/' if r.namespace else ''}{r.name}"
                      for r in st.running_on) or "nowhere"
    reason = f" ({st.reason})" if st.reason else ""
    return f"propagator: {st.state or '?'}{reason}; running on {where}"


def run(args: argparse.Namespace) -> int:
    namespace, _, name = args.name.rpartition("/")
    namespace = namespace or "default"
    kind = "Application" if args.kind == "application" else "Cluster"
    store = open_store(args)
    key = keys.binding_key(kind, namespace, name)
    kv = store.get(key)
    if kv is None:
        resource = keys.resource_key(kind, name, namespace)
        if store.get(resource) is None:
            print(f"error: no {kind} {namespace}/{name} (nothing at {resource})",
                  file=sys.stderr)
        else:
            print(f"{kind} {namespace}/{name} exists but is not scheduled (yet): no "
                  f"Binding at {key}; is a scheduler running?", file=sys.stderr)
        return 1
    print(render(decode(kv.value, Binding, key)))
    if kind == "Application":
        status = _status(store, namespace, name)
        print(propagation(status))
        if status is not None and status.status.state == "FAILED":
            return 1
    return 0


def _status(store: Store, namespace: str, name: str) -> ApplicationStatus | None:
    key = keys.status_key("Application", namespace, name)
    kv = store.get(key)
    return decode(kv.value, ApplicationStatus, key) if kv is not None else None
