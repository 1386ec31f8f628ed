"""``berth explain application NS/NAME``: why a resource is placed where it is
(``berth explain overrides NS/NAME``: what each cluster's copy is, explain_overrides).

Reads the resource's Binding and prints the decision, the reason, the best
candidates with their score breakdown, and the rejected ones grouped by the
plugin and reason that rejected them. For an application, the propagator's
state comes next to the scheduler's: placed is not running, and a FAILED
application makes the command exit 1.
"""

from __future__ import annotations

import argparse
import json
import sys

import msgspec

from berth.actions.explain import propagation, render
from berth.actions.history import render_then, then, when
from berth.actions.resources import table
from berth.bootstrap import LoadErrors, load
from berth.cli import explain_overrides
from berth.cli.etcd_options import open_store
from berth.cli.history_cmd import read
from berth.cli.kinds import resolve, typed_name
from berth.controllers.scheduler.config import SchedulerConfig, load_config
from berth.controllers.scheduler.whatif import Answer, Consequence, leading_config, what_if
from berth.store import Store, decode, keys
from berth.store.documents import ApplicationStatus, AppState, Binding, BindingState

_KINDS = ("Application", "Cluster", "MagnumCluster")  # what the scheduler places


def configure(p: argparse.ArgumentParser, _name: str) -> None:
    """``berth explain``'s arguments (its one-line help is in :data:`cli.main.COMMANDS`)."""
    p.description = ("Print a Binding's decision and explanation as tables.")
    p.add_argument("kind", nargs="?",
                   help="application (placed on clusters), cluster (placed on a cloud) or "
                   "magnumcluster (placed on a project): any spelling get takes (app, apps), "
                   "or TYPE/[NAMESPACE/]NAME; or overrides APP: each cluster's copy against "
                   "the manifest")
    p.add_argument("name", nargs="?", metavar="[NAMESPACE/]NAME",
                   help="namespace defaults to -n's")
    p.add_argument("-n", "--namespace", default="default", help="default: default")
    p.add_argument("--what-if", metavar="FILE|-",
                   help="decide the applications in FILE as the scheduler would now, against "
                   "the current state; nothing is written")
    p.add_argument("--all", action="store_true", dest="every",
                   help="an application: decide it again now, as the leading scheduler "
                   "would, and list every candidate (the Binding keeps the best few)")
    p.add_argument("--config", metavar="FILE",
                   help="with --what-if or --all: the scheduler's configuration (default: "
                   "the leading scheduler's, else the defaults)")
    p.add_argument("--at", metavar="TIME",
                   help="an application: where it ran at TIME and why, from the ledger "
                   "(2026-11-28T01:00:00Z, a record id, or a duration ago: 2h)")
    p.add_argument("--cluster", metavar="[NAMESPACE/]NAME",
                   help="with overrides: this cluster's copy (default: every target's)")
    p.add_argument("-o", "--output", choices=["table", "json"], default="table")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.what_if:
        if args.kind or args.name or args.every:
            raise ValueError("--what-if FILE takes no KIND, NAME or --all: the file has them")
        return what_if_cmd(args)
    if not args.kind:
        raise ValueError("give KIND and [NAMESPACE/]NAME (or TYPE/NAME), or --what-if FILE")
    overrides = args.kind.partition("/")[0].lower() in ("overrides", "override", "ov")
    kind_text, given = typed_name(args.kind, args.name, command="explain")
    namespace, _, name = given.rpartition("/")
    namespace = namespace or args.namespace
    if overrides:
        code, text = explain_overrides.explain(open_store(args), namespace, name,
                                               args.cluster, args.output)
        print(text, file=sys.stderr if code else sys.stdout)
        return code
    if args.cluster:
        raise ValueError("--cluster goes with explain overrides APP")
    kind = resolve(kind_text).name
    if kind not in _KINDS:
        raise ValueError(f"explain takes {', '.join(sorted(_KINDS))}: the kinds the scheduler "
                         f"places, not {kind}")
    store = open_store(args)
    if args.at:
        if kind != "Application" or args.every:
            raise ValueError("--at explains an application from its ledger (without --all)")
        answer = then(read(store, namespace, name), when(args.at))
        if args.output == "json":
            print(json.dumps(answer.to_builtins(), indent=2, default=str))
        else:
            print(render_then(namespace, name, answer))
        return 0 if answer.decision is not None else 1
    if args.every:
        return every_candidate(args, store, kind, namespace, name)
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
    b = decode(kv.value, Binding, key)
    if args.output == "json":
        print(json.dumps(msgspec.to_builtins(b), indent=2))
        return 0
    print(render(b))
    if kind == "Application":
        status = _status(store, namespace, name)
        print(propagation(status))
        if status is not None and status.status.state == AppState.FAILED:
            return 1
    return 0


