"""A stand-in for Argo CD's ApplicationSet and application controllers, for the test of
moves Argo CD deploys (Argo CD itself cannot be built here: docs/argocd.md).

What it does, as argo-cd v3.6's sources say the real ones do:

* **ApplicationSet controller** (``applicationset/controllers/applicationset_controller.go``):
  on every pass it runs the ``clusterDecisionResource`` generator
  (:func:`berth_testkit.argocd.generate_params`), renders the template for each
  parameter set (``{{key}}``), creates the Applications that are new, owned by the
  ApplicationSet (``ownerReferences``, ``controller: true``), and deletes those the
  generator no longer makes (the default policy, ``sync``: no ``preserveResourcesOnDeletion``).
* **Application controller**: an Application carries the
  ``resources-finalizer.argocd.argoproj.io`` finalizer, so deleting it deletes the
  resources it deployed first; a new Application is synced (its manifest applied on
  its destination) and its status says ``sync.status: Synced`` at the revision, and
  ``health.status`` as Argo CD judges a Deployment (``gitops-engine``
  ``pkg/health/health_deployment.go``): Progressing until the controller observed
  the generation and every replica is updated and available, Degraded when its
  progress deadline passed, else Healthy.

It keeps, per Application, when it was first Healthy and when it was deleted, so a
test can check the order of a move.
"""

from __future__ import annotations

import re
import threading
import time
from typing import Any

from berth_testkit.argocd import GeneratorError, generate_params
from berth_testkit.servers.etcd import ServerUnavailable
from berth_testkit.servers.kube import KubeCluster

ARGO = "/apis/argoproj.io/v1alpha1/namespaces/{ns}/{plural}"
FINALIZER = "resources-finalizer.argocd.argoproj.io"
REVISION = "53e28ff20cc530b9ada2173fbbd64d48338583ba"  # the one a repository's HEAD gave


def crds() -> list[dict[str, Any]]:
    """Argo CD's two kinds, their schemas left open (the stand-in's own, not Argo CD's
    files: the fields it reads are Argo CD's)."""
    def crd(kind: str, plural: str) -> dict[str, Any]:
        return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                "metadata": {"name": f"{plural}.argoproj.io"},
                "spec": {"group": "argoproj.io", "scope": "Namespaced",
                         "names": {"kind": kind, "plural": plural, "singular": kind.lower(),
                                   "listKind": f"{kind}List"},
                         "versions": [{"name": "v1alpha1", "served": True, "storage": True,
                                       "schema": {"openAPIV3Schema": {
                                           "type": "object",
                                           "x-kubernetes-preserve-unknown-fields": True}}}]}}
    return [crd("Application", "applications"), crd("ApplicationSet", "applicationsets")]


def render(template: Any, params: dict[str, Any]) -> Any:
    """An ApplicationSet template with ``{{key}}`` replaced (Argo CD's fasttemplate)."""
    if isinstance(template, str):
        return re.sub(r"\{\{\s*([\w.]+)\s*\}\}",
                      lambda m: str(params.get(m.group(1), m.group(0))), template)
    if isinstance(template, dict):
        return {k: render(v, params) for k, v in template.items()}
    if isinstance(template, list):
        return [render(v, params) for v in template]
    return template


def deployment_health(d: dict[str, Any] | None) -> tuple[str, str]:
    """Argo CD's health of a Deployment (gitops-engine's ``getAppsv1DeploymentHealth``)."""
    if d is None:
        return "Missing", ""
    spec, status = d.get("spec") or {}, d.get("status") or {}
    if (d.get("metadata") or {}).get("generation", 0) > status.get("observedGeneration", 0):
        return "Progressing", "Waiting for rollout to finish: observed deployment generation " \
            "less than desired generation"
    for c in status.get("conditions") or []:
        if c.get("type") == "Progressing" and c.get("reason") == "ProgressDeadlineExceeded":
            return "Degraded", f"Deployment {d['metadata']['name']!r} exceeded its progress " \
                "deadline"
    want = spec.get("replicas", 1)
    updated = status.get("updatedReplicas", 0)
    if updated < want:
        return "Progressing", f"Waiting for rollout to finish: {updated} out of {want} new " \
            "replicas have been updated..."
    if status.get("replicas", 0) > updated:
        return "Progressing", "Waiting for rollout to finish: old replicas are pending " \
            "termination..."
    if status.get("availableReplicas", 0) < updated:
        return "Progressing", f"Waiting for rollout to finish: {status.get('availableReplicas', 0)}" \
            f" of {updated} updated replicas are available..."
    return "Healthy", ""


