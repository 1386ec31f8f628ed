"""Secrets kept apart: what :func:`split` takes out of each kind of document, and that
:func:`merge` puts exactly that back."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from berth.store.credentials import (
    APART,
    ClusterCredentials,
    CredentialsMeta,
    apart_in_manifest,
    merge,
    missing_users,
    split,
)

PROJECT: dict[str, Any] = {
    "api": "openstack", "kind": "Project",
    "metadata": {"name": "os-paris", "namespace": "default"},
    "spec": {"url": "https://keystone.example:5000/v3", "template": "t",
             "auth": {"type": "application_credential",
                      "application_credential": {"id": "77aa", "secret": "also-secret"}}}}
CLOUD: dict[str, Any] = {
    "api": "infrastructure", "kind": "GlobalCloud", "metadata": {"name": "os"},
    "spec": {"type": "openstack", "openstack": {"url": "https://k", "auth": {
        "type": "password", "password": {"user": {"id": "u1", "password": "very-secret"},
                                         "project": {"id": "p1"}}}}}}
KAFKA: dict[str, Any] = {
    "api": "core", "kind": "GlobalMetricsProvider", "metadata": {"name": "kafka"},
    "spec": {"type": "kafka", "kafka": {"bootstrap_servers": "k:9092", "topic": "t",
                                        "sasl_username": "berth", "sasl_password": "kafka-pw"}}}
CLUSTER: dict[str, Any] = {
    "api": "kubernetes", "kind": "Cluster", "metadata": {"name": "c", "namespace": "default"},
    "spec": {"kubeconfig": {"clusters": [{"name": "c", "cluster": {
        "server": "https://c", "certificate-authority-data": "Q0E="}}],
        "users": [{"name": "me", "user": {"token": "kube-token"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "me"}}]}}}
APP: dict[str, Any] = {
    "api": "kubernetes", "kind": "Application", "metadata": {"name": "a", "namespace": "default"},
    "spec": {"manifest": [
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db"},
         "data": {"password": "c2VjcmV0"}, "stringData": {"user": "app-user"}},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
         "spec": {"template": {"spec": {"containers": [{"name": "c", "env": [
             {"name": "PW", "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}}
         ]}]}}}}]}}

SECRETS = ("also-secret", "very-secret", "kafka-pw", "kube-token", "c2VjcmV0", "app-user")


@pytest.mark.parametrize("doc", [PROJECT, CLOUD, KAFKA, CLUSTER, APP],
                         ids=lambda d: str(d["kind"]))
def test_every_secret_is_taken_out_and_put_back(doc: dict[str, Any]) -> None:
    before = copy.deepcopy(doc)
    public, creds = split(doc["kind"], doc)
    assert doc == before  # not changed
    assert creds is not None
    assert not any(s in repr(public) for s in SECRETS), public
    assert APART in repr(public) or creds.users  # each secret's place says so
    assert creds.metadata == CredentialsMeta(doc["metadata"]["name"],
                                             doc["metadata"].get("namespace"))
    assert merge(public, creds) == doc


def test_what_is_not_a_secret_stays() -> None:
    public, creds = split("Application", APP)
    assert creds is not None and set(creds.values) == {"/spec/manifest/0/data",
                                                       "/spec/manifest/0/stringData"}
    # a reference to a Secret is no secret: the workload is untouched
    assert public["spec"]["manifest"][1] == APP["spec"]["manifest"][1]
    assert apart_in_manifest(public["spec"]["manifest"])
    public, creds = split("Cluster", CLUSTER)
    assert creds is not None and not creds.values
    kubeconfig = public["spec"]["kubeconfig"]
    assert kubeconfig["users"] == [{"name": "me"}]  # its contexts still make sense
    assert kubeconfig["clusters"] == CLUSTER["spec"]["kubeconfig"]["clusters"]
    plain = {"kind": "GlobalMetric", "metadata": {"name": "m"}, "spec": {"min": 0, "max": 1}}
    assert split("GlobalMetric", plain) == (plain, None)


def test_a_value_whose_place_changed_is_not_put_back() -> None:
    public, creds = split("Project", PROJECT)
    assert creds is not None
    assert public["spec"]["auth"]["application_credential"] == APART  # all of it
    public["spec"]["auth"]["application_credential"] = {"id": "typed by hand"}
    merged = merge(public, creds)
    assert merged["spec"]["auth"]["application_credential"] == {"id": "typed by hand"}


def test_the_older_cluster_layout_still_merges() -> None:
    old = ClusterCredentials(CredentialsMeta("c", "default"),
                             users=[{"name": "me", "user": {"token": "kube-token"}}])
    public, _ = split("Cluster", CLUSTER)
    assert merge(public, old) == CLUSTER
    assert APART not in repr(merge(public, old))


def test_a_reader_tells_a_kubeconfig_whose_credentials_it_has_not_seen() -> None:
    """#72 item 6: an Export read before the credentials written with it in one
    transaction was 'unusable' (Failing, never Recovered); now the reader waits."""
    kubeconfig = {"users": [{"name": "a", "user": {"token": "t"}},
                            {"name": "b", "user": {"username": "u", "password": "p"}}]}
    doc = {"kind": "Export", "metadata": {"name": "x"}, "spec": {"kubeconfig": kubeconfig}}
    public, creds = split("Export", doc)
    assert creds is not None
    assert missing_users(public["spec"]["kubeconfig"], []) == ["a", "b"]
    assert missing_users(public["spec"]["kubeconfig"], creds.users[:1]) == ["b"]
    assert missing_users(public["spec"]["kubeconfig"], creds.users) == []
    assert missing_users(kubeconfig, []) == []  # inline: nothing apart
