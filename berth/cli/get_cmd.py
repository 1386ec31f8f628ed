"""``berth get KIND [[NS/]NAME]``: resources as a table, in kubectl's manner.

Kinds by plural, singular or short name in any case (``cli.kinds``); ``-n``
for a namespace (default ``default``), ``-A`` for all; ``-l`` a label
selector; ``-o wide|yaml|json|name``; ``--watch`` prints a row again whenever
the resource, its Binding, its status or its value changes. The columns are
the ones an operator asks about: applications show the scheduler's and the
propagator's state side by side.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterable
from typing import Any

import msgspec
import yaml

from berth.actions.resources import (
    Shown,
    age,
    agent_credential,
    listed,
    mask,
    one,
    ready,
    selected,
    selector,
    shown,
    table,
)
from berth.cli import events_view, jsonpath
from berth.cli.etcd_options import open_store
from berth.cli.kinds import named
from berth.store import Store, Watch, keys
from berth.store.documents import ApplicationStatus
from berth.store.documents.metrics import normalized
from berth.store.documents.selection import ClusterChoice

Column = tuple[str, Callable[[Shown], str]]


def _names(targets: Iterable[Any]) -> str:
    return ",".join(t.name for t in targets) or "-"


def _pairs(items: Iterable[tuple[str, Any]]) -> str:
    return ",".join(f"{k}={v}" for k, v in items) or "-"


def _doc(s: Shown, attr: str, default: Any = "-") -> Any:
    value: Any = s.doc
    for part in attr.split("."):
        if value is None:
            return default
        value = getattr(value, part, None)
    return default if value is None else value


def _state(s: Shown) -> str:
    return s.status.status.state or "-" if s.status is not None else "-"


def _placement(s: Shown) -> str:
    if s.binding is None:
        return "Pending"
    gen = _doc(s, "metadata.generation", "")
    if gen != "" and s.binding.spec.generation != gen:
        return f"Pending (gen {gen})"
    return s.binding.status.state or "-"


def _value(s: Shown) -> str:
    v = s.value.status.value if s.value is not None else None
    return "-" if v is None else f"{v:g}"


def _normalized(s: Shown) -> str:
    """The value as the scheduler scores it now: normalised by the definition as it is
    (the stored one was normalised when it was polled, maybe by another min/max)."""
    v = s.value.status.value if s.value is not None else None
    if v is None or s.doc is None:
        return "-"
    scaled = normalized(v, s.doc.spec.min, s.doc.spec.max)
    return "-" if scaled is None else f"{scaled[0]:.3f}"


def _metric_error(s: Shown) -> str:
    err = s.value.status.error if s.value is not None else None
    return "-" if err is None else err.reason


def ready_column(s: Shown, per_cluster: bool = False) -> str:
    """Replicas available / desired, as kubectl's READY: summed over the clusters the
    application runs on (``per_cluster``: each, ``east=2/2``); ``-`` for one without
    replicas (only configuration, say) or not judged yet."""
    if not isinstance(s.status, ApplicationStatus):
        return "-"
    targets = {f"{t.namespace or s.namespace or ''}/{t.name}"
               for t in s.binding.spec.targets} if s.binding else set()
    return ready(s.status.status.applied, targets, per_cluster)


def _selected(s: Shown, which: int) -> str:
    """How many applications (0) or clusters (1) an override selects; none says so."""
    if s.selects is None:
        return "-"
    n = s.selects[which]
    return f"{n}" if n else "0 (selects nothing)"


def _choice(c: ClusterChoice | None) -> str:
    """The clusters a set chooses, as its names and labels say (``all`` for none)."""
    if c is None:
        return "all"
    said = [*c.names, *(f"{k}={v}" for k, v in sorted(c.match_labels.items())),
            *(f"{e.key} {e.operator} {','.join(e.values)}".strip()
              for e in c.match_expressions)]
    return ";".join(said) or "all"


def _reason(s: Shown) -> str:
    if s.status is not None and s.status.status.reason:
        return s.status.status.reason
    return s.binding.status.reason if s.binding is not None and s.binding.status.reason else "-"


def _priority(s: Shown) -> str:
    """An application's class (its value resolved by the scheduler), or its own priority;
    ``-``: the default class's, else 0."""
    named = _doc(s, "spec.priority_class_name", None)
    own = _doc(s, "spec.priority", None)
    return str(named) if named else (str(own) if own is not None else "-")


