"""One cluster's copy of an application: its manifest with the overrides that select
it applied, in order, and what each rule changed.

Pure functions over plain data, shared by the propagator (which applies what
:func:`render` gives), ``berth explain overrides`` (which shows it) and
``berth apply`` (which checks an override against the manifests it selects).

**Order.** Overrides apply cluster-wide (``GlobalOverride``) before namespaced
(``Override``); within each, the less specific first — selecting every
application, then by labels, then by name — and by name last; a rule after
another, within one override, comes later too. So the later wins where two
set the same field, and :class:`Rendered` records both: which rule made each
field, and which rules' values it replaced.

**Variables.** ``${cluster.name}``, ``${cluster.namespace}`` and
``${cluster.labels.<key>}`` in any value a rule writes; ``$${`` writes a
literal ``${``. A label the cluster lacks is a :class:`RenderError` naming the
label and the rule: that cluster's copy fails, the others are rendered.
"""

from __future__ import annotations

import copy
import hashlib
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from berth.store.documents.overrides import (
    RULE_KINDS,
    EnvRule,
    ImageRule,
    ListRule,
    MetaRule,
    Override,
    OverrideRule,
    PatchOperation,
)
from berth.store.labels import selector_matches

VARIABLE = re.compile(r"\$(\$?)\{([^}]*)\}")
# Where each kind keeps its pod template's spec (custom resources: a patch rule).
POD_SPECS: dict[str, tuple[str, ...]] = {
    "Pod": ("spec",),
    "Deployment": ("spec", "template", "spec"),
    "StatefulSet": ("spec", "template", "spec"),
    "DaemonSet": ("spec", "template", "spec"),
    "ReplicaSet": ("spec", "template", "spec"),
    "ReplicationController": ("spec", "template", "spec"),
    "Job": ("spec", "template", "spec"),
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
}


class RenderError(ValueError):
    """A rule cannot be applied to this cluster's copy; the message names the rule."""


@dataclass(frozen=True, slots=True)
class Where:
    """The cluster a copy is rendered for."""

    name: str
    namespace: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)

    @property
    def cid(self) -> str:
        return f"{self.namespace or ''}/{self.name}"


@dataclass(frozen=True, slots=True)
class Change:
    """A field a rule wrote: ``obj`` (``Kind name``) at ``path`` (a JSON pointer into
    it); ``rule`` made its value; ``replaced``: earlier rules whose value it replaced."""

    obj: str
    path: str
    rule: str
    replaced: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Rendered:
    """The bodies to apply on one cluster, the overrides that made them
    (``Kind [ns/]name@generation``), each field they changed, and a fingerprint of
    the bodies ("" when no override applies: the manifest as written)."""

    bodies: tuple[dict[str, Any], ...]
    by: tuple[str, ...] = ()
    changes: tuple[Change, ...] = ()
    fingerprint: str = ""


# -- which overrides, in which order -------------------------------------------------------


def _global(o: Override) -> bool:
    return type(o).__struct_config__.tag == "GlobalOverride"


def name_of(o: Override) -> str:
    """``GlobalOverride name`` or ``Override namespace/name``."""
    if _global(o):
        return f"GlobalOverride {o.metadata.name}"
    return f"Override {o.metadata.namespace}/{o.metadata.name}"


def selects_application(o: Override, namespace: str, name: str,
                        labels: Mapping[str, str]) -> bool:
    """Whether ``o`` selects the application ``namespace``/``name``."""
    if not _global(o) and o.metadata.namespace != namespace:
        return False
    sel = o.spec.applications
    if sel.names and name not in sel.names and f"{namespace}/{name}" not in sel.names:
        return False
    return selector_matches(sel.match_labels, (), labels)


def selects_cluster(o: Override, where: Where) -> bool:
    """Whether ``o`` selects the cluster ``where``."""
    return o.spec.clusters.selects(where.cid, where.labels)


def _specificity(o: Override) -> int:
    sel = o.spec.applications
    return 2 if sel.names else 1 if sel.match_labels else 0


