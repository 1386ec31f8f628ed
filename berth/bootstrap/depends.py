"""Dependencies checked at apply: loops refused, what is missing said.

An application's ``spec.dependsOn`` names applications of its namespace
(docs/order.md "Dependencies"). A loop — the application depending on itself
through others — could never be placed, so ``apply`` and ``bootstrap`` refuse
it, naming the loop; the scheduler and the propagator refuse one written into
etcd directly. A dependency that does not exist is said, not refused (it may be
applied next; the dependent's copies wait for it meanwhile).

What a workload references — a ConfigMap or Secret it mounts or reads, its
ServiceAccount, a claim; as written, or as the overrides that select it make a
cluster's copy — is said when neither its own manifest nor one of its
dependencies' has it: which other application of the namespace provides it (to
name in ``dependsOn``), or that nothing berth applies does (it must exist on the
clusters). berth infers no dependency: a dependency decides where the
dependent may run, which a reference alone should not do silently.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from berth.bootstrap import overrides, stages
from berth.bootstrap.load import Loaded
from berth.bootstrap.overrides import stored_apps
from berth.store import Store, Unauthorized
from berth.store.dependencies import cycle
from berth.store.documents import Application, Override
from berth.store.documents.render import RenderError, Where, name_of, render, selects_application

# the kinds a pod template refers to by name, as its fields name them
REFERRED = ("ConfigMap", "Secret", "ServiceAccount", "PersistentVolumeClaim")


def problems(store: Store, loaded: Sequence[Loaded]) -> tuple[list[str], list[str]]:
    """(errors, warnings) of the applications in ``loaded`` with dependencies."""
    new = {(i.doc.metadata.namespace or "", i.doc.metadata.name): i for i in loaded
           if isinstance(i.doc, Application)}
    if not new:
        return [], []
    namespaces = {ns for ns, _ in new} | {d.namespace for i in new.values()
                                          if isinstance(i.doc, Application)
                                          for d in i.doc.spec.depends_on if d.namespace}
    copies = _copies(store, loaded, new, namespaces)
    if not any(isinstance(i.doc, Application) and (i.doc.spec.depends_on or _beyond(
            i.doc, copies.get(at, []))) for at, i in new.items()):
        return [], []  # (nothing more to read)
    apps: dict[tuple[str, str], Application] = {}
    for ns in sorted(namespaces):  # another namespace a team may not read: not checked
        try:
            found = stored_apps(store, {ns})
        except Unauthorized:
            continue
        apps.update({(a.metadata.namespace or "", a.metadata.name): a for a in found})
    for at, item in new.items():
        assert isinstance(item.doc, Application)
        apps[at] = item.doc
    edges = {f"{ns}/{name}": [d.key_in(ns) for d in a.spec.depends_on]
             for (ns, name), a in apps.items()}
    errors: list[str] = []
    warnings: list[str] = []
    for (ns, name), item in sorted(new.items()):
        doc = item.doc
        assert isinstance(doc, Application)
        if not doc.spec.depends_on:
            continue
        loop = cycle(f"{ns}/{name}", lambda n: edges.get(n, ()))
        if loop is not None:
            errors.append(f"{item.where}: spec.dependsOn: a loop of dependencies: "
                          f"{' → '.join(_short(n, ns) for n in loop)}")
        for i, dep in enumerate(doc.spec.depends_on):
            if (dep.namespace or ns, dep.name) not in apps:
                warnings.append(f"{item.where}: spec.dependsOn[{i}]: application "
                                f"{dep.key_in(ns)} does not exist (its copies wait until "
                                "it does)")
    for at, item in sorted(new.items()):
        assert isinstance(item.doc, Application)
        warnings += [f"{item.where}: {w}" for w in _unprovided(
            item.doc, apps, at[0], copies.get(at, []))]
    return errors, warnings


Copies = list[tuple[str, Sequence[dict[str, Any]]]]  # (which cluster's, its objects)


def _copies(store: Store, loaded: Sequence[Loaded], new: Mapping[tuple[str, str], Loaded],
            namespaces: set[str]) -> dict[tuple[str, str], Copies]:
    """Per new application that an override selects, each cluster's copy as the overrides
    make it (references an override adds count); one that cannot be rendered is the
    overrides check's to say."""
    every = [i.doc for i in loaded if isinstance(i.doc, Override)]
    named = {name_of(o) for o in every}
    every += [o for o in overrides.stored(store, namespaces) if name_of(o) not in named]
    out: dict[tuple[str, str], Copies] = {}
    clusters: dict[str, dict[str, str]] | None = None
    for (ns, name), item in sorted(new.items()):
        doc = item.doc
        assert isinstance(doc, Application)
        chosen = [o for o in every if selects_application(o, ns, name, doc.metadata.labels)]
        if not chosen:
            continue
        if clusters is None:
            clusters = stages.clusters(store, loaded, namespaces)
        bodies = [b for b in doc.spec.manifest if isinstance(b, dict)]
        for cid, labels in sorted(clusters.items()):
            cns, _, cname = cid.partition("/")
            try:
                made = render(bodies, chosen, Where(cname, cns, labels))
            except RenderError:
                continue
            if made.by:
                out.setdefault((ns, name), []).append((cid, made.bodies))
    return out