def _credential(s: Shown) -> str:
    """A pull cluster's agent's etcd credential (``agent_credential``); "-" for push."""
    if str(_doc(s, "spec.mode", "Push")) != "Pull":
        return "-"
    return agent_credential(s)[0]


COLUMNS: dict[str, tuple[list[Column], list[Column]]] = {  # kind → (columns, -o wide adds)
    "Application": (
        [("PLACEMENT", _placement), ("STATE", _state), ("READY", ready_column),
         ("CLUSTERS", lambda s: _names(s.binding.spec.targets) if s.binding else "-"),
         ("AGE", lambda s: age(_doc(s, "metadata.created", None)))],
        [("GENERATION", lambda s: str(_doc(s, "metadata.generation"))),
         ("PRIORITY", _priority),
         ("READY PER CLUSTER", lambda s: ready_column(s, per_cluster=True)),
         ("RUNNING ON", lambda s: _names(s.status.status.running_on)
          if isinstance(s.status, ApplicationStatus) else "-"),
         ("REASON", _reason)]),
    "Cluster": (
        [("STATE", _state), ("MODE", lambda s: str(_doc(s, "spec.mode", "Push"))),
         ("CREDENTIAL", _credential),
         ("LABELS", lambda s: _pairs(sorted(s.labels.items()))),
         ("METRICS", lambda s: ",".join(f"{m.name}:{m.weight:g}"
                                        for m in _doc(s, "spec.metrics", [])) or "-"),
         ("AGE", lambda s: age(_doc(s, "metadata.created", None)))],
        [("REASON", lambda s: s.status.status.reason or "-" if s.status else "-"),
         ("TAINTS", lambda s: ",".join(f"{t.key}:{t.effect}"
                                       for t in _doc(s, "spec.taints", [])) or "-"),
         ("CLOUD", lambda s: _names(s.binding.spec.targets) if s.binding else "-")]),
    "Metric": (
        [("VALUE", _value), ("NORMALIZED", _normalized),
         ("AGE", lambda s: age(s.value.status.observed if s.value else None)),
         ("ERROR", _metric_error)],
        [("PROVIDER", lambda s: str(_doc(s, "spec.provider.name"))),
         ("MIN", lambda s: f"{_doc(s, 'spec.min', 0):g}"),
         ("MAX", lambda s: f"{_doc(s, 'spec.max', 0):g}")]),
    "Project": (
        [("LABELS", lambda s: _pairs(sorted(s.labels.items()))),
         ("METRICS", lambda s: ",".join(f"{m.name}:{m.weight:g}"
                                        for m in _doc(s, "spec.metrics", [])) or "-"),
         ("AGE", lambda s: age(_doc(s, "metadata.created", None)))],
        [("URL", lambda s: str(_doc(s, "spec.url")))]),
    "MagnumCluster": (
        [("PLACEMENT", _placement),
         ("PROJECT", lambda s: _names(s.binding.spec.targets) if s.binding else "-"),
         ("AGE", lambda s: age(_doc(s, "metadata.created", None)))],
        [("REASON", _reason)]),
    "MetricsProvider": (
        [("TYPE", lambda s: str(_doc(s, "spec.type"))),
         ("AGE", lambda s: age(_doc(s, "metadata.created", None)))], []),
    "Override": (
        [("APPLICATIONS", lambda s: _selected(s, 0)), ("CLUSTERS", lambda s: _selected(s, 1)),
         ("RULES", lambda s: str(len(_doc(s, "spec.rules", [])))),
         ("AGE", lambda s: age(_doc(s, "metadata.created", None)))],
        [("GENERATION", lambda s: str(_doc(s, "metadata.generation")))]),
    "Pace": (
        [("IN TRANSITION", lambda s: str(_doc(s, "spec.in_transition", 0) or "-")),
         ("PER MINUTE", lambda s: str(_doc(s, "spec.per_minute", 0) or "-")),
         ("WINDOWS", lambda s: ",".join(
             f"{w.start}-{w.end}" + (f"({'/'.join(w.days)})" if w.days else "")
             for w in _doc(s, "spec.windows", [])) or "-"),
         ("AGE", lambda s: age(_doc(s, "metadata.created", None)))], []),
    "PriorityClass": (
        [("VALUE", lambda s: str(_doc(s, "spec.value"))),
         ("GLOBAL DEFAULT", lambda s: str(bool(_doc(s, "spec.global_default", False))).lower()),
         ("PREEMPTION POLICY", lambda s: str(_doc(s, "spec.preemption_policy"))),
         ("AGE", lambda s: age(_doc(s, "metadata.created", None)))],
        [("DESCRIPTION", lambda s: str(_doc(s, "spec.description", "")) or "-")]),
    "Export": (
        [("NAMESPACE", lambda s: str(_doc(s, "spec.namespace"))),
         ("SHAPES", lambda s: ",".join(_doc(s, "spec.shapes", []))),
         ("STATE", lambda s: s.exported.status.state.value if s.exported else "-"),
         ("OBJECTS", lambda s: str(sum(s.exported.status.objects.values()))
          if s.exported else "-"),
         ("AGE", lambda s: age(_doc(s, "metadata.created", None)))],
        [("SYNCED", lambda s: age(s.exported.status.synced) if s.exported else "-"),
         ("REASON", lambda s: (s.exported.status.reason or "-") if s.exported else "-")]),
    "Inventory": (
        [("HUB NAMESPACE", lambda s: str(_doc(s, "spec.namespace"))),
         ("INTO", lambda s: str(_doc(s, "spec.cluster_namespace"))),
         ("STATE", lambda s: s.inventoried.status.state.value if s.inventoried else "-"),
         ("PROFILES", lambda s: str(len(s.inventoried.status.profiles))
          if s.inventoried else "-"),
         ("AGE", lambda s: age(_doc(s, "metadata.created", None)))],
        [("REASON", lambda s: (s.inventoried.status.reason or "-") if s.inventoried
          else "-")]),
    "ClusterSet": (
        [("NAMESPACES", lambda s: ",".join(_doc(s, "spec.namespaces", []))),
         ("CLUSTERS", lambda s: _choice(_doc(s, "spec.clusters", None))),
         ("AGE", lambda s: age(_doc(s, "metadata.created", None)))], []),
    "NamespacePolicy": (
        [("CLUSTER SETS", lambda s: ",".join(_doc(s, "spec.cluster_sets", [])) or "-"),
         ("PRIORITY CLASSES", lambda s: "any" if (
             c := _doc(s, "spec.priority_classes", None)) is None else ",".join(c) or "none"),
         ("MAX PRIORITY", lambda s: "any" if (
             m := _doc(s, "spec.max_priority", None)) is None else str(m)),
         ("AGE", lambda s: age(_doc(s, "metadata.created", None)))], []),
    "Cloud": (
        [("LABELS", lambda s: _pairs(sorted(s.labels.items()))),
         ("METRICS", lambda s: ",".join(f"{m.name}:{m.weight:g}"
                                        for m in _doc(s, "spec.metrics", [])) or "-"),
         ("AGE", lambda s: age(_doc(s, "metadata.created", None)))],
        [("TYPE", lambda s: str(_doc(s, "spec.type")))]),
}


