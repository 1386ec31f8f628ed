"""Workload objects kept packed come back byte for byte, and take a fraction of the room."""

from __future__ import annotations

import json
import random

import pytest

from berth.controllers.scheduler.packed import pack, unpack


@pytest.mark.parametrize("seed", range(20))
def test_anything_packed_comes_back_as_it_was(seed: int) -> None:
    rng = random.Random(seed)
    raw = bytes(rng.randrange(256) for _ in range(rng.choice([0, 1, 7, 300, 5000])))
    assert unpack(pack(raw)) == raw


def test_a_deployment_packs_into_a_quarter_or_less() -> None:
    deployment = json.dumps({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "shop-frontend", "labels": {"app": "shop-frontend"}},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "shop-frontend"}},
                 "template": {"metadata": {"labels": {"app": "shop-frontend"}},
                              "spec": {"containers": [{
                                  "name": "main", "image": "registry.example/shop:2.4",
                                  "ports": [{"containerPort": 8080}],
                                  "resources": {"requests": {"cpu": "250m",
                                                             "memory": "256Mi"}}}]}}},
    }, separators=(",", ":")).encode()
    packed = pack(deployment)
    assert unpack(packed) == deployment
    assert len(packed) * 4 <= len(deployment), (len(packed), len(deployment))
