"""``berth wait KIND NAME... --for=CONDITION``: until a condition holds, as kubectl's.

A condition is read from the same document ``get -o yaml`` prints (the
resource with its ``status``):

* ``state=RUNNING`` — the propagator's state of an application, the observed
  state of a cluster;
* ``placement=Scheduled`` — the scheduler's Binding state;
* ``ready`` — every replica available (``READY`` n/n, n > 0);
* ``delete`` — the resource is gone;
* ``jsonpath={.PATH}=VALUE`` (or ``jsonpath={.PATH}``: the field exists and is
  not empty, false or 0) — anything else.

Exit 0 once it holds for every name; 1 when ``--timeout`` (30s; ``90``, ``2m``,
``1h``) passes first (``timed out waiting for the condition on …``) or a name
does not exist (except with ``delete``); 2 for a condition berth cannot read.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Callable

from berth.actions.resources import Shown, one
from berth.cli import jsonpath
from berth.cli.etcd_options import open_store
from berth.cli.get_cmd import plain_document, ready_column
from berth.cli.kinds import named
from berth.store import keys

POLL = 0.5
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m|h)?$")
SHORTHANDS = {"state": "{.status.propagation.state}",
              "placement": "{.status.placement.state}"}


def configure(p: argparse.ArgumentParser, _name: str) -> None:
    """``berth wait``'s arguments (its one-line help is in :data:`cli.main.COMMANDS`)."""
    p.description = __doc__.split("\n\n", 1)[1] if __doc__ else None
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.add_argument("kind", help="a kind (app, cluster, ...), or TYPE/[NAMESPACE/]NAME")
    p.add_argument("names", nargs="*", metavar="[NAMESPACE/]NAME")
    p.add_argument("-n", "--namespace", default="default", help="default: default")
    p.add_argument("--for", dest="condition", required=True, type=condition,
                   metavar="CONDITION", help="state=S, placement=S, ready, delete or "
                   "jsonpath={.PATH}[=VALUE]")
    p.add_argument("--timeout", type=duration, default=30.0, metavar="DURATION",
                   help="30s (default), 90, 2m, 1h")
    p.set_defaults(run=run)


def duration(text: str) -> float:
    m = _DURATION.match(text.strip())
    if m is None:
        raise argparse.ArgumentTypeError(f"{text!r}: a duration such as 30s, 90, 2m or 1h")
    unit = {"ms": 0.001, "s": 1, None: 1, "m": 60, "h": 3600}[m.group(2)]
    return float(m.group(1)) * unit


Condition = tuple[str, Callable[[Shown | None], bool]]


def condition(text: str) -> Condition:
    """``--for``: a name to say and a test of the resource (None: it is gone)."""
    if text == "delete":
        return text, lambda s: s is None
    if text == "ready":
        def ready(s: Shown | None) -> bool:
            shown = ready_column(s) if s is not None else "-"
            have, _, want = shown.partition("/")
            return bool(want) and have == want and want != "0"
        return text, ready
    form, eq, rest = text.partition("=")
    unknown = argparse.ArgumentTypeError(
        f"{text!r}: one of state=S, placement=S, ready, delete, jsonpath={{.PATH}}[=VALUE]")
    if not eq or not rest:
        raise unknown
    if form in SHORTHANDS:
        path, want = SHORTHANDS[form], rest
    elif form == "jsonpath":
        path, sep, want = rest.partition("}=")
        path = path + "}" if sep else path
        want = want if sep else ""
        if not (path.startswith("{") and path.endswith("}")):
            raise argparse.ArgumentTypeError(f"{text!r}: jsonpath={{.PATH}} or "
                                             "jsonpath={.PATH}=VALUE")
    else:
        raise unknown
    try:
        jsonpath.render(path, {})
    except jsonpath.TemplateError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    expr = path[1:-1]

    def holds(s: Shown | None) -> bool:
        if s is None:
            return False
        found = jsonpath.values(plain_document(s, False), expr)
        if want:
            return any(jsonpath.text_of(v) == want for v in found)
        return any(v not in (None, "", False, 0, [], {}) for v in found)
    return text, holds


def run(args: argparse.Namespace) -> int:
    said, holds = args.condition
    waiting: list[tuple[keys.Kind, str, str]] = []
    for kind, names in named(args.kind, args.names):
        for given in names:
            ns, _, name = given.rpartition("/")
            waiting.append((kind, ns or args.namespace, name))
    if not waiting:
        raise ValueError(f"wait {args.kind}: which? give [NAMESPACE/]NAME or TYPE/NAME")
    store = open_store(args)
    deadline = time.monotonic() + args.timeout
    while True:
        left = []
        for kind, ns, name in waiting:
            s = one(store, kind, ns, name)
            if s is None and said != "delete":
                where = f"{ns}/" if kind.namespaced else ""
                print(f"error: {kind.name.lower()} {where}{name} not found", file=sys.stderr)
                return 1
            if holds(s):
                print(f"{kind.name.lower()}/{ns + '/' if kind.namespaced else ''}{name} "
                      f"condition met ({said})", flush=True)
            else:
                left.append((kind, ns, name))
        waiting = left
        if not waiting:
            return 0
        if time.monotonic() >= deadline:
            for kind, ns, name in waiting:
                print(f"error: timed out waiting for the condition ({said}) on "
                      f"{kind.plural}/{ns + '/' if kind.namespaced else ''}{name}",
                      file=sys.stderr)
            return 1
        time.sleep(min(POLL, max(0.0, deadline - time.monotonic())))
