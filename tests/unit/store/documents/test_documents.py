"""Document types: Krake's YAML loads unchanged; bad documents name their field."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
import yaml

from berth.bootstrap.load import LoadErrors, load, to_document
from berth.store import Invalid, decode, encode
from berth.store.codec import convert
from berth.store.documents import (
    RESOURCE_TYPES,
    Application,
    ClusterStatus,
    GlobalMetricsProvider,
    Header,
    MetricsProvider,
)

ROOT = Path(__file__).resolve().parents[4]


def test_the_examples_are_valid() -> None:
    loaded = load([str(ROOT / "deploy" / "examples")])
    kinds = sorted({type(item.doc).__name__ for item in loaded})
    assert kinds == ["Application", "Cluster", "GlobalCloud", "GlobalMetric",
                     "GlobalMetricsProvider"]


def test_krakes_kafka_provider_is_the_ksql_one() -> None:
    doc = to_document("x#1", yaml.safe_load("""
api: core
kind: GlobalMetricsProvider
metadata: {name: kafka_provider}
spec:
  type: kafka
  kafka: {comparison_column: c, table: t, url: "http://localhost:8080", value_column: v}
""")).doc
    assert isinstance(doc, GlobalMetricsProvider)
    assert doc.spec.effective_type() == "ksql"
    topic = msgspec.structs.replace(
        doc.spec, kafka=msgspec.convert({"bootstrap_servers": "k:9092", "topic": "m"},
                                        type(doc.spec.kafka)))
    assert topic.effective_type() == "kafka"


def where(text: str) -> str:
    with pytest.raises(Invalid) as err:
        to_document("f.yaml#2", yaml.safe_load(text))
    return str(err.value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("kind: Pod", "f.yaml#2 kind: 'Pod' is not a kind berth stores"),
        ("[1, 2]", "f.yaml#2: expected a mapping"),
        ("kind: GlobalMetric\nmetadata: {name: m}\nspec: {min: 1, max: 1, provider: {name: p, metric: m}}",
         "f.yaml#2 spec.max: min (1) must be less than max (1)"),
        ("kind: GlobalMetric\nmetadata: {name: m}\nspec: {min: x, max: 1, provider: {name: p, metric: m}}",
         "f.yaml#2 spec.min: Expected 'float', got 'str'"),
        ("kind: GlobalMetric\nmetadata: {name: m}\nspec: {mni: 0, max: 1, provider: {name: p, metric: m}}",
         "f.yaml#2 spec: Object contains unknown field 'mni'"),
        ("kind: GlobalMetric\nmetadata: {name: 'a b'}\nspec: {min: 0, max: 1, provider: {name: p, metric: m}}",
         "f.yaml#2 metadata.name: invalid name 'a b'"),
        ("kind: GlobalMetric\napi: kubernetes\nmetadata: {name: m}\nspec: {min: 0, max: 1, provider: {name: p, metric: m}}",
         "f.yaml#2 api: GlobalMetric belongs to api 'core'"),
        ("kind: GlobalMetricsProvider\nmetadata: {name: p}\nspec: {type: prometheus}",
         "f.yaml#2 spec.prometheus: a provider of type 'prometheus' needs this section"),
        ("kind: GlobalMetricsProvider\nmetadata: {name: p}\nspec: {type: kafka, kafka: {url: u}}",
         "f.yaml#2 spec.kafka: a KSQL table needs table, comparison_column, value_column"),
        ("kind: GlobalMetricsProvider\nmetadata: {name: p}\nspec: {type: graphite}",
         "f.yaml#2 spec.type: Invalid enum value 'graphite'"),
        ("kind: Cluster\nmetadata: {name: c}\nspec: {metrics: [{name: m, weight: -1}]}",
         "f.yaml#2 spec.metrics[0].weight: must not be negative"),
        ("kind: Cluster\nmetadata: {name: c}\nspec: {custom_resources: [crontabs]}",
         "f.yaml#2 spec.custom_resources[0]: 'crontabs' is not a custom resource name"),
        ("kind: Cluster\nmetadata: {name: c}\nspec: {constraints: {cloud: {metrics: ['x <> 1']}}}",
         "f.yaml#2 spec.constraints.cloud.metrics[0]: cannot parse 'x <> 1'"),
        ("kind: Cluster\nmetadata: {name: c}\nspec: {taints: [{key: k, effect: Never}]}",
         "f.yaml#2 spec.taints[0].effect: Invalid enum value 'Never'"),
        ("kind: Application\nmetadata: {name: a}\nspec: {constraints: {cluster: {metrics: ['load < lots']}}}",
         "f.yaml#2 spec.constraints.cluster.metrics[0]: cannot parse 'load < lots'"),
        ("kind: Application\nmetadata: {name: a}\nspec: {placement: {policy: PickN}}",
         "f.yaml#2 spec.placement.numberOfClusters: PickN needs a number >= 1"),
        ("kind: Application\nmetadata: {name: a}\nspec: {placement: {policy: PickFixed}}",
         "f.yaml#2 spec.placement.clusterNames: PickFixed needs cluster names"),
        ("kind: Application\nmetadata: {name: a}\nspec: {manifest: [{kind: Service}]}",
         "f.yaml#2 spec.manifest[0]: a Kubernetes object needs apiVersion and kind"),
        ("kind: Application\nmetadata: {name: a}\nspec: {affinity: {clusterAffinity: "
         "{requiredDuringSchedulingIgnoredDuringExecution: {clusterSelectorTerms: [{matchExpressions: "
         "[{key: cpu, operator: Gt, values: [many]}]}]}}}}",
         "f.yaml#2 spec.affinity.clusterAffinity.requiredDuringSchedulingIgnoredDuringExecution"
         ".clusterSelectorTerms[0].matchExpressions[0].values: 'many' is not an integer"),
        ("kind: Application\nmetadata: {name: a, namespace: Bad}\nspec: {}",
         "f.yaml#2 metadata.namespace: invalid namespace 'Bad'"),
        ("kind: Application\nmetadata: {name: a}\nspec: {dependsOn: [{name: a}]}",
         "f.yaml#2 spec.dependsOn[0].name: an application cannot depend on itself"),
        ("kind: Application\nmetadata: {name: a}\nspec: {dependsOn: [{name: b}, {name: b}]}",
         "f.yaml#2 spec.dependsOn[1].name: 'default/b' is named twice"),
        ("kind: Application\nmetadata: {name: a}\nspec: {dependsOn: [{name: 'b c'}]}",
         "f.yaml#2 spec.dependsOn[0].name: invalid name 'b c'"),
        ("kind: Application\nmetadata: {name: a}\nspec: {dependsOn: [{name: b, when: Ready}]}",
         "f.yaml#2 spec.dependsOn[0].when: Invalid enum value 'Ready'"),
        ("kind: Application\nmetadata: {name: a}\nspec: {manifest: [{apiVersion: v1, kind: S}], "
         "deployedBy: {tool: argocd, objects: [{apiVersion: v1, kind: S, name: s}]}}",
         "f.yaml#2 spec.deployedBy: an application another tool deploys has no manifest"),
        ("kind: Application\nmetadata: {name: a}\nspec: {deployedBy: {tool: argocd, export: e, "
         "applicationSet: s}}",
         "f.yaml#2 spec.deployedBy.objects: name the objects its copy is on each cluster"),
        ("kind: Application\nmetadata: {name: a}\nspec: {deployedBy: {tool: argocd, objects: "
         "[{apiVersion: v1, kind: S, name: s}]}}",
         "f.yaml#2 spec.deployedBy.export: Argo CD's Applications are found by the Export"),
        ("kind: Application\nmetadata: {name: a}\nspec: {deployedBy: {tool: flux, objects: "
         "[{apiVersion: v1, kind: S, name: s}], revision: r}}",
         "f.yaml#2 spec.deployedBy: export, applicationSet and revision are Argo CD's"),
        ("kind: Inventory\nmetadata: {name: i}\nspec: {namespace: Fleet, kubeconfig: {}}",
         "f.yaml#2 spec.namespace: 'Fleet' is not a namespace name"),
        ("kind: Inventory\nmetadata: {name: i}\nspec: {namespace: f, kubeconfig: {}}",
         "f.yaml#2 spec.kubeconfig: a kubeconfig with clusters and a current-context"),
        ("kind: Inventory\nmetadata: {name: i}\nspec: {namespace: f, kubeconfig: {}, providers: "
         "{providers: [{execConfig: {}}]}}",
         "f.yaml#2 spec.providers: providers[0]: a provider needs a name"),
        ("kind: Inventory\nmetadata: {name: i}\nspec: {namespace: f, kubeconfig: {}, labels: "
         "{'a/b/c': x}}",
         "f.yaml#2 spec.labels.a/b/c: 'a/b/c' is not a label key"),
    ],
)
def test_bad_documents_name_the_field(text: str, message: str) -> None:
    assert message in where(text)


def test_namespaced_kinds_default_to_the_default_namespace() -> None:
    item = to_document("x#1", {"kind": "Application", "metadata": {"name": "a"}, "spec": {}})
    assert item.key == "/berth/v1/applications/default/a"


def test_yaml_errors_name_file_document_and_line(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text("kind: GlobalMetric\n---\nkey: [unclosed\n")
    with pytest.raises(LoadErrors) as err:
        load([str(tmp_path / "a.yaml")])
    assert f"{tmp_path / 'a.yaml'}#2 (line 4): invalid YAML" in err.value.errors[0]


def test_duplicates_in_the_input_are_errors(tmp_path: Path) -> None:
    doc = "kind: Application\nmetadata: {name: a}\nspec: {}\n"
    (tmp_path / "a.yaml").write_text(doc + "---\n" + doc)
    with pytest.raises(LoadErrors, match="also defined at .*a.yaml#1"):
        load([str(tmp_path / "a.yaml")])


def test_missing_inputs_are_errors(tmp_path: Path) -> None:
    with pytest.raises(LoadErrors, match="no such file"):
        load([str(tmp_path / "nope.yaml")])
    with pytest.raises(LoadErrors, match="no .yaml"):
        load([str(tmp_path)])


def test_documents_round_trip_through_json() -> None:
    item = load([str(ROOT / "deploy" / "examples" / "applications.yaml")])[0]
    data = encode(item.doc)
    assert decode(data, Application) == item.doc
    header = decode(data, Header)
    assert (header.kind, header.metadata.name) == ("Application", "web")


def test_a_process_decodes_only_what_it_reads() -> None:
    class AppView(msgspec.Struct):
        metadata: dict[str, object]

    data = encode(load([str(ROOT / "deploy" / "examples" / "applications.yaml")])[0].doc)
    assert decode(data, AppView).metadata["name"] == "web"


def test_the_minimal_cluster_status_document_decodes() -> None:
    raw = (b'{"api":"kubernetes","kind":"Cluster","metadata":{"name":"N","namespace":"NS"},'
           b'"status":{"state":"ONLINE"}}')
    assert decode(raw, ClusterStatus).status.state == "ONLINE"


def test_undecodable_values_name_key_and_field() -> None:
    with pytest.raises(Invalid, match=r"^/k: spec.type: Expected 'str', got 'int'"):
        decode(b'{"kind":"MetricsProvider","metadata":{"name":"p"},"spec":{"type":1}}',
               MetricsProvider, "/k")
    with pytest.raises(Invalid, match="^/k: "):
        decode(b"{garbage", MetricsProvider, "/k")


def test_every_schema_error_of_a_document_is_reported() -> None:
    doc = {"api": "kubernetes", "kind": "Application",
           "metadata": {"name": "x", "bogus": 1, "generation": "two"},
           "spec": {"constraints": {"cluster": {"labelz": [], "labels": [3]}}, "foo": 3}}
    with pytest.raises(Invalid) as err:
        convert(doc, RESOURCE_TYPES["Application"], "a.yaml#1")
    assert str(err.value).splitlines() == [
        "a.yaml#1 metadata: Object contains unknown field 'bogus'",
        "a.yaml#1 metadata.generation: Expected 'int', got 'str'",
        "a.yaml#1 spec.constraints.cluster: Object contains unknown field 'labelz'",
        "a.yaml#1 spec.constraints.cluster.labels[0]: Expected 'str', got 'int'",
        "a.yaml#1 spec: Object contains unknown field 'foo'",
    ]
    missing = {"api": "kubernetes", "kind": "Application", "metadata": {"bogus": 1}}
    with pytest.raises(Invalid) as err:
        convert(missing, RESOURCE_TYPES["Application"], "b.yaml#2")
    assert str(err.value).splitlines() == [
        "b.yaml#2 metadata: Object contains unknown field 'bogus'",
        "b.yaml#2 metadata: Object missing required field 'name'"]
    wrong = {"api": "kubernetes", "kind": "Application", "metadata": {"name": 7}}
    with pytest.raises(Invalid) as err:  # taken out, it is missing: said once
        convert(wrong, RESOURCE_TYPES["Application"], "c.yaml#1")
    assert str(err.value).splitlines() == ["c.yaml#1 metadata.name: Expected 'str', got 'int'"]


KRAKE_SHAPES = """\
api: core
kind: GlobalMetric
metadata: {name: heat_zone_7}
spec:
  allowed_values: [0, 2, 3]
  max: 3.0
  min: 0.0
  provider: {metric: heat_zone_7, name: prom}