def columns(kind: keys.Kind, wide: bool, all_namespaces: bool) -> list[Column]:
    base, more = COLUMNS[kind.name.removeprefix("Global")]
    head: list[Column] = [("NAME", lambda s: s.name)]
    if all_namespaces and kind.namespaced:
        head.insert(0, ("NAMESPACE", lambda s: s.namespace or "-"))
    cols = head + base + (more if wide else [])
    return [(title, _guarded(cell)) for title, cell in cols]


def _guarded(cell: Callable[[Shown], str]) -> Callable[[Shown], str]:
    def safe(s: Shown) -> str:
        try:
            return cell(s)
        except (AttributeError, TypeError, ValueError):
            return "<invalid>" if s.doc is None else "-"
    return safe


def document(s: Shown, secrets: bool) -> Any:
    """The stored document, with what the processes say of it as ``status`` (as
    kubectl shows an object's status): an application's placement (the Binding) and
    propagation (its status key), a cluster's observed state, a metric's value."""
    if s.raw is None:
        return {"key": s.key, "error": s.error}
    doc = dict(s.raw if secrets else mask(s.raw))
    status: dict[str, Any] = {}
    if s.binding is not None:
        b = msgspec.to_builtins(s.binding)
        status["placement"] = {**b.get("status", {}), **{
            k: v for k, v in b.get("spec", {}).items() if k != "resource"}}
        status["placement"].pop("explanation", None)  # berth explain shows it
    if s.status is not None:
        status["propagation" if s.kind.name == "Application" else "observed"] = (
            msgspec.to_builtins(s.status.status))
    if s.value is not None:
        status["value"] = msgspec.to_builtins(s.value.status)
    if s.exported is not None:
        status["exported"] = msgspec.to_builtins(s.exported.status)
    if status:
        doc["status"] = status
    return doc


