"""Argo CD's ``clusterDecisionResource`` generator, as its documentation and source say it
behaves (argo-cd ``applicationset/generators/duck_type.go``), written here to read
berth's exports as Argo CD would: the test of "Argo CD places what berth decided".

Given the generator's fields (``configMapRef``, ``name`` or ``labelSelector``,
``values``) and the ApplicationSet's ``goTemplate``, it reads, in Argo CD's namespace,
the ConfigMap (``apiVersion``, ``kind`` as the plural resource name, ``statusListKey``,
default ``clusters``, and ``matchKey``), lists that resource by name (a field
selector) or by the label selector, skips an object without status, takes each
item of ``status[statusListKey]``, keeps those whose ``matchKey`` value names an Argo
CD cluster (a Secret labelled ``argocd.argoproj.io/secret-type: cluster``, and the
in-cluster one Argo CD adds when no Secret names its server), and turns every key of
an item into a parameter, after the cluster's ``name`` and ``server``, formatted as
Go's ``%v`` would; ``values`` go in as ``values.<key>`` (``values`` as a map with
``goTemplate``). The error messages are Argo CD's.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Callable
from decimal import Decimal
from typing import Any
from urllib.parse import quote

IN_CLUSTER_NAME = "in-cluster"
IN_CLUSTER_SERVER = "https://kubernetes.default.svc"
SECRET_TYPE = "argocd.argoproj.io/secret-type"

Request = Callable[[str, str], dict[str, Any]]  # (method, path) → the decoded answer


class GeneratorError(Exception):
    """What Argo CD's generator returns as its error."""


def go_v(value: Any) -> str:
    """A value as Go's ``fmt.Sprintf("%v")`` prints what ``encoding/json`` or
    unstructured decoding made of it."""
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return _go_float(value)
    if isinstance(value, list):
        return "[" + " ".join(go_v(v) for v in value) + "]"
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{go_v(value[k])}" for k in sorted(value)) + "]"
    return str(value)


def _go_float(x: float) -> str:
    """A float64 as Go's ``%v`` (``%g``, shortest digits; an exponent below -4 or from 6
    on is written ``e±dd``)."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "+Inf" if x > 0 else "-Inf"
    if x == 0:
        return "-0" if math.copysign(1.0, x) < 0 else "0"
    d = Decimal(repr(x))
    digits = "".join(map(str, d.as_tuple().digits)).rstrip("0") or "0"
    exp = d.adjusted()
    sign = "-" if x < 0 else ""
    if exp < -4 or exp >= 6:
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{sign}{mantissa}e{'+' if exp >= 0 else '-'}{abs(exp):02d}"
    text = format(abs(d), "f")
    return sign + (text.rstrip("0").rstrip(".") if "." in text else text)


def format_selector(selector: dict[str, Any]) -> str:
    """A LabelSelector as the API's ``labelSelector`` parameter."""
    parts = [f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items())]
    for e in selector.get("matchExpressions") or []:
        op, key, values = e["operator"], e["key"], sorted(e.get("values") or [])
        if op == "In":
            parts.append(f"{key} in ({','.join(values)})")
        elif op == "NotIn":
            parts.append(f"{key} notin ({','.join(values)})")
        elif op == "Exists":
            parts.append(key)
        elif op == "DoesNotExist":
            parts.append(f"!{key}")
        else:
            raise GeneratorError(f"{op!r} is not a valid label selector operator")
    return ",".join(parts)


def argo_clusters(request: Request, namespace: str) -> list[tuple[str, str]]:
    """Argo CD's clusters: (name, server) of each cluster Secret, and the in-cluster one
    unless a Secret names its server."""
    found = request("GET", f"/api/v1/namespaces/{namespace}/secrets?labelSelector="
                    + quote(f"{SECRET_TYPE}=cluster"))
    out = []
    for secret in found.get("items") or []:
        data = secret.get("data") or {}
        name = base64.b64decode(data.get("name", "")).decode()
        server = base64.b64decode(data.get("server", "")).decode()
        out.append((name, server))
    if not any(server == IN_CLUSTER_SERVER for _, server in out):
        out.append((IN_CLUSTER_NAME, IN_CLUSTER_SERVER))
    return out


def generate_params(request: Request, namespace: str, generator: dict[str, Any], *,
                    go_template: bool = False) -> list[dict[str, Any]] | None:
    """The parameters Argo CD's generator makes (None where it returns nil)."""
    clusters = argo_clusters(request, namespace)
    try:
        cm = request("GET", f"/api/v1/namespaces/{namespace}/configmaps/"
                     f"{generator.get('configMapRef', '')}")
    except Exception as exc:
        raise GeneratorError(f"error reading configMapRef: {exc}") from exc
    data = cm.get("data") or {}
    api_version, kind = data.get("apiVersion", ""), data.get("kind", "")
    slash = api_version.find("/")
    name = generator.get("name") or ""
    selector = generator.get("labelSelector") or {}
    has_selector = bool(selector.get("matchLabels")) or bool(selector.get("matchExpressions"))
    if not kind or slash < 1:
        raise GeneratorError("there is a problem with the apiVersion, kind or resourceName "
                             "provided")
    if (not name and not has_selector) or (name and has_selector):
        raise GeneratorError("there is a problem with the definition of the "
                             "ClusterDecisionResource generator")
    query = ("labelSelector=" + quote(format_selector(selector)) if not name
             else "fieldSelector=" + quote(f"metadata.name={name}"))
    try:
        listed = request("GET", f"/apis/{api_version}/namespaces/{namespace}/{kind}?{query}")
    except Exception as exc:
        raise GeneratorError(f"failed to get dynamic resources: {exc}") from exc
    items = listed.get("items") or []
    if not items:
        raise GeneratorError("no clusterDecisionResources found")
    list_key = data.get("statusListKey") or "clusters"
    match_key = data.get("matchKey") or ""
    if not match_key:
        return None
    decisions: list[Any] = []
    for item in items:
        status = item.get("status")
        if not status:
            continue
        listed_decisions = status.get(list_key)
        if not isinstance(listed_decisions, list):  # where Argo CD's type assertion panics
            raise GeneratorError(f"status.{list_key} of {item['metadata']['name']} is not a "
                                 "list")
        decisions += listed_decisions
    if not decisions:
        return None
    out: list[dict[str, Any]] = []
    for decision in decisions:
        value = decision.get(match_key)
        if value is None or go_v(value) == "":
            continue
        cluster = next((c for c in clusters if c[0] == go_v(value)), None)
        if cluster is None:
            continue
        params: dict[str, Any] = {"name": cluster[0], "server": cluster[1]}
        for key, v in decision.items():
            params[key] = go_v(v)
        for key, v in (generator.get("values") or {}).items():
            if go_template:
                params.setdefault("values", {})[key] = v
            else:
                params[f"values.{key}"] = v
        out.append(params)
    return out


__all__ = ["GeneratorError", "argo_clusters", "format_selector", "generate_params", "go_v"]
