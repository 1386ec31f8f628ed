"""Checks of a Staged rollout's stages against the clusters there are, at apply.

A cluster chosen by two stages of one application is refused, naming both:
which stage it rolls in would otherwise depend on their order, silently. A
stage with neither names nor labels (``clusters: {}``) takes every target no
stage before it chose, so it doubles none. A stage that chooses no cluster is
said (clusters may join later), not refused. The propagator applies the same
rule at run time: a cluster whose labels change into two stages rolls in the
first (docs/rollouts.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from berth.bootstrap.load import Loaded
from berth.store import Store, StoreError, Unauthorized, keys
from berth.store.codec import decode
from berth.store.documents import Application, Cluster
from berth.store.documents.rollouts import RolloutStrategy


def clusters(store: Store, loaded: Sequence[Loaded], namespaces: Iterable[str] = ()
             ) -> dict[str, dict[str, str]]:
    """Every cluster's labels by "<namespace>/<name>": stored, then as the input has it.
    A user who may not read every cluster (a team: docs/teams.md) gets those of
    ``namespaces``."""
    out: dict[str, dict[str, str]] = {}
    try:
        kvs = store.list_prefix(keys.resource_prefix("Cluster"))[0]
    except Unauthorized:
        kvs = [kv for ns in sorted(set(namespaces))
               for kv in store.list_prefix(keys.resource_prefix("Cluster", ns))[0]]
    for kv in kvs:
        try:
            c = decode(kv.value, Cluster, kv.key)
        except StoreError:
            continue
        out[f"{c.metadata.namespace}/{c.metadata.name}"] = c.metadata.labels
    for item in loaded:
        if isinstance(item.doc, Cluster):
            meta = item.doc.metadata
            out[f"{meta.namespace}/{meta.name}"] = meta.labels
    return out


def problems(store: Store, loaded: Sequence[Loaded]) -> tuple[list[str], list[str]]:
    """(errors, warnings) of the Staged applications in ``loaded``."""
    staged = [i for i in loaded if isinstance(i.doc, Application) and i.doc.spec.rollout
              and i.doc.spec.rollout.strategy == RolloutStrategy.STAGED]
    if not staged:
        return [], []
    known = clusters(store, loaded, {i.doc.metadata.namespace or "" for i in staged})
    errors: list[str] = []
    warnings: list[str] = []
    for item in staged:
        assert isinstance(item.doc, Application) and item.doc.spec.rollout is not None
        where = f"{item.where}: spec.rollout.stages"
        first: dict[str, str] = {}
        for stage in item.doc.spec.rollout.stages:
            c = stage.clusters
            rest = not (c.names or c.match_labels or c.match_expressions)
            chosen = [cid for cid, labels in sorted(known.items())
                      if c.selects(cid, labels) and not (rest and cid in first)]
            if not chosen:
                warnings.append(f"{where}: stage {stage.name!r} chooses no cluster now "
                                "(skipped until one matches)")
            for cid in chosen:
                if cid in first:
                    errors.append(f"{where}: cluster {cid} is in stage {first[cid]!r} and in "
                                  f"stage {stage.name!r}: a cluster rolls in one stage")
                else:
                    first[cid] = stage.name
    return errors, warnings
