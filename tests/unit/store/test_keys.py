"""The key layout (docs/architecture.md "Store contract"), exactly."""

from __future__ import annotations

import pytest

from berth.store import keys


def test_the_contract_keys() -> None:
    assert keys.resource_key("GlobalMetric", "heat") == "/berth/v1/globalmetrics/heat"
    assert keys.resource_key("Cluster", "a", "default") == "/berth/v1/clusters/default/a"
    assert keys.binding_key("Application", "default", "web") == (
        "/berth/v1/bindings/applications/default/web")
    assert keys.status_key("Cluster", "ns", "c") == "/berth/v1/status/clusters/ns/c"
    assert keys.metric_value_key("heat") == "/berth/v1/metricvalues/globalmetrics/heat"
    assert keys.metric_value_key("load", "ns") == "/berth/v1/metricvalues/metrics/ns/load"
    assert keys.lease_key("scheduler") == "/berth/v1/leases/scheduler"
    assert keys.secrets_prefix("MetricsProvider") == "/berth/v1/secrets/metricsproviders/"
    assert keys.secrets_prefix("Cluster") == keys.CLUSTER_CREDENTIALS
    assert keys.renewal_key("edge/site-1") == "/berth/v1/renewals/edge/site-1"


@pytest.mark.parametrize(
    "key",
    ["/berth/v1/globalmetrics/heat", "/berth/v1/clusters/default/a",
     "/berth/v1/bindings/applications/default/web", "/berth/v1/status/clusters/ns/c",
     "/berth/v1/metricvalues/metrics/ns/load"],
)
def test_keys_parse_back(key: str) -> None:
    ref = keys.parse_key(key)
    assert key.endswith(f"{ref.kind.plural}/{ref.namespace + '/' if ref.namespace else ''}{ref.name}")


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: keys.resource_key("Cluster", "a"), "namespace is required"),
        (lambda: keys.resource_key("GlobalMetric", "a", "ns"), "global kind"),
        (lambda: keys.resource_key("Cluster", "a/b", "ns"), "invalid name"),
        (lambda: keys.resource_key("Cluster", "a", "Bad_NS"), "invalid namespace"),
        (lambda: keys.resource_key("Pod", "a", "ns"), "unknown kind"),
        (lambda: keys.parse_key("/berth/v1/clusters/a"), "namespace/name"),
        (lambda: keys.parse_key("/other/x"), "not a berth key"),
    ],
)
def test_bad_keys_are_refused(call, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises((ValueError, KeyError), match=message):
        call()


def test_binding_and_status_keys_lead_back_to_their_resource() -> None:
    app = keys.resource_key("Application", "web", "default")
    assert keys.resource_key_of(keys.binding_key("Application", "default", "web")) == app
    assert keys.resource_key_of(keys.status_key("Application", "default", "web")) == app
    assert keys.resource_key_of(app) == app


def test_the_key_is_the_name() -> None:
    app = keys.resource_key("Application", "web", "default")
    assert keys.misplaced(app, "web", "default") is None
    assert keys.misplaced(app, "api", "default") == (
        "metadata.name 'api' is not the key's name 'web'")
    assert keys.misplaced(app, "web", "prod") == (
        "metadata.namespace 'prod' is not the key's namespace 'default'")
    assert keys.misplaced(app, "web", None) == (
        "metadata.namespace None is not the key's namespace 'default'")
    metric = keys.resource_key("GlobalMetric", "heat")
    assert keys.misplaced(metric, "heat", None) is None
    assert keys.misplaced(metric, "heat", "default") == (
        "metadata.namespace 'default': GlobalMetric is a global kind")
    for key in (keys.binding_key("Application", "default", "web"),
                keys.status_key("Application", "default", "web"),
                keys.secrets_key("Cluster", "web", "default")):
        assert keys.misplaced(key, "web", "default") is None
        assert keys.misplaced(key, "other", "default") is not None
    assert keys.misplaced(keys.METRIC_PICTURE, "anything", None) is None  # no document key


def test_a_pull_clusters_keys_sit_under_its_own_prefixes() -> None:
    """Everything an agent may read (its work) and write (its reports, its heartbeat)
    sits under one prefix of its own: etcd grants by prefix and has no deny rule."""
    work = keys.work_key("edge/site-1", "shop", "web")
    report = keys.report_key("edge/site-1", "shop", "web")
    assert work.startswith(keys.work_prefix("edge/site-1"))
    assert report.startswith(keys.agent_prefix("edge/site-1"))
    assert keys.heartbeat_key("edge/site-1").startswith(keys.agent_prefix("edge/site-1"))
    # a cluster whose name begins with another's reads nothing of the other's
    assert not keys.work_key("edge/site-10", "shop", "web").startswith(
        keys.work_prefix("edge/site-1"))
    assert keys.parse_cluster_key(work) == keys.ClusterKeyRef("work", "edge/site-1", "shop",
                                                              "web")
    assert keys.parse_cluster_key(report) == keys.ClusterKeyRef("report", "edge/site-1",
                                                                "shop", "web")
    assert keys.parse_cluster_key(keys.heartbeat_key("edge/site-1")).what == "heartbeat"
    assert keys.parse_cluster_key(keys.registration_key("edge/site-1")).what == "registration"
    for key in (work, report, keys.heartbeat_key("edge/site-1"),
                keys.registration_key("edge/site-1")):
        assert keys.problem(key) is None


@pytest.mark.parametrize("key", [
    "/berth/v1/work/edge/site-1/shop",  # no application name
    "/berth/v1/work/edge/site-1/shop/web/extra",
    "/berth/v1/work/Edge/site-1/shop/web",  # not a namespace
    "/berth/v1/agents/edge/site-1/leader",  # not a key berth makes
    "/berth/v1/agents/edge/site-1/reports/shop",
    "/berth/v1/agents/edge",
    "/berth/v1/registrations/edge/site-1/x",
])
def test_keys_written_by_hand_under_the_agents_prefixes_are_named(key: str) -> None:
    assert keys.problem(key) is not None
    with pytest.raises(ValueError):
        keys.parse_cluster_key(key)


def test_a_cluster_id_must_name_a_namespace_and_a_name() -> None:
    for bad in ("site-1", "edge/", "/site-1", "edge/site 1"):
        with pytest.raises(ValueError):
            keys.work_prefix(bad)


def test_a_binding_or_status_key_leads_back_to_its_resource() -> None:
    app = keys.resource_key("Application", "web", "team-a")
    for family in (keys.BINDINGS, keys.STATUS):
        assert keys.resource_of(family, keys.under(family, app)) == app
    assert keys.resource_of(keys.BINDINGS, keys.status_key("Application", "team-a", "web")) \
        == keys.NO_KEY