def plain_document(s: Shown, secrets: bool) -> Any:
    """:func:`document` as plain JSON values (times as text): what templates read."""
    return json.loads(json.dumps(document(s, secrets), default=str))


def configure(p: argparse.ArgumentParser, _name: str) -> None:
    """``berth get``'s arguments (its one-line help is in :data:`cli.main.COMMANDS`)."""
    p.description = ("Show resources of a kind with what the scheduler, the "
                     "propagator and the metrics-cache say of them.")
    p.add_argument("kind", help="applications, clusters, metrics, globalmetrics, clouds, "
                   "metricsproviders, ... (singular, plural or short name, any case)")
    p.add_argument("names", nargs="*", metavar="[NAMESPACE/]NAME")
    add_listing_options(p)
    p.add_argument("-o", "--output", type=_output, metavar="FORMAT",
                   help="wide: more columns; yaml, json: the documents with their status; "
                   "name: kind/ns/name; jsonpath=TEMPLATE, custom-columns=TITLE:PATH,... "
                   "(kubectl's)")
    p.add_argument("--no-headers", action="store_true", help="tables without the title row")
    p.add_argument("--sort-by", metavar="PATH",
                   help="order by this field of the documents (e.g. .metadata.created)")
    p.add_argument("-w", "--watch", action="store_true",
                   help="after the table, print a row whenever one changes (Ctrl-C ends)")
    p.add_argument("--show-secrets", action="store_true",
                   help="print credential fields as stored (secrets are stored apart: "
                   "<stored apart>)")
    p.add_argument("--for", dest="for_", metavar="KIND/[NAMESPACE/]NAME",
                   help="with events: only those of this object (app/web, cluster/de-1)")
    p.set_defaults(run=run)


def add_listing_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-n", "--namespace", default="default", help="default: default")
    p.add_argument("-A", "--all-namespaces", action="store_true")
    p.add_argument("-l", "--selector", help="labels: k=v, k!=v, k, !k, comma-joined")


def _output(text: str) -> str:
    """``-o``: a plain format, or a template checked now (not per row)."""
    if text in ("wide", "yaml", "json", "name"):
        return text
    form, eq, template = text.partition("=")
    if form in ("jsonpath", "custom-columns") and eq and template:
        try:
            if form == "jsonpath":
                jsonpath.render(template, {})
            else:
                jsonpath.custom_columns(template)
        except jsonpath.TemplateError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        return text
    raise argparse.ArgumentTypeError(
        f"{text!r}: one of wide, yaml, json, name, jsonpath=TEMPLATE, "
        "custom-columns=TITLE:PATH,...")


def run(args: argparse.Namespace) -> int:
    if args.kind.lower() in events_view.NAMES:
        return events_view.get(args)
    if args.for_:
        raise ValueError("--for goes with get events")
    groups = named(args.kind, args.names)
    if args.watch and len(groups) > 1:
        raise ValueError("--watch follows one kind at a time")
    terms = selector(args.selector) if args.selector else []
    store = open_store(args)
    namespace = None if args.all_namespaces else args.namespace
    revision = store.revision()
    found: list[tuple[keys.Kind, list[Shown]]] = []
    missing = 0
    for kind, names in groups:
        items, lost = _items(store, kind, names, args.namespace, namespace, terms)
        missing += lost
        for s in items:
            if s.error:
                print(f"warning: {s.key}: {s.error}", file=sys.stderr)
        found.append((kind, _sorted(items, args.sort_by, args.show_secrets)
                      if args.sort_by else items))
    if missing and not any(items for _, items in found):
        return 1
    output = args.output or ""
    single = sum(len(names) for _, names in groups) == 1
    if len(found) > 1 and (output in ("json", "yaml", "name") or output.startswith(
            "jsonpath=")):  # one list of every kind's, as kubectl prints them
        _print([s for _, items in found for s in items], [], args, header=False,
               single=single)
    else:
        for i, (kind, items) in enumerate(found):
            if i and items:
                print()
            cols = columns(kind, output == "wide", args.all_namespaces)
            _print(items, cols, args, header=not args.no_headers, single=single)
            if not items and output not in ("json", "yaml"):
                where = "" if args.all_namespaces or not kind.namespaced else f" in {namespace}"
                print(f"No {kind.plural} found{where}.", file=sys.stderr)
    if args.watch:
        kind, names = groups[0]
        _watch(store, kind, names, namespace, args, terms,
               columns(kind, output == "wide", args.all_namespaces), revision)
    return 1 if missing else 0