def _status(store: Store, namespace: str, name: str) -> ApplicationStatus | None:
    key = keys.status_key("Application", namespace, name)
    kv = store.get(key)
    return decode(kv.value, ApplicationStatus, key) if kv is not None else None


def _config(args: argparse.Namespace, store: Store) -> SchedulerConfig:
    if args.config:
        config, whose = load_config(args.config), args.config
    else:
        config, whose = leading_config(store)
    print(f"deciding with {whose}", file=sys.stderr)
    return config


def every_candidate(args: argparse.Namespace, store: Store, kind: str, namespace: str,
                    name: str) -> int:
    """``explain application NAME --all``: the stored application decided again on the
    current state, every candidate's verdict (exit 1 if it would not be placed)."""
    if kind != "Application":
        raise ValueError(f"--all decides applications, not {kind}")
    key = keys.resource_key(kind, name, namespace)
    kv = store.get(key)
    if kv is None:
        print(f"error: no {kind} {namespace}/{name} (nothing at {key})", file=sys.stderr)
        return 1
    try:
        doc = msgspec.json.decode(kv.value)
    except msgspec.DecodeError as exc:
        print(f"error: {key} does not hold a document: {exc}", file=sys.stderr)
        return 1
    result = what_if(store, _config(args, store), [(key, doc)], consequences=False)
    if not result.answers:
        print(f"error: {key} is not an application the scheduler decides", file=sys.stderr)
        return 1
    answer = result.answers[0]
    if args.output == "json":
        print(json.dumps(msgspec.to_builtins(answer), indent=2))
    else:
        print(render_answer(answer))
    return 0 if answer.state == BindingState.SCHEDULED else 1


def what_if_cmd(args: argparse.Namespace) -> int:
    """Exit 0 if every application in the file would be placed, 1 if one would not (or
    bad input)."""
    try:
        loaded = load([args.what_if])
    except LoadErrors as exc:
        for line in exc.errors:
            print(f"error: {line}", file=sys.stderr)
        return 1
    docs = [(item.key, msgspec.to_builtins(item.doc)) for item in loaded]
    store = open_store(args)
    result = what_if(store, _config(args, store), docs)
    if args.output == "json":
        print(json.dumps(result.to_dict(), indent=2))
    else:
        parts = [render_answer(a) for a in result.answers]
        others = len(docs) - len(result.answers)
        parts.append(render_consequences(result.consequences, others))
        print("\n\n".join(parts))
    return 0 if all(a.state == BindingState.SCHEDULED for a in result.answers) else 1


def render_consequences(consequences: list[Consequence], others: int) -> str:
    """The stored applications the file would move."""
    head = (f"With the file ({others} other document{'s' if others != 1 else ''} laid over "
            "the stored state), stored applications whose placement would change: "
            f"{len(consequences) or 'none'}")
    if not consequences:
        return head
    rows = [["APPLICATION", "NOW", "THEN", "WHY"]] + [
        [c.application, ",".join(c.now) or "-", ",".join(c.then) or "nowhere", c.reason]
        for c in consequences]
    return "\n".join([head, "", table(rows, gap=2)])


def render_answer(a: Answer) -> str:
    lines = [f"What if: Application {a.application} ("
             + ("stored; decided again from where it runs" if a.exists else "not stored")
             + "; nothing is written)",
             f"decision: {a.state}" + (" on " + ", ".join(
                 t + (f" ({a.replicas[t]} replica{'s' if a.replicas[t] != 1 else ''})"
                      if t in a.replicas else "") for t in a.targets) if a.targets else "")
             + (f" ({a.reason})" if a.reason else "")]
    rows = [["CANDIDATE", "VERDICT", "SCORE", "BREAKDOWN / WHY"]]
    for v in a.verdicts:
        name = v.candidate.split("/", 1)[1] if "/" in v.candidate else v.candidate
        if v.verdict == "rejected":
            why = v.reason + (f"; it has {v.actual}" if v.actual else "")
            rows.append([name, f"rejected by {v.rejected_by}", "-", why])
        else:
            rows.append([name, v.verdict, f"{v.score:.4f}" if v.score is not None else "-",
                         " ".join(f"{k}={x:.4f}" for k, x in v.scores.items()) or "-"])
    lines += ["", table(rows, gap=2)]
    return "\n".join(lines)