def ordered(overrides: Sequence[Override]) -> list[Override]:
    """In the order they apply (the later wins): global first, the less specific
    first, by name."""
    return sorted(overrides, key=lambda o: (not _global(o), _specificity(o),
                                            o.metadata.namespace or "", o.metadata.name))


def rule_name(o: Override, i: int, rule: OverrideRule) -> str:
    return f"{name_of(o)} rule {i + 1}" + (f" ({rule.name})" if rule.name else "")


# -- rendering -------------------------------------------------------------------------------


def fingerprint(bodies: Sequence[dict[str, Any]]) -> str:
    """A short hash of a copy, for its status (which every process reads). A Secret's
    data is left out: a hash of a secret is no business of theirs, and a secret that
    changes is a new generation of its application anyway."""
    seen = [{k: v for k, v in b.items() if k not in ("data", "stringData")}
            if b.get("kind") == "Secret" else b for b in bodies]
    return hashlib.sha256(msgspec.json.encode(seen)).hexdigest()[:16]


def render(bodies: Sequence[dict[str, Any]], overrides: Sequence[Override], where: Where
           ) -> Rendered:
    """``bodies`` as ``overrides`` (those selecting the application; any order) make them
    for ``where`` (those selecting it apply); RenderError names the rule that cannot."""
    chosen = [o for o in ordered(overrides) if selects_cluster(o, where)]
    if not chosen or not any(o.spec.rules for o in chosen):
        return Rendered(tuple(bodies))
    out: list[dict[str, Any]] = _copy(list(bodies))  # the rules change it in place
    made: dict[tuple[str, str], list[str]] = {}
    for o in chosen:
        for i, rule in enumerate(o.spec.rules):
            label = rule_name(o, i, rule)
            resolved = _resolve(rule, where, label)
            for obj, path in _apply(resolved, out, label):
                made.setdefault((obj, path), []).append(label)
    changes = tuple(Change(obj, path, rules[-1], tuple(rules[:-1]))
                    for (obj, path), rules in made.items())
    by = tuple(f"{name_of(o)}@{o.metadata.generation}" for o in chosen if o.spec.rules)
    return Rendered(tuple(out), by, changes, fingerprint(out))


_ENCODE = msgspec.json.Encoder().encode
_DECODE = msgspec.json.Decoder().decode


def _copy(data: Any) -> Any:
    """A deep copy of plain JSON data, through msgspec (much faster than
    copy.deepcopy)."""
    return _DECODE(_ENCODE(data))


def variables(text: str) -> Iterator[str]:
    """The variables ``text`` names (without ``${}``), escaped ones left out."""
    for m in VARIABLE.finditer(text):
        if not m.group(1):
            yield m.group(2)


def variable_problem(name: str) -> str | None:
    """Why ``${name}`` is not a variable a rule may use (None: it is)."""
    if name in ("cluster.name", "cluster.namespace"):
        return None
    if name.startswith("cluster.labels.") and len(name) > len("cluster.labels."):
        return None
    return (f"unknown variable ${{{name}}}: use ${{cluster.name}}, ${{cluster.namespace}} "
            "or ${cluster.labels.<key>}")


def _substitute(text: str, where: Where, label: str) -> str:
    def one(m: re.Match[str]) -> str:
        if m.group(1):
            return "${" + m.group(2) + "}"
        name = m.group(2)
        if name == "cluster.name":
            return where.name
        if name == "cluster.namespace":
            return where.namespace or ""
        if name.startswith("cluster.labels."):
            key = name[len("cluster.labels."):]
            if key not in where.labels:
                raise RenderError(f"{label}: cluster {where.cid} has no label {key!r} "
                                  f"(${{{name}}})")
            return where.labels[key]
        raise RenderError(f"{label}: {variable_problem(name)}")
    return VARIABLE.sub(one, text)