def _unprovided(doc: Application, apps: Mapping[tuple[str, str], Application],
                ns: str, copies: Copies) -> Iterator[str]:
    """What ``doc``'s workloads reference — as written, or as ``copies`` have them — that
    neither it nor its dependencies provide."""
    provided = _provides(doc)
    for dep in doc.spec.depends_on:
        other = apps.get((dep.namespace or ns, dep.name))
        if other is not None:
            provided |= _provides(other)
    by: dict[tuple[str, str], str] = {}
    for (ons, oname), other in sorted(apps.items()):
        if ons == ns and oname != doc.metadata.name:
            for ref in _provides(other):
                by.setdefault(ref, oname)
    said: set[tuple[str, str]] = set()
    for cid, bodies in [("", doc.spec.manifest), *copies]:
        for i, obj in enumerate(bodies):
            if not isinstance(obj, dict):
                continue
            for kind, name in _references(obj):
                if ((kind, name) in provided or (kind, name) in said
                        or (kind == "ServiceAccount" and name == "default")):
                    continue
                said.add((kind, name))
                where = f"spec.manifest[{i}] ({obj.get('kind')} {_name(obj)}" + (
                    f", as overrides make it for cluster {cid})" if cid else ")")
                giver = by.get((kind, name))
                if giver is not None:
                    yield (f"{where} uses {kind} {name}, which application {ns}/{giver} "
                           f"provides: name it in spec.dependsOn to have it there first")
                else:
                    yield (f"{where} uses {kind} {name}, which no application provides: "
                           "it must exist on each cluster")


def _short(key: str, ns: str) -> str:
    """``name`` of ``<ns>/name``, ``other/name`` of another namespace's."""
    other, _, name = key.partition("/")
    return name if other == ns else key


def _beyond(doc: Application, copies: Copies) -> bool:
    """Whether a workload of ``doc`` (as written, or as ``copies`` have it) references
    what its own manifest does not have."""
    own = _provides(doc)
    return any(ref not in own and ref != ("ServiceAccount", "default")
               for bodies in [doc.spec.manifest, *(b for _, b in copies)]
               for o in bodies if isinstance(o, dict) for ref in _references(o))


def _name(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    return str(meta.get("name", "")) if isinstance(meta, dict) else ""


def _provides(doc: Application) -> set[tuple[str, str]]:
    return {(str(o.get("kind")), _name(o)) for o in doc.spec.manifest
            if isinstance(o, dict) and o.get("kind") in REFERRED}


def _pod_spec(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The pod spec of a workload (a Pod's own, a template's, a CronJob's job's)."""
    spec = obj.get("spec")
    for _ in range(3):
        if not isinstance(spec, dict):
            return None
        if "containers" in spec:
            return spec
        inner = spec.get("template") or spec.get("jobTemplate")
        spec = inner.get("spec") if isinstance(inner, dict) else None
    return None


def _references(obj: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """(kind, name) of each ConfigMap, Secret, ServiceAccount and claim the workload's
    pod spec names; optional ones are not needed, so not said."""
    pod = _pod_spec(obj)
    if pod is None:
        return
    account = pod.get("serviceAccountName") or pod.get("serviceAccount")
    if isinstance(account, str) and account:
        yield "ServiceAccount", account
    for volume in _dicts(pod.get("volumes")):
        for field, kind, key in (("configMap", "ConfigMap", "name"),
                                 ("secret", "Secret", "secretName"),
                                 ("persistentVolumeClaim", "PersistentVolumeClaim",
                                  "claimName")):
            src = volume.get(field)
            if isinstance(src, dict) and isinstance(src.get(key), str) and not src.get(
                    "optional"):
                yield kind, src[key]
    for c in [*_dicts(pod.get("initContainers")), *_dicts(pod.get("containers"))]:
        for source in _dicts(c.get("envFrom")):
            for field, kind in (("configMapRef", "ConfigMap"), ("secretRef", "Secret")):
                ref = source.get(field)
                if isinstance(ref, dict) and isinstance(ref.get("name"), str) and not ref.get(
                        "optional"):
                    yield kind, ref["name"]
        for env in _dicts(c.get("env")):
            value_from = env.get("valueFrom")
            if not isinstance(value_from, dict):
                continue
            for field, kind in (("configMapKeyRef", "ConfigMap"), ("secretKeyRef", "Secret")):
                ref = value_from.get(field)
                if isinstance(ref, dict) and isinstance(ref.get("name"), str) and not ref.get(
                        "optional"):
                    yield kind, ref["name"]


def _dicts(value: object) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []
