"""Credentials, kept apart from the documents that carry them.

Every secret a document carries is stored under ``/berth/v1/secrets/``, at
the key of its document there (``secrets/<plural>/[<namespace>/]<name>``),
which etcd's roles let only the process that uses it read: the propagator
a Cluster's and an Application's, the metrics-cache a metrics provider's, no
process a Project's or a Cloud's (berth never calls OpenStack). The document
itself keeps everything else, with :data:`APART` where a secret was, so the
scheduler, the CLI and operators read it as before and never see a secret.

What is a secret (:func:`split`):

- a Cluster's and an Export's kubeconfig ``users`` (token, client key, exec
  plugin, password): kept whole, by user name, so its contexts still make sense;
- in an Application's manifest, a Kubernetes Secret's ``data`` and
  ``stringData`` (a credential belongs in a Secret; other objects are not
  searched, so a workload's ``secretKeyRef`` stays a reference);
- anywhere else in a document's ``spec``, the value of a field whose name
  says it is one (:data:`SECRET_FIELD`: ``password``, ``token``, ``secret``,
  ``credential``, ``key-data``): an OpenStack ``auth`` section's password
  or application credential, a Kafka provider's ``sasl_password``. The CLI
  masks the same fields of anything it prints.

:func:`merge` puts a document back together where a secret is used. The
credentials record the generation of the document they were written with:
the propagator applies an Application's generation only with the
credentials of that generation, never a newer manifest with older secrets.
A document that still carries its secrets inline (written by hand, or before
this layout) works as before; ``berth upgrade`` moves them apart.
"""

from __future__ import annotations

import copy
import re
from typing import Any, Final, TypeVar

import msgspec

D = TypeVar("D", bound=msgspec.Struct)

# documents with a kubeconfig
KUBECONFIG_KINDS: Final = frozenset({"Cluster", "Export", "Inventory"})
SECRET_FIELD: Final = re.compile(r"(token|password|secret|key-data|keyData|credential)", re.I)
APART: Final = "<stored apart>"  # where a secret was, in the document others read


class CredentialsMeta(msgspec.Struct, omit_defaults=True):
    name: str
    namespace: str | None = None


class Credentials(msgspec.Struct, tag_field="kind", tag="Credentials", omit_defaults=True):
    """``/berth/v1/secrets/<plural>/[<ns>/]<name>``: what was taken out of a document."""

    metadata: CredentialsMeta
    # RFC 6901 pointer into the document → the value that was there
    values: dict[str, Any] = {}
    users: list[dict[str, Any]] = []  # a Cluster's kubeconfig users, whole
    generation: int = 0  # the document's generation they were written with
    api: str = "core"


class ClusterCredentials(Credentials, tag="ClusterCredentials"):
    """The layout before every kind's credentials were kept apart: a Cluster's users."""

    api: str = "kubernetes"


# What a reader decodes at a secrets key: either layout (each a Credentials).
STORED: Final[Any] = Credentials | ClusterCredentials


# -- taking them out ---------------------------------------------------------------


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def _secret(value: Any) -> bool:
    """Whether a value under a secret's name is one (an empty one, or the marker, is not)."""
    return value not in (None, "", {}, [], APART)


def _take(node: Any, pointer: str, values: dict[str, Any]) -> None:
    """Move every secret field under ``node`` (at ``pointer``) into ``values``."""
    if isinstance(node, dict):
        for key in list(node):
            here = f"{pointer}/{_escape(str(key))}"
            if isinstance(key, str) and SECRET_FIELD.search(key) and _secret(node[key]):
                values[here] = node[key]
                node[key] = APART
            else:
                _take(node[key], here, values)
    elif isinstance(node, list):
        for i, item in enumerate(node):
            _take(item, f"{pointer}/{i}", values)


def _take_manifest(manifest: Any, values: dict[str, Any]) -> None:
    """A manifest's Secrets give their ``data`` and ``stringData``."""
    if not isinstance(manifest, list):
        return
    for i, obj in enumerate(manifest):
        if isinstance(obj, dict) and obj.get("kind") == "Secret" and obj.get("apiVersion") == "v1":
            for field in ("data", "stringData"):
                if _secret(obj.get(field)):
                    values[f"/spec/manifest/{i}/{field}"] = obj[field]
                    obj[field] = APART


def has_credentials(kubeconfig: dict[str, Any] | None) -> bool:
    """Whether a kubeconfig carries any user's credentials inline."""
    users = (kubeconfig or {}).get("users")
    return isinstance(users, list) and any(
        isinstance(u, dict) and u.get("user") for u in users)


