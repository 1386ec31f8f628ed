"""Overrides checked against the manifests they select, before anything is written.

A patch rule names an object and JSON pointers into it; a path that is not
there in one of the applications the override selects would fail only at
apply time, on every cluster, long after the user moved on (Karmada's users
meet exactly that). So ``apply`` and ``bootstrap`` refuse it up front, both
ways: an override whose patch does not fit an application it selects (stored
or in the same input), and an application that does not fit a stored
override selecting it. The error names the override, the rule, the
application and the path. Values that use cluster variables are not needed
to check a path; a ``test`` operation's value is not compared (it is the
cluster's copy that is tested).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Iterator, Sequence

from berth.bootstrap.load import Loaded
from berth.store import Store, StoreError, decode, keys
from berth.store.documents import Application, GlobalOverride, Override
from berth.store.documents.render import RenderError, name_of, patch_one, selects_application


def problems(store: Store, loaded: Sequence[Loaded]) -> list[str]:
    """Every patch path that does not fit an application its override selects."""
    new_overrides = [(i.where, i.doc) for i in loaded if isinstance(i.doc, Override)]
    new_apps = [(i.where, i.doc) for i in loaded if isinstance(i.doc, Application)]
    if not new_overrides and not new_apps:
        return []
    # what the input may meet: a namespaced override selects its own namespace's
    # applications alone, so a team's apply reads its namespace (and the global
    # overrides), never another team's
    namespaces = {i.doc.metadata.namespace or "" for i in loaded
                  if isinstance(i.doc, Application | Override)}
    stored_overrides = [o for o in stored(store, namespaces) if not any(
        _same(o, n) for _, n in new_overrides)]
    if not new_overrides and not stored_overrides:
        return []
    out: list[str] = []
    # each new override against the applications it selects, stored or new
    every = any(isinstance(o, GlobalOverride) for _, o in new_overrides)
    apps = stored_apps(store, None if every else {
        o.metadata.namespace or "" for _, o in new_overrides}) if new_overrides else []
    in_input = {(a.metadata.namespace, a.metadata.name) for _, a in new_apps}
    candidates = [a for a in apps if (a.metadata.namespace, a.metadata.name) not in in_input]
    candidates += [a for _, a in new_apps]
    for where, o in new_overrides:
        for app in candidates:
            out += [f"{where}: {p}" for p in _misfits(o, app)]
    # each new application against the stored overrides that select it
    for where, app in new_apps:
        for o in stored_overrides:
            out += [f"{where}: {p}" for p in _misfits(o, app)]
    return out


def _same(a: Override, b: Override) -> bool:
    return name_of(a) == name_of(b)


def stored(store: Store, namespaces: Iterable[str] | None = None) -> list[Override]:
    """Every override in etcd that decodes (one that does not selects nothing): the
    global ones, and the namespaced ones of ``namespaces`` (None: of every namespace)."""
    found: list[Override] = []
    prefixes = [(keys.resource_prefix("GlobalOverride"), GlobalOverride)] + (
        [(keys.resource_prefix("Override"), Override)] if namespaces is None else
        [(keys.resource_prefix("Override", ns), Override) for ns in sorted(namespaces) if ns])
    for prefix, type_ in prefixes:
        for kv in store.list_prefix(prefix)[0]:
            try:
                found.append(decode(kv.value, type_, kv.key))
            except StoreError:
                continue  # every process skips it too; it selects nothing
    return found


def stored_apps(store: Store, namespaces: Iterable[str] | None) -> list[Application]:
    """The applications of ``namespaces`` (None: of every namespace) that decode."""
    found: list[Application] = []
    prefixes = ([keys.resource_prefix("Application")] if namespaces is None else
                [keys.resource_prefix("Application", ns) for ns in sorted(namespaces) if ns])
    for prefix in prefixes:
        for kv in store.list_prefix(prefix)[0]:
            try:
                found.append(decode(kv.value, Application, kv.key))
            except StoreError:
                continue
    return found


def _misfits(o: Override, app: Application) -> Iterator[str]:
    meta = app.metadata
    if not selects_application(o, meta.namespace or "", meta.name, meta.labels):
        return
    manifest = [b for b in app.spec.manifest if isinstance(b, dict)]
    for i, rule in enumerate(o.spec.rules):
        if rule.patch is None:
            continue
        t = rule.patch.object
        at = f"{name_of(o)} spec.rules[{i}].patch"
        target = next((b for b in manifest if b.get("kind") == t.kind
                       and (b.get("metadata") or {}).get("name") == t.name
                       and (t.api_version is None or b.get("apiVersion") == t.api_version)),
                      None)
        app_name = f"application {meta.namespace}/{meta.name}"
        if target is None:
            yield f"{at}: {app_name} has no {t.kind} {t.name}"
            continue
        body = copy.deepcopy(target)
        for j, op in enumerate(rule.patch.operations):
            if op.op == "test":
                continue
            try:
                patch_one(body, op)  # a value's variables do not change where it goes
            except RenderError as exc:
                yield f"{at}.operations[{j}]: {app_name}: {t.kind} {t.name}: {exc}"
                break
