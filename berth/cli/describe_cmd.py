"""``berth describe KIND [NS/]NAME``: one resource and everything said of it.

An application: its spec in short, the scheduler's Binding (state, reason,
targets, the best candidates), the propagator's status (state, what is on
each cluster, errors) and its recent history, newest first, from the ledger
(``berth history`` prints all of it). A cluster: its labels, metrics, taints and state, and the
applications placed on it. A metric: its definition and current value.
Other kinds: the document. Every kind ends with its latest events, as kubectl's
describe does. Credentials are masked unless ``--show-secrets``.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import yaml

from berth.actions.history import lines
from berth.actions.resources import (
    Shown,
    age,
    agent_credential,
    decided,
    one,
    priority,
    room,
    target_note,
)
from berth.cli.etcd_options import open_store
from berth.cli.events_view import described
from berth.cli.get_cmd import document
from berth.cli.history_cmd import read
from berth.cli.kinds import resolve, typed_name
from berth.store import Store, StoreError, decode, keys
from berth.store.documents import ApplicationStatus, Binding, ClusterStatus

HISTORY = 8  # ledger records shown


def configure(p: argparse.ArgumentParser, _name: str) -> None:
    """``berth describe``'s arguments (its one-line help is in :data:`cli.main.COMMANDS`)."""
    p.description = ("Show a resource with what the scheduler, the propagator "
                     "and the metrics-cache say of it, and its recent history.")
    p.add_argument("kind", help="a kind (app, cluster, ...), or TYPE/[NAMESPACE/]NAME")
    p.add_argument("name", nargs="?", metavar="[NAMESPACE/]NAME",
                   help="namespace defaults to -n's")
    p.add_argument("-n", "--namespace", default="default", help="default: default")
    p.add_argument("--show-secrets", action="store_true",
                   help="print credential fields as stored (secrets are stored apart)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    kind_text, given = typed_name(args.kind, args.name, command="describe")
    kind = resolve(kind_text)
    ns, _, name = given.rpartition("/")
    ns = ns or args.namespace
    store = open_store(args)
    s = one(store, kind, ns, name)
    if s is None:
        where = f"{ns}/" if kind.namespaced else ""
        print(f"error: {kind.name.lower()} {where}{name} not found", file=sys.stderr)
        return 1
    lines = _header(s)
    if s.doc is None:
        lines.append(f"Invalid:     {s.error}")
    elif kind.name == "Application":
        lines += _application(store, s)
    elif kind.name == "Cluster":
        lines += _cluster(store, s)
    elif kind.name in ("Metric", "GlobalMetric"):
        lines += _metric(s)
    else:
        spec = document(s, args.show_secrets).get("spec", {})
        lines += ["Spec:", *("  " + line for line in
                             yaml.safe_dump(spec, sort_keys=False).rstrip().splitlines())]
        if kind.name == "MagnumCluster":
            lines += placement(s)
        if kind.name == "Export":
            lines += _exported(s)
        if kind.name == "Inventory":
            lines += _inventoried(s)
    for note in s.notes:
        lines.append(f"Warning:     {note}")
    lines += described(store, kind.name, ns if kind.namespaced else None, name)
    print("\n".join(lines))
    return 0


def _header(s: Shown) -> list[str]:
    meta = s.doc.metadata if s.doc is not None else None
    out = [f"Name:        {s.namespace + '/' if s.namespace else ''}{s.name}",
           f"Kind:        {s.kind.name}"]
    if meta is not None:
        out += [f"Created:     {meta.created:%Y-%m-%d %H:%M:%S}Z ({age(meta.created)} ago)"
                if meta.created else "Created:     -",
                f"Generation:  {meta.generation}",
                "Labels:      " + (", ".join(f"{k}={v}" for k, v in sorted(meta.labels.items()))
                                   or "-")]
        if meta.deleted is not None:
            out.append(f"Deleting:    since {meta.deleted:%Y-%m-%d %H:%M:%S}Z")
    return out


def _application(store: Store, s: Shown) -> list[str]:
    spec = s.doc.spec
    cons = spec.constraints.cluster if spec.constraints and spec.constraints.cluster else None
    out = ["Constraints: " + ("; ".join(
        f"{what}: {', '.join(items)}" for what, items in (
            ("labels", cons.labels), ("metrics", cons.metrics),
            ("custom resources", cons.custom_resources)) if items) or "-" if cons else "-"),
           "Manifest:    " + (", ".join(
               f"{o.get('kind', '?')} {(o.get('metadata') or {}).get('name', '?')}"
               for o in spec.manifest if isinstance(o, dict)) or "-")]
    if spec.pace is not None:
        out.append("Pace:        its own over the fleet's: " + (", ".join(
            f"{field} {value}" for field, value in (
                ("inTransition", spec.pace.in_transition), ("perMinute", spec.pace.per_minute),
                ("windows", None if spec.pace.windows is None else ", ".join(
                    f"{w.start}-{w.end}" + (f" {'/'.join(w.days)}" if w.days else "")
                    for w in spec.pace.windows) or "none")) if value is not None) or "-"))
    out.append(f"Priority:    {priority(spec)}")
    if spec.depends_on:
        out.append("Depends on:  " + ", ".join(
            (f"{d.namespace}/" if d.namespace else "") + d.name
            + (f" (when {d.when})" if d.when != "Available" else "")
            for d in spec.depends_on))
    out += placement(s)
    out += room(s.binding)
    st = s.status.status if isinstance(s.status, ApplicationStatus) else None
    if st is None:
        out.append("Propagator:  no status yet (not applied anywhere)")
    else:
        out += [f"Propagator:  {st.state or '?'}" + (f" ({st.reason})" if st.reason else ""),
                "  Running on: " + (", ".join(r.name for r in st.running_on) or "nowhere")
                + (f" (generation {st.generation})" if st.running_on else "")]
        for cid, applied in sorted(st.applied.items()):
            state = f"generation {applied.generation}" if applied.generation else "recorded"
            health = applied.health or "not judged yet"
            if applied.desired is not None:
                health += f", {applied.available or 0}/{applied.desired} available"
            if applied.reason:
                health += f" ({applied.reason})"
            out.append(f"  {cid}: {state}: {health}")
            for obj in applied.objects:
                said = applied.unhealthy.get(str(obj)) or (
                    "Complete" if obj in applied.done else "not judged yet"
                    if not (applied.generation and applied.health) else
                    "Running (not complete)" if obj.job else "Healthy")
                out.append(f"    {obj}: {said}")
        for cid, failed in sorted(st.failed.items()):
            out.append(f"  Failed on {cid}: not available in time at generation "
                       f"{failed.generation}, {failed.at:%Y-%m-%d %H:%M:%S}Z ({failed.reason})")
        for cid, error in sorted(st.errors.items()):
            out.append(f"  Error on {cid}: {error}")
        for cid, why in sorted(st.waits_for.items()):
            out.append(f"  Waits on {cid}: {why} (not applied there until then)")
        r = st.rollout
        if r is not None:
            out.append(f"Rollout:     generation {r.generation} {r.phase or '-'}"
                       + (f" (from generation {r.stable})" if r.stable and r.stable !=
                          r.generation else "") + (f": {r.reason}" if r.reason else ""))
            out += [f"  Failed on {cid}: {why}" for cid, why in sorted(r.failed.items())]
    entries = read(store, s.namespace or "", s.name)
    if entries:
        head, *rows = lines(entries[-HISTORY:])
        out.append(f"History (newest first, from the ledger; berth history {s.namespace}/"
                   f"{s.name} for all {len(entries)}):")
        out += [f"  {line}" for line in [head, *reversed(rows)]]
    return out


def placement(s: Shown) -> list[str]:
    """The scheduler's side: the Binding's state, reason, targets and best candidates."""
    b = s.binding
    if b is None:
        return ["Placement:   not scheduled (yet): no Binding; is a scheduler running?"]
    stale = b.spec.generation != s.doc.metadata.generation
    out = [f"Placement:   {b.status.state or '?'} (generation {b.spec.generation}"
           + decided(b)
           + (f"; generation {s.doc.metadata.generation} not decided yet" if stale else "")
           + ")",
           f"  Reason:    {b.status.reason or '-'}",
           "  Targets:   " + (", ".join(t.name + target_note(t) for t in b.spec.targets)
                              or "none")]
    best = [e for e in b.status.explanation if "score" in e][:5]
    if best:
        out.append("  Best:      " + ", ".join(
            f"{e['candidate'].rsplit('/', 1)[-1]} {e['score']:.4f}" for e in best))
    return out


def _cluster(store: Store, s: Shown) -> list[str]:
    spec = s.doc.spec
    st = s.status.status if isinstance(s.status, ClusterStatus) else None
    on = _placed_on(store, s)
    pull = spec.mode == "Pull"
    return [
        "Mode:        " + ("Pull: its agent carries out its work (docs/agents.md)" if pull
                           else "Push: the propagator dials its API"),
        *(["Agent:       " + agent_credential(s)[1]] if pull else []),
        *([f"Removals:    held by its agent: {st.held}"] if st is not None and st.held else []),
        "Kubeconfig:  " + ("present (masked)" if spec.kubeconfig else
                           "none: its agent has the cluster's credentials" if pull else
                           "none: placed on a cloud by the scheduler"),
        "Metrics:     " + (", ".join(f"{m.name} (weight {m.weight:g})" for m in spec.metrics)
                           or "-"),
        "Custom resources: " + (", ".join(spec.custom_resources) or "-"),
        "Taints:      " + (", ".join(f"{t.key}={t.value or ''}:{t.effect}" for t in spec.taints)
                           or "-"),
        "State:       " + (f"{st.state or 'not probed yet'}"
                           + (f" ({st.reason})" if st.reason else "")
                           + (f", status written {age(st.probed)} ago (when it changes; "
                              "probed every probe_interval)" if st.probed else "")
                           + (f"; back ONLINE {age(st.returned)} ago" if st.returned else "")
                           if st is not None else "not observed (yet)"),
        "Kubernetes:  " + ((st.version or "version not known")
                           + (f", at {st.endpoint.server}" if st.endpoint is not None else "")
                           if st is not None else "not observed (yet)"),
        f"Applications: {len(on)}" + (f" ({', '.join(on[:10])}"
                                      + (", ..." if len(on) > 10 else "") + ")" if on else ""),
    ]


def _placed_on(store: Store, s: Shown) -> list[str]:
    """The applications whose Binding names this cluster."""
    out = []
    for kv in store.list_prefix(keys.binding_prefix("Application"))[0]:
        try:
            b = decode(kv.value, Binding, kv.key)
        except StoreError:
            continue
        if any(t.kind == "Cluster" and t.name == s.name
               and (t.namespace or b.spec.resource.namespace) == s.namespace
               for t in b.spec.targets):
            out.append(f"{b.spec.resource.namespace}/{b.spec.resource.name}")
    return sorted(out)


def _exported(s: Shown) -> list[str]:
    """What the exporter made of an Export: its state, objects by shape, refusals."""
    st = s.exported.status if s.exported is not None else None
    if st is None:
        return ["Exported:    nothing yet (is an exporter running? docs/argocd.md)"]
    out = [f"Exported:    {st.state.value}" + (f": {st.reason}" if st.reason else "")
           + (f" (synced {age(st.synced)} ago)" if st.synced else ""),
           "Objects:     " + (", ".join(f"{n} {shape}" for shape, n in st.objects.items())
                              or "-")]
    out += [f"Refused:     {item}: {why}" for item, why in st.refused.items()]
    return out


def _inventoried(s: Shown) -> list[str]:
    """What the inventory process made of an Inventory: its state, each profile's."""
    st = s.inventoried.status if s.inventoried is not None else None
    if st is None:
        return ["Inventory:   nothing yet (is an inventory process running? "
                "docs/inventory.md)"]
    out = [f"Inventory:   {st.state.value}" + (f": {st.reason}" if st.reason else "")
           + (f" (so since {age(st.synced)})" if st.synced else "")]
    out += [f"Profile:     {name} → {p.cluster or '-'}: {p.state.value}"
            + (f" ({p.reason})" if p.reason else "") for name, p in sorted(st.profiles.items())]
    return out


def _metric(s: Shown) -> list[str]:
    spec = s.doc.spec
    out: list[Any] = [
        f"Provider:    {spec.provider.name} (metric {spec.provider.metric!r})",
        f"Range:       {spec.min:g} .. {spec.max:g}"
        + (f"; allowed values {', '.join(f'{v:g}' for v in spec.allowed_values)}"
           if spec.allowed_values else "")]
    v = s.value.status if s.value is not None else None
    if v is None:
        out.append("Value:       none yet (is a metrics-cache running, and does a cluster "
                   "or cloud use this metric?)")
    else:
        out.append("Value:       " + ("-" if v.value is None else f"{v.value:g}")
                   + (f" (normalized {v.normalized:.3f})" if v.normalized is not None else "")
                   + (", out of range" if v.out_of_range else "")
                   + (f", observed {age(v.observed)} ago" if v.observed else ""))
        if v.error is not None:
            out.append(f"Error:       {v.error.reason}: {v.error.message}")
    return out
