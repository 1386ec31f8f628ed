"""The Argo CD generator reader (``berth_testkit.argocd``) against Argo CD's own cases.

Translated from argo-cd v3.6.1 ``applicationset/generators/duck_type_test.go``
(``TestGenerateParamsForDuckType`` and ``TestGenerateParamsForDuckTypeGoTemplate``):
the same cluster Secrets, ConfigMap, Duck resources, generator fields and expected
parameters, on a real API server instead of client-go's fakes. One case differs:
"invalid name for duck resource", which the first table leaves out (its fake client
cannot select by field) and the second expects to fail with ``duck.mallard.io "quak"
not found``: that message is the fake client's. The generator lists by a field
selector, and a real API server answers a list that selects nothing with an empty
list, which the generator refuses as "no clusterDecisionResources found" (both: an
error, no parameters).
"""

from __future__ import annotations

import base64
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from berth_testkit.argocd import GeneratorError, generate_params
from berth_testkit.servers.kube import KubeCluster
from berth_testkit.servers.serving import serving

NS = "namespace"
DUCKS = "/apis/mallard.io/v1/namespaces/namespace/ducks"

CLUSTERS = [("staging-01", "staging", "foo"), ("production-01", "production", "bar")]


def _secret(name: str, env: str, org: str) -> dict[str, Any]:
    def b64(s: str) -> str:
        return base64.b64encode(s.encode()).decode()

    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": name, "namespace": NS, "labels": {
                "argocd.argoproj.io/secret-type": "cluster", "environment": env, "org": org},
                "annotations": {"foo.argoproj.io": env}},
            "data": {"config": b64("{}"), "name": b64(name),
                     "server": b64(f"https://{name}.example.com")}}


def _duck(labels: dict[str, str], status: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "mallard.io/v1", "kind": "Duck",
            "metadata": {"name": "quak", "namespace": NS, "labels": labels}, "status": status}


DUCK = _duck({"duck": "all-species"}, {"decisions": [{"clusterName": "staging-01"},
                                                     {"clusterName": "production-01"}]})
PROD_ONLY = _duck({"duck": "spotted"}, {"decisions": [{"clusterName": "production-01"}]})
NON_STRING = _duck({"duck": "all-species"}, {"decisions": [
    {"clusterName": "staging-01", "reason": "", "score": 0}]})
EMPTY = _duck({"duck": "canvasback"}, {})
DEFINITION = "there is a problem with the definition of the ClusterDecisionResource generator"

STAGING = {"clusterName": "staging-01", "name": "staging-01",
           "server": "https://staging-01.example.com"}
PRODUCTION = {"clusterName": "production-01", "name": "production-01",
              "server": "https://production-01.example.com"}
ALL_SPECIES_IN = {"matchExpressions": [{"key": "duck", "operator": "In",
                                        "values": ["all-species", "marbled"]}]}

# (name, resourceName, labelSelector, resource, values, expected, error), as Argo CD's table
CASES: list[tuple[str, str, dict[str, Any], dict[str, Any], dict[str, str] | None,
                  list[dict[str, Any]] | None, str | None]] = [
    ("no duck resource", "", {}, DUCK, None, [], DEFINITION),
    ("invalid name for duck resource", "quak-different", {}, DUCK, None, None,
     "no clusterDecisionResources found"),
    ("duck type generator resourceName", "quak", {}, DUCK, None, [PRODUCTION, STAGING], None),
    ("non-string values in cluster decisions are converted to strings", "quak", {},
     NON_STRING, None, [{**STAGING, "reason": "", "score": "0"}], None),
    ("production-only", "quak", {}, PROD_ONLY, {"foo": "bar"},
     [{**PRODUCTION, "values.foo": "bar"}], None),
    ("duck type empty status", "quak", {}, EMPTY, None, None, None),
    ("duck type empty status labelSelector.matchLabels", "",
     {"matchLabels": {"duck": "canvasback"}}, EMPTY, None, None, None),
    ("duck type generator labelSelector.matchLabels", "",
     {"matchLabels": {"duck": "all-species"}}, DUCK, None, [PRODUCTION, STAGING], None),
    ("production-only labelSelector.matchLabels", "", {"matchLabels": {"duck": "spotted"}},
     PROD_ONLY, {"foo": "bar"}, [{**PRODUCTION, "values.foo": "bar"}], None),
    ("duck type generator labelSelector.matchExpressions", "", ALL_SPECIES_IN, DUCK, None,
     [PRODUCTION, STAGING], None),
    ("duck type generator resourceName and labelSelector.matchExpressions", "quak",
     ALL_SPECIES_IN, DUCK, None, None, DEFINITION),
]

