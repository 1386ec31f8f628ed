"""A cluster reached from its ClusterProfile: which access provider, and the kubeconfig
berth's connection is made from (KEP-4322's consumer side, as cluster-inventory-api's
``pkg/access`` builds a client from a profile, v0.1.3).

The consumer — berth — holds a provider file, its own configuration, never a hub's:
``{"providers": [{"name", "execConfig", "profileSourcedCLIArgsPolicy",
"profileSourcedEnvVarsPolicy"}]}``. A profile lists, in ``status.accessProviders``
(and the deprecated ``status.credentialProviders``, which ``accessProviders`` of the
same name override), where its cluster is for each provider: a kubeconfig ``cluster``
(server, CA, extensions). The first provider *in the consumer's order* that the
profile lists is the one used; its ``execConfig`` is the user of the kubeconfig
(``interactiveMode: Never``), so the credential comes from the provider's exec plugin
when a call needs it (``berth/kubeexec.py``), never from the profile, and is written
nowhere. The cluster's extension ``client.authentication.k8s.io/exec`` reaches the
plugin as ``KUBERNETES_EXEC_INFO``'s ``spec.cluster.config`` (with
``provideClusterInfo: true``). KEP-5339's extensions add to the plugin's
invocation where the provider's policy lets the profile do so:

* ``clusterprofiles.multicluster.x-k8s.io/exec/additional-args`` (a list of
  strings): appended to ``args`` with ``Append``; ignored with ``Ignore`` or none.
* ``clusterprofiles.multicluster.x-k8s.io/exec/additional-envs`` (names to values):
  with ``AppendIfNotExists`` added where the provider sets no such variable, with
  ``Replace`` set over the provider's; ignored with ``Ignore`` or none.

Where berth differs: the variables are ordered by name (upstream builds them from a
map, in no order); a ``proxy-url`` is refused (berth reaches clusters directly), as
is an extension that is not the shape KEP-5339 gives it. Every refusal is an
:class:`AccessError` naming the profile, the provider or the field.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Literal

EXEC_EXTENSION = "client.authentication.k8s.io/exec"
ARGS_EXTENSION = "clusterprofiles.multicluster.x-k8s.io/exec/additional-args"
ENVS_EXTENSION = "clusterprofiles.multicluster.x-k8s.io/exec/additional-envs"
ArgsPolicy = Literal["", "Append", "Ignore"]  # "": none said (Ignore)
EnvsPolicy = Literal["", "AppendIfNotExists", "Replace", "Ignore"]
ARGS_POLICIES: tuple[ArgsPolicy, ...] = ("Append", "Ignore")
ENVS_POLICIES: tuple[EnvsPolicy, ...] = ("AppendIfNotExists", "Replace", "Ignore")


class AccessError(Exception):
    """A provider file, or a profile, berth cannot reach a cluster with."""


@dataclass(frozen=True, slots=True)
class Provider:
    name: str
    exec_config: dict[str, Any] | None  # the kubeconfig user's ``exec``
    args_policy: ArgsPolicy = ""
    envs_policy: EnvsPolicy = ""


def providers(data: Any) -> tuple[Provider, ...]:
    """The providers of a provider file's contents (decoded JSON), in its order."""
    if not isinstance(data, dict):
        raise AccessError("the provider file is not an object with providers")
    listed = data.get("providers") or []
    if not isinstance(listed, list):
        raise AccessError("the provider file's providers is not a list")
    out: list[Provider] = []
    for i, p in enumerate(listed):
        where = f"providers[{i}]"
        if not isinstance(p, dict) or not isinstance(p.get("name"), str) or not p["name"]:
            raise AccessError(f"{where}: a provider needs a name")
        exec_config = p.get("execConfig")
        if exec_config is not None and not isinstance(exec_config, dict):
            raise AccessError(f"{where} ({p['name']}): execConfig is not an object")
        args = next((a for a in ARGS_POLICIES
                     if a == p.get("profileSourcedCLIArgsPolicy")), None)
        envs = next((e for e in ENVS_POLICIES
                     if e == p.get("profileSourcedEnvVarsPolicy")), None)
        if args is None and p.get("profileSourcedCLIArgsPolicy"):
            raise AccessError(f"{where} ({p['name']}): unsupported ProfileSourcedCLIArgsPolicy: "
                              f"{p['profileSourcedCLIArgsPolicy']!r}")
        if envs is None and p.get("profileSourcedEnvVarsPolicy"):
            raise AccessError(f"{where} ({p['name']}): unsupported ProfileSourcedEnvVarsPolicy: "
                              f"{p['profileSourcedEnvVarsPolicy']!r}")
        out.append(Provider(p["name"], exec_config, args or "", envs or ""))
    return tuple(out)