---
api: core
kind: GlobalMetric
metadata: {name: heat_zone_8}
spec:
  allowed_values: []
  max: 3.0
  min: 0.0
  provider: {metric: heat_zone_8, name: prom}
---
api: kubernetes
kind: Application
metadata: {name: nulls, namespace: default}
spec:
  constraints:
    cluster: {labels: null, metrics: null, custom_resources: null}
  manifest:
  - apiVersion: apps/v1
    kind: Deployment
    metadata: {name: nulls}
    spec: {replicas: null}
---
api: infrastructure
kind: GlobalCloud
metadata: {name: os-leipzig, labels: {location: DE}}
spec:
  type: openstack
  openstack:
    url: https://keystone.example:5000/v3
    auth: {type: password, password: {user: {name: u, password: p, domain_name: Default},
           project: {name: p, domain_name: Default}, version: '3'}}
    metrics:
    - {name: heat_zone_7, weight: 2.0}
---
api: kubernetes
kind: Cluster
metadata: {name: inherits, namespace: default, inherit_labels: true}
spec:
  inherit_metrics: true
  metrics: null
  constraints:
    cloud: {labels: null, metrics: null}
"""


def test_krake_s_shapes_load_and_mean_what_they_mean_in_krake(tmp_path: Path) -> None:
    from berth.bootstrap import ignored
    from berth.store.documents import GlobalCloud, GlobalMetric

    f = tmp_path / "krake.yaml"
    f.write_text(KRAKE_SHAPES)
    loaded = load([str(f)])  # refused: allowed_values unknown, labels: null not a list
    metric = loaded[0].doc
    assert isinstance(metric, GlobalMetric) and metric.spec.allowed_values == [0, 2, 3]
    app = loaded[2].doc
    assert isinstance(app, Application) and app.spec.constraints is not None
    assert app.spec.constraints.cluster is not None
    assert app.spec.constraints.cluster.labels == [] == app.spec.constraints.cluster.metrics
    assert app.spec.manifest[0]["spec"] == {"replicas": None}  # a manifest's null is its own
    cloud = loaded[3].doc
    assert isinstance(cloud, GlobalCloud)  # its metrics were silently ignored
    assert [(m.name, m.weight) for m in cloud.spec.metrics] == [("heat_zone_7", 2.0)]
    assert b'"metrics":[{"name":"heat_zone_7","weight":2.0}]' in encode(cloud)
    assert ignored(loaded[4]) == [
        f"{f}#5 metadata.inherit_labels: accepted for Krake's YAML, but berth does not "
        "implement it: the cluster keeps only its own labels",
        f"{f}#5 spec.inherit_metrics: accepted for Krake's YAML, but berth does not "
        "implement it: the cluster keeps only its own metrics"]
    assert ignored(loaded[0]) == []


def test_the_make_room_example_is_valid() -> None:
    """docs/scheduler.md's worked example of priority and preemption loads as written."""
    loaded = load([str(ROOT / "docs" / "examples" / "make-room.yaml")])
    assert [type(item.doc).__name__ for item in loaded] == [
        "PriorityClass", "PriorityClass", "Application", "Application"]
    checkout = loaded[3].doc
    assert isinstance(checkout, Application)
    assert checkout.spec.priority_class_name == "critical"