DUCK_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "ducks.mallard.io"},
    "spec": {"group": "mallard.io", "scope": "Namespaced",
             "names": {"kind": "Duck", "listKind": "DuckList", "plural": "ducks",
                       "singular": "duck"},
             "versions": [{"name": "v1", "served": True, "storage": True, "schema": {
                 "openAPIV3Schema": {"type": "object", "properties": {
                     "status": {"type": "object",
                                "x-kubernetes-preserve-unknown-fields": True}}}}}]}}


@pytest.fixture(scope="module")
def api() -> Iterator[KubeCluster]:
    """An API server with Argo CD's two cluster Secrets, its ConfigMap and the Duck CRD."""
    for server in serving(lambda: KubeCluster("argo-duck", nodes=0)):
        server.request("POST", "/api/v1/namespaces", {"metadata": {"name": NS}})
        for name, env, org in CLUSTERS:
            server.request("POST", f"/api/v1/namespaces/{NS}/secrets", _secret(name, env, org))
        server.request("POST", f"/api/v1/namespaces/{NS}/configmaps", {
            "metadata": {"name": "my-configmap"},
            "data": {"apiVersion": "mallard.io/v1", "kind": "ducks",
                     "statusListKey": "decisions", "matchKey": "clusterName"}})
        server.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                       DUCK_CRD)
        _until(lambda s=server: bool(s.request("GET", "/apis/mallard.io/v1").get("resources")))
        yield server


def _until(check: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if check():
                return
        except Exception:
            if time.monotonic() > deadline:
                raise
        if time.monotonic() > deadline:
            raise AssertionError("not in time")
        time.sleep(0.2)


def _request(server: KubeCluster) -> Callable[[str, str], dict[str, Any]]:
    return lambda method, path: server.request(method, path)


def _key(params: dict[str, Any]) -> str:
    return repr(sorted((k, repr(v)) for k, v in params.items()))


@pytest.mark.parametrize("go_template", [False, True], ids=["template", "goTemplate"])
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_argo_cd_duck_type_case(api: KubeCluster, case: tuple[Any, ...],
                                go_template: bool) -> None:
    _, name, selector, resource, values, expected, error = case
    api.request("DELETE", f"{DUCKS}/quak", ok=(200, 404))
    api.request("POST", DUCKS, resource)
    generator = {"configMapRef": "my-configmap", "name": name, "labelSelector": selector,
                 "values": values}
    if error is not None:
        with pytest.raises(GeneratorError) as raised:
            generate_params(_request(api), NS, generator, go_template=go_template)
        assert str(raised.value) == error
        return
    got = generate_params(_request(api), NS, generator, go_template=go_template)
    if expected is None:
        assert got is None
        return
    if go_template:  # Argo CD's GoTemplate test: the values as a map under "values"
        expected = [{**{k: v for k, v in e.items() if not k.startswith("values.")},
                     **({"values": {k[7:]: v for k, v in e.items() if k.startswith("values.")}}
                        if any(k.startswith("values.") for k in e) else {})}
                    for e in expected]
    assert got is not None
    assert sorted(map(_key, got)) == sorted(map(_key, expected))  # testify's ElementsMatch