def accessor(profile: dict[str, Any], offered: tuple[Provider, ...]
             ) -> tuple[Provider, dict[str, Any]] | None:
    """The first of ``offered`` (the consumer's order) that the profile lists, and where
    the profile says its cluster is for it (a copy); None: none of them."""
    status = profile.get("status") or {}
    listed: dict[str, dict[str, Any]] = {}
    for field in ("credentialProviders", "accessProviders"):  # the newer field wins
        for a in status.get(field) or []:
            if isinstance(a, dict) and isinstance(a.get("name"), str):
                listed[a["name"]] = a
    for p in offered:
        if p.name in listed:
            cluster = listed[p.name].get("cluster")
            return p, copy.deepcopy(cluster) if isinstance(cluster, dict) else {}
    return None


def kubeconfig(profile: dict[str, Any], offered: tuple[Provider, ...]) -> dict[str, Any]:
    """The kubeconfig to reach the profile's cluster with: its cluster as the first
    provider it shares with ``offered`` says, its user that provider's exec plugin."""
    name = (profile.get("metadata") or {}).get("name", "")
    found = accessor(profile, offered)
    if found is None:
        raise AccessError(f"no matching cluster accessor found for cluster profile {name!r}")
    provider, cluster = found
    if provider.exec_config is None:
        raise AccessError(f"no exec config found for provider {provider.name!r}")
    if cluster.get("proxy-url"):
        raise AccessError(f"cluster profile {name!r}, provider {provider.name!r}: a proxy-url "
                          "is not supported (berth reaches clusters directly)")
    if not isinstance(cluster.get("server"), str) or not cluster["server"]:
        raise AccessError(f"cluster profile {name!r}, provider {provider.name!r}: no server")
    user = {**copy.deepcopy(provider.exec_config), "interactiveMode": "Never"}
    for ext in cluster.get("extensions") or []:
        if not isinstance(ext, dict):
            continue
        if ext.get("name") == ARGS_EXTENSION and provider.args_policy == "Append":
            more = ext.get("extension")
            if not isinstance(more, list) or not all(isinstance(a, str) for a in more):
                raise AccessError(f"cluster profile {name!r}: {ARGS_EXTENSION} is not a list "
                                  "of strings")
            user["args"] = [*(user.get("args") or []), *more]
        elif ext.get("name") == ENVS_EXTENSION and provider.envs_policy in (
                "AppendIfNotExists", "Replace"):
            user["env"] = _envs(name, ext.get("extension"), user.get("env") or [],
                                provider.envs_policy)
    return {"apiVersion": "v1", "kind": "Config", "current-context": name,
            "clusters": [{"name": name, "cluster": cluster}],
            "users": [{"name": provider.name, "user": {"exec": user}}],
            "contexts": [{"name": name, "context": {"cluster": name, "user": provider.name}}]}


def _envs(name: str, extension: Any, own: list[Any], policy: EnvsPolicy
          ) -> list[dict[str, str]]:
    """The plugin's variables with the profile's: the provider's own win with
    AppendIfNotExists, the profile's with Replace; ordered by name."""
    if not isinstance(extension, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in extension.items()):
        raise AccessError(f"cluster profile {name!r}: {ENVS_EXTENSION} is not a mapping of "
                          "names to values")
    mine = {e["name"]: e["value"] for e in own if isinstance(e, dict)
            and isinstance(e.get("name"), str) and isinstance(e.get("value"), str)}
    merged = {**extension, **mine} if policy == "AppendIfNotExists" else {**mine, **extension}
    return [{"name": k, "value": merged[k]} for k in sorted(merged)]


__all__ = ["AccessError", "ArgsPolicy", "EnvsPolicy", "Provider", "accessor", "kubeconfig",
           "providers"]
