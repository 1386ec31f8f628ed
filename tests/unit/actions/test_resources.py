"""The read commands' helpers: kinds as typed, masking, ages, label selectors."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from berth.actions.resources import MASK, Shown, age, agent_credential, mask, selected, selector
from berth.cli.kinds import resolve
from berth.store import keys
from berth.store.documents import ClusterState, ClusterStatus, StatusMeta
from berth.store.documents.registration import Registration, RegistrationStatus


@pytest.mark.parametrize(("typed", "kind"), [
    ("applications", "Application"), ("Application", "Application"), ("APP", "Application"),
    ("application", "Application"), ("cl", "Cluster"), ("Clusters", "Cluster"),
    ("gm", "GlobalMetric"), ("globalmetric", "GlobalMetric"), ("mp", "MetricsProvider"),
    ("gcl", "GlobalCloud"), ("cloud", "Cloud")])
def test_kinds_as_people_type_them(typed: str, kind: str) -> None:
    assert resolve(typed).name == kind


def test_an_unknown_kind_lists_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"unknown kind 'pods'; one of: .*applications"):
        resolve("pods")


def test_every_credential_is_masked_and_nothing_else() -> None:
    kubeconfig = {"users": [{"name": "a", "user": {"token": "s3cret", "client-key-data": "K",
                                                  "client-certificate-data": "C"}}],
                  "clusters": [{"cluster": {"server": "https://x"}}]}
    auth = {"auth": {"password": {"user": {"name": "u", "password": "pw"}}},
            "application_credential": {"id": "i", "secret": "s"}}
    out = mask({"spec": {"kubeconfig": kubeconfig, "openstack": auth}})
    user = out["spec"]["kubeconfig"]["users"][0]["user"]
    assert user == {"token": MASK, "client-key-data": MASK, "client-certificate-data": "C"}
    assert out["spec"]["kubeconfig"]["clusters"] == kubeconfig["clusters"]
    assert out["spec"]["openstack"]["auth"]["password"] == MASK
    assert out["spec"]["openstack"]["application_credential"] == MASK
    assert kubeconfig["users"][0]["user"]["token"] == "s3cret"  # a copy


def test_ages_read_like_kubectl() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    assert [age(now - timedelta(seconds=s), now) for s in (5, 90, 7200, 3 * 86400)] == [
        "5s", "1m", "2h", "3d"]
    assert age(None) == "-"


def test_label_selectors() -> None:
    terms = selector("location=DE,tier!=gold,gpu,!spot")
    assert selected({"location": "DE", "gpu": "yes"}, terms)
    assert not selected({"location": "FR", "gpu": "yes"}, terms)
    assert not selected({"location": "DE", "gpu": "1", "spot": "1"}, terms)
    assert not selected({"location": "DE", "gpu": "1", "tier": "gold"}, terms)
    with pytest.raises(ValueError, match="cannot parse 'a b'"):
        selector("a b")


def test_a_pull_clusters_agent_credential_says_what_is_true() -> None:
    """#73 item 6: the demo's agent runs, its cluster ONLINE, on an etcd without
    authentication (no join): it was shown as "not joined"."""
    def shown(state: str | None, registration: Registration | None) -> Shown:
        return Shown(keys.kind("Cluster"), "k", "default", "edge", registration=registration,
                     status=None if state is None else ClusterStatus(
                         StatusMeta("edge", "default"), ClusterState(state)))

    later = datetime.now(UTC) + timedelta(days=29, hours=1)
    joined = Registration(StatusMeta("edge", "default"), status=RegistrationStatus(
        identity="uid", user="berth-agent.default.edge", expires=later))
    assert agent_credential(shown("ONLINE", joined)) == (
        "expires in 29d", "etcd user berth-agent.default.edge, cluster identity uid, "
        "credential expires in 29d")
    assert agent_credential(shown("ONLINE", None))[0] == "none of its own"
    assert agent_credential(shown("OFFLINE", None))[0] == "not joined"
    assert agent_credential(shown(None, None))[0] == "not joined"
    revoked = Registration(StatusMeta("edge", "default"), status=RegistrationStatus(
        revoked=datetime.now(UTC) - timedelta(minutes=5)))
    assert agent_credential(shown("OFFLINE", revoked))[0] == "revoked 5m ago"
