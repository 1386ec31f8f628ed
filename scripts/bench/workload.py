"""A diverse fleet and workload for the scheduler benchmarks: every application differs.

Clusters carry six label keys (location, zone, tier, provider, env, gpu —
gpu absent on some), a few taints, and three metrics: the price of their
location, the heat demand of their zone and their own load (Krake's model:
a metric value is one number; clusters differ by the metrics they list).

Each application writes its own constraints, as teams do: one to three label
constraints over the six keys with ``in`` / ``not in`` / ``!=`` / ``=`` and
random values, one metric threshold (the price of one of its locations under
a random bound); 10 % PickN(3) spread over zones, 5 % required anti-affinity
to their group by zone, 20 % preferred cluster affinity, 10 % tolerations.
With ``workloads``, each also carries a Deployment of its own size and
requests (20 % divided over 2-4 clusters), and clusters report capacity.
Seeded, so runs compare.
"""

from __future__ import annotations

import random
from typing import Any

LOCATIONS = ["DE", "FR", "IT", "NL", "PL", "ES", "SE", "AT", "CZ", "DK"]
ZONES_PER_LOCATION = 5
TIERS = ["1", "2", "3"]
PROVIDERS = ["onprem", "aws", "gcp", "azure"]
ENVS = ["prod", "staging", "dev"]
GPUS = ["none", "a100", "h100"]
GROUPS = 50


def cluster_name(i: int) -> str:
    return f"c{i:05d}"


def cluster_labels(i: int, rng: random.Random) -> dict[str, str]:
    location = LOCATIONS[i % len(LOCATIONS)]
    labels = {"location": location,
              "zone": f"{location}-{rng.randrange(ZONES_PER_LOCATION)}",
              "tier": rng.choice(TIERS), "provider": rng.choice(PROVIDERS),
              "env": rng.choice(ENVS)}
    if rng.random() < 0.7:
        labels["gpu"] = rng.choice(GPUS)
    return labels


def cluster_metrics(name: str, labels: dict[str, str]) -> list[str]:
    return [f"price-{labels['location']}", f"heat-{labels['zone']}", f"load-{name}"]


def cluster_doc(i: int, rng: random.Random) -> tuple[str, dict[str, Any], list[str]]:
    name = cluster_name(i)
    labels = cluster_labels(i, rng)
    metrics = cluster_metrics(name, labels)
    taints = []
    roll = rng.random()
    if roll < 0.03:
        taints.append({"key": "dedicated", "value": "batch", "effect": "NoSchedule"})
    elif roll < 0.08:
        taints.append({"key": "maintenance", "effect": "PreferNoSchedule"})
    doc = {"api": "kubernetes", "kind": "Cluster",
           "metadata": {"name": name, "namespace": "default", "labels": labels},
           "spec": {"kubeconfig": {"apiVersion": "v1", "kind": "Config"},
                    "metrics": [{"name": m, "weight": w}
                                for m, w in zip(metrics, (0.5, 0.3, 0.2), strict=True)],
                    "taints": taints}}
    return name, doc, metrics


def _label_constraint(rng: random.Random) -> str:
    key = rng.choice(["tier", "provider", "env", "gpu", "zone"])
    values = {"tier": TIERS, "provider": PROVIDERS, "env": ENVS, "gpu": GPUS,
              "zone": [f"{loc}-{z}" for loc in LOCATIONS for z in range(ZONES_PER_LOCATION)]}[key]
    form = rng.choice(["in", "not in", "!=", "="] if key != "zone" else ["not in", "!="])
    if form in ("in", "not in"):
        picked = rng.sample(values, rng.randint(1, min(2, len(values))))
        return f"{key} {form} ({', '.join(picked)})"
    return f"{key} {form} {rng.choice(values)}"


def cluster_capacity(rng: random.Random) -> dict[str, Any]:
    """A status capacity: 1-20 nodes of 8-64 CPUs, already 10-90 % requested."""
    nodes = rng.randint(1, 20)
    cpu = nodes * rng.choice([8, 16, 32, 64]) * 1000
    memory = cpu // 1000 * 4 << 30
    used = rng.uniform(0.1, 0.9)
    return {"allocatable": {"cpu": cpu, "memory": memory, "pods": nodes * 110},
            "requested": {"cpu": int(cpu * used), "memory": int(memory * used),
                          "pods": int(nodes * 110 * used)},
            "nodes": nodes}


def workload(name: str, rng: random.Random, *, requests: bool = True) -> dict[str, Any]:
    """A Deployment of 1-20 replicas asking 100 m - 4 CPUs and 128 Mi - 8 Gi each (without
    ``requests``, asking nothing: the same Deployment, the same draws of ``rng``)."""
    asked = {"cpu": f"{rng.choice([100, 250, 500, 1000, 2000, 4000])}m",
             "memory": f"{rng.choice([128, 256, 512, 1024, 4096, 8192])}Mi"}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": rng.randint(1, 20), "selector": {"matchLabels": {"a": name}},
                     "template": {"metadata": {"labels": {"a": name}}, "spec": {"containers": [
                         {"name": "main", "image": f"registry.example/{name}:1",
                          **({"resources": {"requests": asked}} if requests else {})}]}}}}


def app_doc(name: str, rng: random.Random, *, workloads: bool = False,
            requests: bool = True) -> dict[str, Any]:
    locations = rng.sample(LOCATIONS, rng.randint(3, 7))
    labels = [f"location in ({', '.join(locations)})"]
    labels += [_label_constraint(rng) for _ in range(rng.randint(0, 2))]
    spec: dict[str, Any] = {
        "manifest": [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
                      "data": {"x": "y" * 200}}],
        "constraints": {"cluster": {
            "labels": labels,
            "metrics": [f"price-{rng.choice(locations)} < {rng.uniform(5.0, 10.0):.2f}"]}}}
    group = f"g{rng.randrange(GROUPS)}"
    roll = rng.random()
    if roll < 0.10:
        spec["placement"] = {"policy": "PickN", "numberOfClusters": 3,
                             "topologySpreadConstraints": [{
                                 "maxSkew": 1, "topologyKey": "zone",
                                 "whenUnsatisfiable": "DoNotSchedule"}]}
    elif roll < 0.15:
        spec["affinity"] = {"workloadAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [{
                "labelSelector": {"matchLabels": {"group": group}}, "topologyKey": "zone"}]}}
    if rng.random() < 0.20:
        spec.setdefault("affinity", {})["clusterAffinity"] = {
            "preferredDuringSchedulingIgnoredDuringExecution": [{
                "weight": rng.choice([1, 10, 50]),
                "preference": {"matchExpressions": [{
                    "key": "tier", "operator": "In", "values": [rng.choice(TIERS)]}]}}]}
    if rng.random() < 0.10:
        spec["tolerations"] = [{"key": "dedicated", "operator": "Exists"}]
    if workloads:
        spec["manifest"].append(workload(name, rng, requests=requests))
        if rng.random() < 0.20:  # divided over a few clusters, by one of the three rules
            spec["placement"] = {"policy": "PickN", "numberOfClusters": rng.randint(2, 4),
                                 "replicaScheduling": {"type": "Divided", "division": rng.choice(
                                     ["Weighted", "Capacity", "Aggregated"])}}
    return {"api": "kubernetes", "kind": "Application",
            "metadata": {"name": name, "namespace": "default", "generation": 1,
                         "labels": {"group": group}},
            "spec": spec}