class ApplicationSets:
    """The stand-in, over Argo CD's cluster ``hub`` (its namespace ``namespace``) and the
    member clusters by Argo CD's cluster name; one ApplicationSet whose template deploys
    ``manifest`` (one Deployment, in ``default``) on each cluster it generates."""

    def __init__(self, hub: KubeCluster, namespace: str, appset: dict[str, Any],
                 members: dict[str, KubeCluster], manifest: dict[str, Any],
                 interval: float = 0.2) -> None:
        self.hub, self.namespace, self.appset = hub, namespace, appset
        self.members, self.manifest, self.interval = members, manifest, interval
        self.healthy_at: dict[str, float] = {}  # Application → when first Healthy
        self.deleted_at: dict[str, float] = {}  # Application → when its workload went
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="appsets")

    def install(self) -> None:
        for crd in crds():
            self.hub.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                             crd, ok=(200, 201, 409))
        deadline = time.monotonic() + 30
        while True:  # served once established
            try:
                for plural in ("applicationsets", "applications"):
                    self.hub.request("GET", self._path(plural))
                break
            except (OSError, ServerUnavailable):  # (429 while the CRD is established)
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        name = self.appset["metadata"]["name"]
        for app in self.hub.request("GET", self._path("applications"))["items"]:
            self._forget(app["metadata"]["name"])  # an earlier test's: gone, unfinalized
        self.hub.request("DELETE", self._path("applicationsets", name), ok=(200, 202, 404))
        self.appset = self.hub.request("POST", self._path("applicationsets"), self.appset)

    def __enter__(self) -> ApplicationSets:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _path(self, plural: str, name: str = "") -> str:
        return ARGO.format(ns=self.namespace, plural=plural) + (f"/{name}" if name else "")

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.step()
            except (OSError, ServerUnavailable, GeneratorError) as exc:
                self.errors.append(str(exc))

    def step(self) -> None:
        meta = self.appset["metadata"]
        generator = self.appset["spec"]["generators"][0]["clusterDecisionResource"]
        params = generate_params(lambda m, p: self.hub.request(m, p), self.namespace,
                                 generator) or []
        wanted = {}
        for p in params:
            app = render(self.appset["spec"]["template"], p)
            wanted[app["metadata"]["name"]] = app
        have = {a["metadata"]["name"]: a
                for a in self.hub.request("GET", self._path("applications"))["items"]
                if any(r.get("uid") == meta["uid"]
                       for r in a["metadata"].get("ownerReferences") or [])}
        for name, app in wanted.items():
            if name not in have:
                app = {"apiVersion": "argoproj.io/v1alpha1", "kind": "Application", **app}
                app["metadata"] = {**app["metadata"], "namespace": self.namespace,
                                   "finalizers": [FINALIZER], "ownerReferences": [{
                                       "apiVersion": "argoproj.io/v1alpha1",
                                       "kind": "ApplicationSet", "name": meta["name"],
                                       "uid": meta["uid"], "controller": True}]}
                have[name] = self.hub.request("POST", self._path("applications"), app)
        for name, app in have.items():
            if name not in wanted:
                self._delete(name, app)
            else:
                self._sync(name, app)

    def _member(self, app: dict[str, Any]) -> KubeCluster:
        return self.members[app["metadata"]["labels"]["berth.io/cluster"]]

    def _workload(self) -> str:
        name = self.manifest["metadata"]["name"]
        return f"/apis/apps/v1/namespaces/default/deployments/{name}"

    def _sync(self, name: str, app: dict[str, Any]) -> None:
        """Apply the manifest on the Application's cluster; its status as Argo CD says."""
        member = self._member(app)
        try:
            found: dict[str, Any] | None = member.request("GET", self._workload())
        except ServerUnavailable as exc:
            if "404" not in str(exc):
                raise
            member.request("POST", "/apis/apps/v1/namespaces/default/deployments",
                           self.manifest)
            found = None
        health, message = deployment_health(found)
        status = {"sync": {"status": "Synced", "revision": REVISION},
                  "health": {"status": health, **({"message": message} if message else {})}}
        if app.get("status") != status:
            self.hub.request("PATCH", self._path("applications", name), {"status": status},
                             content="merge")
        if health == "Healthy":
            self.healthy_at.setdefault(name, time.monotonic())

    def _delete(self, name: str, app: dict[str, Any]) -> None:
        """The Application goes; its finalizer deletes what it deployed first."""
        self._member(app).request("DELETE", self._workload(), ok=(200, 202, 404))
        self.deleted_at.setdefault(name, time.monotonic())
        self._forget(name)

    def _forget(self, name: str) -> None:
        """Delete the Application, its finalizer's work done."""
        self.hub.request("DELETE", self._path("applications", name), ok=(200, 202, 404))
        self.hub.request("PATCH", self._path("applications", name),
                         {"metadata": {"finalizers": None}}, content="merge", ok=(200, 404))