def split(kind: str, doc: dict[str, Any]) -> tuple[dict[str, Any], Credentials | None]:
    """(the document without its secrets, the secrets; None when it carries none) of a
    document as plain data. ``doc`` is not changed."""
    public = copy.deepcopy(doc)
    spec = public.get("spec")
    if not isinstance(spec, dict):
        return public, None
    values: dict[str, Any] = {}
    users: list[dict[str, Any]] = []
    kubeconfig = spec.get("kubeconfig") if kind in KUBECONFIG_KINDS else None
    if isinstance(kubeconfig, dict) and has_credentials(kubeconfig):
        users = [u for u in kubeconfig.get("users") or [] if isinstance(u, dict)]
        kubeconfig["users"] = [{"name": u["name"]} for u in users if "name" in u]
    for field, value in spec.items():
        if kind == "Application" and field == "manifest":
            _take_manifest(value, values)
        elif kind in KUBECONFIG_KINDS and field == "kubeconfig":
            continue  # its users are taken whole, above; the rest says where, not who
        elif isinstance(field, str) and SECRET_FIELD.search(field) and _secret(value):
            values[f"/spec/{_escape(field)}"] = value
            spec[field] = APART
        else:
            _take(value, f"/spec/{_escape(str(field))}", values)
    if not values and not users:
        return public, None
    meta = public.get("metadata") or {}
    return public, Credentials(CredentialsMeta(str(meta.get("name", "")),
                                               meta.get("namespace") or None), values, users)


# -- putting them back ----------------------------------------------------------------


def apart_in_manifest(manifest: Any) -> bool:
    """Whether an Application's manifest has a Secret whose data is stored apart."""
    return isinstance(manifest, list) and any(
        isinstance(obj, dict) and obj.get("kind") == "Secret"
        and APART in (obj.get("data"), obj.get("stringData")) for obj in manifest)


def with_current_secrets(manifest: list[Any], current: list[Any]) -> list[Any] | None:
    """An earlier generation's ``manifest`` whose Secrets take their data from the
    ``current`` manifest (with its data put back): a Secret's data is kept for the
    current generation only. None when a Secret of it is not in the current manifest."""
    if not apart_in_manifest(manifest):
        return manifest

    def ident(obj: Any) -> tuple[Any, Any] | None:
        if not isinstance(obj, dict) or obj.get("kind") != "Secret":
            return None
        meta = obj.get("metadata")
        return (meta.get("namespace"), meta.get("name")) if isinstance(meta, dict) else None

    now = {ident(o): o for o in current if ident(o) is not None}
    out: list[Any] = []
    for obj in manifest:
        if ident(obj) is not None and APART in (obj.get("data"), obj.get("stringData")):
            same = now.get(ident(obj))
            if same is None:
                return None
            obj = {**obj, **{f: same[f] for f in ("data", "stringData") if f in same}}
        out.append(obj)
    return out


def merge(doc: dict[str, Any], creds: Credentials | None) -> dict[str, Any]:
    """A copy of ``doc`` (plain data) with its secrets back where the marker is. A value
    whose place no longer holds the marker (the document changed since) is left out."""
    if creds is None or (not creds.values and not creds.users):
        return doc
    out = copy.deepcopy(doc)
    for pointer, value in creds.values.items():
        tokens = [_unescape(t) for t in pointer.split("/")[1:]]
        node: Any = out
        for token in tokens[:-1]:
            node = _step(node, token)
            if node is None:
                break
        last = tokens[-1] if tokens else ""
        if isinstance(node, dict) and node.get(last) == APART:
            node[last] = copy.deepcopy(value)
        elif isinstance(node, list) and last.isdigit() and int(last) < len(node) and (
                node[int(last)] == APART):
            node[int(last)] = copy.deepcopy(value)
    if creds.users:
        spec = out.get("spec")
        if isinstance(spec, dict) and isinstance(spec.get("kubeconfig"), dict):
            spec["kubeconfig"] = merge_users(spec["kubeconfig"], creds.users)
    return out


def completed(doc: D, creds: Credentials | None) -> D:
    """A typed document with its secrets put back (itself when there are none)."""
    if creds is None or (not creds.values and not creds.users):
        return doc
    return msgspec.convert(merge(msgspec.to_builtins(doc), creds), type(doc))


def _step(node: Any, token: str) -> Any:
    if isinstance(node, dict):
        return node.get(token)
    if isinstance(node, list) and token.isdigit() and int(token) < len(node):
        return node[int(token)]
    return None


def merge_users(kubeconfig: dict[str, Any], users: list[dict[str, Any]]) -> dict[str, Any]:
    """The kubeconfig to connect with: its users completed from ``users`` by name."""
    if not users:
        return kubeconfig
    secret = {u.get("name"): u for u in users if isinstance(u, dict)}
    mine = [u for u in kubeconfig.get("users") or [] if isinstance(u, dict)]
    names = {u.get("name") for u in mine}
    merged = [secret.get(u.get("name"), u) for u in mine]
    merged += [u for name, u in secret.items() if name not in names]
    return {**kubeconfig, "users": merged}


def missing_users(kubeconfig: dict[str, Any], users: list[dict[str, Any]]) -> list[str]:
    """The users ``kubeconfig`` stored apart (a name and nothing else, as :func:`split`
    leaves them) that ``users`` lacks: a reader holds the document without the
    credentials written with it — not seen yet, or lost."""
    have = {u.get("name") for u in users if isinstance(u, dict)}
    return [str(u["name"]) for u in kubeconfig.get("users") or []
            if isinstance(u, dict) and set(u) == {"name"} and u["name"] not in have]


def same(a: Credentials | None, b: Credentials | None) -> bool:
    """Whether two credentials hold the same secrets (whatever generation they name)."""
    if a is None or b is None:
        return a is b
    return a.values == b.values and a.users == b.users