def _items(store: Store, kind: keys.Kind, names: list[str], default_ns: str,
           namespace: str | None, terms: list[tuple[str, str, str]]
           ) -> tuple[list[Shown], int]:
    """The resources of ``kind`` named (each said when missing), else all there are in
    ``namespace`` (None: every one) that the selector takes; and how many were missing."""
    if not names:
        return [s for s in listed(store, kind, namespace) if selected(s.labels, terms)], 0
    items, missing = [], 0
    for given in names:
        ns, _, name = given.rpartition("/")
        shown_ = one(store, kind, ns or default_ns, name)
        if shown_ is None:
            where = f"{ns or default_ns}/" if kind.namespaced else ""
            print(f"error: {kind.name.lower()} {where}{name} not found", file=sys.stderr)
            missing += 1
        else:
            items.append(shown_)
    return items, missing


def _sorted(items: list[Shown], path: str, secrets: bool) -> list[Shown]:
    """By a field of the documents, as kubectl's --sort-by: missing values first,
    numbers as numbers."""
    path = path.strip().removeprefix("{").removesuffix("}")

    def key(s: Shown) -> tuple[int, float, str]:
        found = jsonpath.values(plain_document(s, secrets), path)
        if not found:
            return (0, 0.0, "")
        v = found[0]
        if isinstance(v, int | float) and not isinstance(v, bool):
            return (1, float(v), "")
        return (2, 0.0, jsonpath.text_of(v))
    try:
        return sorted(items, key=key)
    except jsonpath.TemplateError as exc:
        raise ValueError(f"--sort-by: {exc}") from None


def _print(items: list[Shown], cols: list[Column], args: argparse.Namespace, *,
           header: bool, single: bool = False) -> None:
    """``single``: one resource was named (a document, not a List, in JSON or YAML)."""
    output = args.output or ""
    if output == "name":
        for s in items:
            print(s.ref)
    elif output in ("json", "yaml") or output.startswith("jsonpath="):
        docs = [plain_document(s, args.show_secrets) for s in items]
        data: Any = docs[0] if single and docs else {"kind": "List",
                                                                  "items": docs}
        if output == "json":
            print(json.dumps(data, indent=2))
        elif output == "yaml":
            print(yaml.safe_dump(data, sort_keys=False, default_flow_style=False).rstrip())
        else:
            print(jsonpath.render(output.removeprefix("jsonpath="), data), flush=True)
    elif items:
        if output.startswith("custom-columns="):
            spec = jsonpath.custom_columns(output.removeprefix("custom-columns="))
            docs = [plain_document(s, args.show_secrets) for s in items]
            rows = [[title for title, _ in spec]] + [
                [jsonpath.cell(d, path) for _, path in spec] for d in docs]
        else:
            rows = [[title for title, _ in cols]] + [[cell(s) for _, cell in cols]
                                                     for s in items]
        text = table(rows)
        print(text if header else text.split("\n", 1)[1], flush=True)


def _watch(store: Store, kind: keys.Kind, names: list[str], namespace: str | None,
           args: argparse.Namespace, terms: list[tuple[str, str, str]], cols: list[Column],
           revision: int) -> None:
    """Print a row (or a document) whenever a resource of ``kind`` or a key the
    processes write of it changes; deleted resources are printed once as deleted."""
    for batch in Watch(store, keys.ROOT, revision + 1):
        for ev in batch.events:
            try:
                ref = keys.parse_key(ev.key)
            except ValueError:
                continue
            family_kind = ref.kind.name
            if ref.family == "metricvalue" and kind.name in ("Metric", "GlobalMetric"):
                family_kind = kind.name if bool(ref.namespace) == kind.namespaced else ""
            if family_kind != kind.name or (namespace and kind.namespaced
                                            and ref.namespace != namespace):
                continue
            if names and ref.name not in {n.rpartition("/")[2] for n in names}:
                continue
            kv = store.get(keys.resource_key(kind.name, ref.name, ref.namespace))
            if kv is None:
                if ref.family == "resource" and ev.type == "DELETE":
                    print(f"{kind.name.lower()}/{ref.namespace + '/' if ref.namespace else ''}"
                          f"{ref.name} deleted", flush=True)
                continue
            s = shown(store, kind, kv)
            if selected(s.labels, terms):
                _print([s], cols, args, header=False, single=len(names) == 1)
