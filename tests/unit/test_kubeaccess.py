"""A ClusterProfile's access provider as a kubeconfig: the cases of cluster-inventory-api's
own tests (``pkg/access/config_test.go``, v0.1.3), in berth's words, and what berth
refuses besides.

(On a real kube-apiserver, a profile stored under the upstream CRD and reached through
its provider's exec plugin: tests/integration/test_kube_http.py.)"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from berth.kubeaccess import (
    ARGS_EXTENSION,
    ENVS_EXTENSION,
    EXEC_EXTENSION,
    AccessError,
    Provider,
    accessor,
    kubeconfig,
    providers,
)

BETA = "client.authentication.k8s.io/v1beta1"
FILE = {"providers": [
    {"name": "test-provider-1", "execConfig": {"command": "test-command-1",
                                               "args": ["arg1", "arg2"], "apiVersion": BETA}},
    {"name": "test-provider-2", "execConfig": {"command": "test-command-2", "args": ["arg3"],
                                               "apiVersion": BETA},
     "profileSourcedCLIArgsPolicy": "Append", "profileSourcedEnvVarsPolicy": "Replace"}]}


def profile(*access: dict[str, Any], deprecated: list[dict[str, Any]] | None = None
            ) -> dict[str, Any]:
    return {"metadata": {"name": "test-cluster"}, "status": {
        "accessProviders": list(access), **({"credentialProviders": deprecated}
                                             if deprecated else {})}}


def cluster(server: str, **more: Any) -> dict[str, Any]:
    return {"server": server, "certificate-authority-data": "dGVzdC1jYQ==", **more}


def test_a_provider_file_is_read_in_its_order_with_its_policies() -> None:
    got = providers(FILE)
    assert [p.name for p in got] == ["test-provider-1", "test-provider-2"]
    assert (got[0].args_policy, got[0].envs_policy) == ("", "")
    assert (got[1].args_policy, got[1].envs_policy) == ("Append", "Replace")
    assert got[1].exec_config == {"command": "test-command-2", "args": ["arg3"],
                                  "apiVersion": BETA}
    assert providers({}) == () and providers({"providers": []}) == ()


@pytest.mark.parametrize(("data", "said"), [
    ("invalid json content", "not an object with providers"),
    ({"providers": {"a": 1}}, "providers is not a list"),
    ({"providers": [{"execConfig": {}}]}, r"providers\[0\]: a provider needs a name"),
    ({"providers": [{"name": "p", "execConfig": "cat"}]}, "execConfig is not an object"),
    ({"providers": [{"name": "p", "profileSourcedCLIArgsPolicy": "Prepend"}]},
     "unsupported ProfileSourcedCLIArgsPolicy: 'Prepend'"),
    ({"providers": [{"name": "p", "profileSourcedEnvVarsPolicy": "Merge"}]},
     "unsupported ProfileSourcedEnvVarsPolicy: 'Merge'"),
])
def test_a_provider_file_berth_cannot_use_is_refused_saying_where(data: Any, said: str) -> None:
    with pytest.raises(AccessError, match=said):
        providers(data)


def test_the_first_provider_in_the_consumers_order_that_the_profile_lists_is_used() -> None:
    cp = profile({"name": "test-provider-1", "cluster": cluster("https://test-server-1.com")},
                 {"name": "test-provider-2", "cluster": cluster("https://test-server-2.com")},
                 {"name": "unsupported-provider",
                  "cluster": {"server": "https://unsupported-server.com"}})
    found = accessor(cp, providers(FILE))
    assert found is not None and found[0].name == "test-provider-1"
    assert found[1]["server"] == "https://test-server-1.com"
    assert accessor(cp, (Provider("different-provider", {"command": "cmd"}),)) is None
    assert accessor({"metadata": {"name": "empty"}, "status": {}}, providers(FILE)) is None
    found[1]["server"] = "modified-server"  # a copy: the profile is not changed
    assert cp["status"]["accessProviders"][0]["cluster"]["server"] == "https://test-server-1.com"


def test_access_providers_override_deprecated_credential_providers_of_the_same_name() -> None:
    cp = profile({"name": "test-provider-2", "cluster": cluster("https://new")},
                 deprecated=[{"name": "test-provider-2", "cluster": cluster("https://old")},
                             {"name": "test-provider-1", "cluster": cluster("https://one")}])
    found = accessor(cp, providers(FILE))
    assert found is not None and (found[0].name, found[1]["server"]) == (
        "test-provider-1", "https://one")  # the consumer's order first
    only_two = accessor(cp, providers(FILE)[1:])
    assert only_two is not None and only_two[1]["server"] == "https://new"


def test_no_matching_provider_or_no_exec_config_is_an_error() -> None:
    cp = profile({"name": "test-provider-1", "cluster": cluster("https://test-server.com")})
    with pytest.raises(AccessError, match="no matching cluster accessor found for cluster "
                                          "profile 'test-cluster'"):
        kubeconfig(cp, (Provider("different-provider", {"command": "cmd"}),))
    with pytest.raises(AccessError, match="no exec config found for provider 'test-provider-1'"):
        kubeconfig(cp, (Provider("test-provider-1", None),))


def _profile_with_extensions() -> dict[str, Any]:
    return profile({"name": "test-provider-1", "cluster": cluster(
        "https://test-server.com", extensions=[
            {"name": EXEC_EXTENSION, "extension": {"audience": "spoke-1"}},
            {"name": ARGS_EXTENSION, "extension": ["--audience", "audience"]},
            {"name": ENVS_EXTENSION, "extension": {"CLIENT_ID": "client-id",
                                                   "TENANT_ID": "tenant-id"}}])})


def test_a_kubeconfig_is_built_with_the_providers_plugin_never_interactive() -> None:
    own = (Provider("test-provider-1", {"apiVersion": "client.authentication.k8s.io/v1",
                                        "command": "cat", "args": ["token.json"],
                                        "env": [{"name": "foo", "value": "bar"}]}),)
    config = kubeconfig(_profile_with_extensions(), own)
    (c,) = config["clusters"]
    assert c["cluster"]["server"] == "https://test-server.com"
    assert c["cluster"]["certificate-authority-data"] == "dGVzdC1jYQ=="
    assert {"name": EXEC_EXTENSION, "extension": {"audience": "spoke-1"}} in c["cluster"][
        "extensions"]  # the plugin is told it, with provideClusterInfo (berth/kubeexec.py)
    (u,) = config["users"]
    assert u["user"]["exec"] == {"apiVersion": "client.authentication.k8s.io/v1",
                                 "command": "cat", "args": ["token.json"],
                                 "env": [{"name": "foo", "value": "bar"}],
                                 "interactiveMode": "Never"}  # no policy: extensions ignored
    assert config["current-context"] == "test-cluster"


@pytest.mark.parametrize(("policy", "client_id"), [
    ("AppendIfNotExists", "provider-id"), ("Replace", "client-id")])
def test_the_profiles_variables_join_the_providers_as_its_policy_says(policy: str,
                                                                      client_id: str) -> None:
    own = (Provider("test-provider-1", {"command": "cat", "apiVersion": BETA,
                                        "env": [{"name": "CLIENT_ID", "value": "provider-id"},
                                                {"name": "foo", "value": "bar"}]},
                    envs_policy=policy),)
    env = kubeconfig(_profile_with_extensions(), own)["users"][0]["user"]["exec"]["env"]
    assert env == [{"name": "CLIENT_ID", "value": client_id},
                   {"name": "TENANT_ID", "value": "tenant-id"}, {"name": "foo", "value": "bar"}]


def test_the_profiles_arguments_are_appended_only_when_the_provider_allows() -> None:
    base = {"command": "cat", "apiVersion": BETA, "args": ["token.json"]}
    appended = kubeconfig(_profile_with_extensions(), (
        Provider("test-provider-1", base, args_policy="Append"),))
    assert appended["users"][0]["user"]["exec"]["args"] == ["token.json", "--audience",
                                                            "audience"]
    ignored = kubeconfig(_profile_with_extensions(), (
        Provider("test-provider-1", base, args_policy="Ignore"),))
    assert ignored["users"][0]["user"]["exec"]["args"] == ["token.json"]
    assert base["args"] == ["token.json"]  # the provider's own is never changed


@pytest.mark.parametrize(("change", "said"), [
    ({"proxy-url": "http://proxy.example.com"}, "a proxy-url is not supported"),
    ({"server": ""}, "no server"),
    ({"extensions": [{"name": ARGS_EXTENSION, "extension": {"args": "--x"}}]},
     "additional-args is not a list of strings"),
    ({"extensions": [{"name": ENVS_EXTENSION, "extension": ["A=1"]}]},
     "additional-envs is not a mapping of names to values"),
])
def test_a_profile_berth_cannot_reach_a_cluster_from_is_refused(change: dict[str, Any],
                                                                said: str) -> None:
    cp = copy.deepcopy(profile({"name": "p", "cluster": cluster("https://x")}))
    cp["status"]["accessProviders"][0]["cluster"].update(change)
    with pytest.raises(AccessError, match=said):
        kubeconfig(cp, (Provider("p", {"command": "c", "apiVersion": BETA},
                                 args_policy="Append", envs_policy="Replace"),))
