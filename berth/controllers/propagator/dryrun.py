"""Manifests checked by a cluster before they are stored (``berth apply``).

A typo inside a manifest (``spec.replicsa``) used to be accepted by ``apply``
and fail seconds later on the cluster. Here each object of an application's
manifest is applied with server-side apply's dry run (``dryRun=All``,
``fieldValidation=Strict``) to a cluster the application could run on — the
first ONLINE cluster of its berth namespace, by name — so the cluster's own
schemas judge it: the Kubernetes release it runs, and its CRDs (a custom
resource is judged by its CRD's schema where that cluster has the CRD, and
left to the clusters that have it otherwise). Why a cluster's, not a schema
package: the schemas that matter are the ones the clusters serve (their
release, their CRDs), and a package would be one more thing to keep in step.
Nothing is written on the cluster; an object whose Kubernetes namespace the
cluster lacks is judged in ``default`` (its namespace would be created).

What cannot be checked (no ONLINE cluster in the namespace, one that does not
answer) is said in a note, and ``apply`` goes on: the propagator reports a
rejected manifest as before.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from berth.controllers.propagator.kube import Connection, NotServed, Rejected, Unavailable
from berth.store import Store, Unauthorized, decode, keys
from berth.store.credentials import STORED, Credentials, merge_users
from berth.store.documents import Cluster, ClusterStatus, Reachability


@dataclass(slots=True)
class Checked:
    """What the dry runs found: errors name the document and object."""

    errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _kubeconfig(store: Store, namespace: str) -> tuple[str, dict[str, Any]] | None:
    """(name, kubeconfig) of the first ONLINE cluster of ``namespace`` with one."""
    kvs, _ = store.list_prefix(keys.resource_prefix("Cluster", namespace))
    for kv in sorted(kvs, key=lambda kv: kv.key):
        try:
            cluster = decode(kv.value, Cluster, kv.key)
        except Exception:
            continue  # a bad key is the informers' to report
        name = cluster.metadata.name
        status = store.get(keys.status_key("Cluster", namespace, name))
        try:
            online = status is not None and decode(
                status.value, ClusterStatus, status.key).status.state == Reachability.ONLINE
        except Exception:
            online = False
        if not online or not cluster.spec.kubeconfig:
            continue
        try:
            secret = store.get(keys.secrets_key("Cluster", name, namespace))
        except Unauthorized:  # a team's user (docs/teams.md): the credentials are not its
            raise Unchecked(f"the credentials of cluster {namespace}/{name} are not "
                            "readable with this etcd user") from None
        creds: Credentials | None = decode(secret.value, STORED, secret.key) if secret else None
        users = creds.users if creds is not None else []
        return name, merge_users(cluster.spec.kubeconfig, users)
    return None


def check(store: Store, applications: list[tuple[str, str, list[Any]]], *,
          timeout: float = 5.0) -> Checked:
    """Dry-run every object of ``applications`` (``(where, namespace, manifest)``); a
    cluster that does not answer is asked nothing more."""
    out = Checked()
    judges: dict[str, _Judge | str] = {}
    try:
        for where, namespace, manifest in applications:
            if namespace not in judges:
                judges[namespace] = _judge(store, namespace, timeout, out)
            judge = judges[namespace]
            if isinstance(judge, str):
                out.notes.append(f"{where}: manifest not checked: {judge}")
                continue
            for i, obj in enumerate(manifest):
                if judge.down:
                    out.notes.append(f"{where}: spec.manifest[{i}]: not checked: "
                                     f"{judge.cluster} does not answer")
                else:
                    judge.dry_run(f"{where}: spec.manifest[{i}]", obj, out)
    finally:
        for judge in judges.values():
            if not isinstance(judge, str):
                judge.conn.close()
    return out


class Unchecked(Exception):
    """Why a namespace's manifests are not dry-run (the message says it)."""


def _judge(store: Store, namespace: str, timeout: float, out: Checked) -> _Judge | str:
    """The cluster ``namespace``'s manifests are dry-run on, or why there is none."""
    try:
        found = _kubeconfig(store, namespace)
    except Unchecked as exc:
        return str(exc)
    if found is None:
        return f"no ONLINE cluster in namespace {namespace} to check it with"
    try:
        return _Judge(found[0], Connection(found[1], timeout))
    except Exception as exc:  # a kubeconfig the propagator could not use either
        out.notes.append(f"namespace {namespace}: cluster {found[0]}: {exc}")
        return f"cluster {found[0]}'s kubeconfig is unusable"


@dataclass(slots=True)
class _Judge:
    """The cluster a namespace's manifests are dry-run on."""

    cluster: str
    conn: Connection
    down: bool = False

    def dry_run(self, where: str, obj: Any, out: Checked) -> None:
        if not isinstance(obj, dict) or not isinstance(obj.get("metadata"), dict):
            return  # the document's own validation has said so
        what = f"{obj.get('kind')} {obj['metadata'].get('name')}"
        try:
            kind, ref = self.conn.locate(obj)
            self.conn.apply(kind, ref, obj, dry_run=True)
        except NotServed:
            out.notes.append(f"{where} ({what}): not checked: {self.cluster} serves no "
                             "such kind (left to the clusters that do)")
        except Rejected as exc:
            out.errors.append(f"{where} ({what}): cluster {self.cluster} refuses it: {exc}")
        except Unavailable as exc:
            self.down = True
            out.notes.append(f"{where} ({what}): not checked: {self.cluster}: {exc}")
        except (KeyError, TypeError, ValueError) as exc:
            out.errors.append(f"{where} ({what}): {exc}")