def _resolve(rule: OverrideRule, where: Where, label: str) -> OverrideRule:
    """The rule with every variable in its values replaced."""
    data = msgspec.to_builtins(rule)

    def walk(v: Any, skip: bool = False) -> Any:
        if isinstance(v, str) and not skip:
            return _substitute(v, where, label)
        if isinstance(v, dict):
            return {k: walk(x, k in ("path", "from", "op", "kind", "container")) for k, x in
                    v.items()}
        if isinstance(v, list):
            return [walk(x) for x in v]
        return v

    return msgspec.convert(walk(data), OverrideRule)


def _apply(rule: OverrideRule, bodies: list[dict[str, Any]], label: str
           ) -> Iterator[tuple[str, str]]:
    """Apply one rule to ``bodies`` in place; yields each (object, path) it wrote."""
    kind = next(k for k in RULE_KINDS if getattr(rule, k) is not None)
    if kind == "patch":
        assert rule.patch is not None
        t = rule.patch.object
        targets = [b for b in bodies if b.get("kind") == t.kind and _meta(b).get("name") == t.name
                   and (t.api_version is None or b.get("apiVersion") == t.api_version)]
        if not targets:
            raise RenderError(f"{label}: the manifest has no {t.kind} {t.name}")
        for op in rule.patch.operations:
            try:
                patch_one(targets[0], op)
            except RenderError as exc:
                raise RenderError(f"{label}: {t.kind} {t.name}: {exc}") from None
            yield f"{t.kind} {t.name}", op.path
        return
    for body in bodies:
        obj = f"{body.get('kind')} {_meta(body).get('name')}"
        if kind in ("labels", "annotations"):
            meta_rule = getattr(rule, kind)
            assert isinstance(meta_rule, MetaRule)
            for path in _meta_rule(body, kind, meta_rule):
                yield obj, path
            continue
        spec_path = POD_SPECS.get(str(body.get("kind")))
        pod = _at(body, spec_path) if spec_path else None
        if not isinstance(pod, dict):
            continue
        base = "/" + "/".join(spec_path or ())
        for group in ("initContainers", "containers"):
            for i, c in enumerate(pod.get(group) or []):
                if not isinstance(c, dict):
                    continue
                where = f"{base}/{group}/{i}"
                for path in _container_rule(rule, kind, c):
                    yield obj, where + path


def _meta(body: dict[str, Any]) -> dict[str, Any]:
    meta = body.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _at(body: Any, path: tuple[str, ...]) -> Any:
    for step in path:
        if not isinstance(body, dict):
            return None
        body = body.get(step)
    return body


def _meta_rule(body: dict[str, Any], kind: str, rule: MetaRule) -> Iterator[str]:
    meta = body.setdefault("metadata", {})
    have = meta.get(kind)
    if not isinstance(have, dict):
        have = meta[kind] = {}
    for k, v in rule.set.items():
        have[k] = v
        yield f"/metadata/{kind}/{escape(k)}"
    for k in rule.remove:
        if k in have:
            del have[k]
            yield f"/metadata/{kind}/{escape(k)}"


def _container_rule(rule: OverrideRule, kind: str, c: dict[str, Any]) -> Iterator[str]:
    sub = getattr(rule, kind)
    assert isinstance(sub, ImageRule | ListRule | EnvRule)
    if sub.container is not None and c.get("name") != sub.container:
        return
    if isinstance(sub, ImageRule):
        image = c.get("image")
        if isinstance(image, str):
            c["image"] = with_parts(image, sub)
            yield "/image"
    elif isinstance(sub, ListRule):
        now = c.get(kind)
        now = list(now) if isinstance(now, list) else []
        c[kind] = [*(sub.replace if sub.replace is not None else now), *sub.append]
        yield f"/{kind}"
    else:
        env = [e for e in c.get("env") or [] if isinstance(e, dict)]
        names = [e.get("name") for e in env]
        for name, value in sub.set.items():
            if name in names:
                env[names.index(name)] = {"name": name, "value": value}
            else:
                env.append({"name": name, "value": value})
                names.append(name)
            yield f"/env/{name}"
        for name in sub.remove:
            if name in names:
                del env[names.index(name)]
                names.remove(name)
                yield f"/env/{name}"
        c["env"] = env


# -- images ----------------------------------------------------------------------------------


def split_image(ref: str) -> tuple[str, str, str, str]:
    """(registry, repository, tag, digest) of an image reference; "" where absent. The
    first component is the registry when it has a dot or a port, or is localhost."""
    rest, _, digest = ref.partition("@")
    registry = ""
    first, slash, remainder = rest.partition("/")
    if slash and ("." in first or ":" in first or first == "localhost"):
        registry, rest = first, remainder
    repository, tag = rest, ""
    colon = rest.rfind(":")
    if colon > rest.rfind("/"):
        repository, tag = rest[:colon], rest[colon + 1:]
    return registry, repository, tag, digest


def with_parts(ref: str, rule: ImageRule) -> str:
    """``ref`` with the parts ``rule`` sets replaced."""
    registry, repository, tag, digest = split_image(ref)
    registry = rule.registry if rule.registry is not None else registry
    repository = rule.repository if rule.repository is not None else repository
    tag = rule.tag if rule.tag is not None else tag
    digest = rule.digest if rule.digest is not None else digest
    out = f"{registry}/{repository}" if registry else repository
    if tag:
        out += f":{tag}"
    if digest:
        out += f"@{digest}"
    return out


# -- RFC 6902 --------------------------------------------------------------------------------


def escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def _tokens(pointer: str) -> list[str]:
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        raise RenderError(f"{pointer!r} is not a JSON pointer (it starts with '/')")
    return [t.replace("~1", "/").replace("~0", "~") for t in pointer[1:].split("/")]


def _parent(doc: Any, pointer: str) -> tuple[Any, str]:
    tokens = _tokens(pointer)
    if not tokens:
        raise RenderError(f"{pointer!r}: the whole object cannot be patched")
    node = doc
    for i, t in enumerate(tokens[:-1]):
        node = _child(node, t, "/" + "/".join(tokens[:i + 1]))
    return node, tokens[-1]


def _child(node: Any, token: str, where: str) -> Any:
    if isinstance(node, dict):
        if token not in node:
            raise RenderError(f"path {where} does not exist")
        return node[token]
    if isinstance(node, list):
        if not token.isdigit() or int(token) >= len(node):
            raise RenderError(f"path {where} does not exist")
        return node[int(token)]
    raise RenderError(f"path {where} does not exist")


def _get(doc: Any, pointer: str) -> Any:
    node = doc
    for i, t in enumerate(_tokens(pointer)):
        node = _child(node, t, "/" + "/".join(_tokens(pointer)[:i + 1]))
    return node


def _remove(doc: Any, pointer: str) -> Any:
    parent, last = _parent(doc, pointer)
    value = _child(parent, last, pointer)
    if isinstance(parent, dict):
        del parent[last]
    else:
        del parent[int(last)]
    return value


def _add(doc: Any, pointer: str, value: Any) -> None:
    parent, last = _parent(doc, pointer)
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        if last == "-":
            parent.append(value)
        elif last.isdigit() and int(last) <= len(parent):
            parent.insert(int(last), value)
        else:
            raise RenderError(f"path {pointer} is past the end of its list")
    else:
        raise RenderError(f"path {pointer}: its parent is not an object or a list")


def patch_one(doc: dict[str, Any], op: PatchOperation) -> None:
    """Apply one RFC 6902 operation to ``doc`` in place; RenderError names the path."""
    if op.op == "add":
        _add(doc, op.path, copy.deepcopy(op.value))
    elif op.op == "remove":
        _remove(doc, op.path)
    elif op.op == "replace":
        _remove(doc, op.path)
        _add(doc, op.path, copy.deepcopy(op.value))
    elif op.op == "move":
        _add(doc, op.path, _remove(doc, op.from_ or ""))
    elif op.op == "copy":
        _add(doc, op.path, copy.deepcopy(_get(doc, op.from_ or "")))
    elif _get(doc, op.path) != op.value:  # test
        raise RenderError(f"test failed at {op.path}: not {op.value!r}")
