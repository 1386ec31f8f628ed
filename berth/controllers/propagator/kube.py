"""A cluster's Kubernetes API, reached with the kubeconfig stored in the Cluster.

lightkube reads the kubeconfig: the cluster's CA, the user's token, token
file, client certificate or exec plugin (``trust_env`` off). berth speaks the
REST API itself — discovery, create, server-side apply, get and delete through its
own HTTP/1.1 client (``berth/kubehttp.py``), watches through httpx — and decodes
only the few fields it reads with its own small msgspec types. It does not
use lightkube's typed models: decoding them for the first time from two
threads at once crashes the process
(msgspec 0.22 with lightkube 1.0.1; docs/architecture.md "Decoding from
threads"), and a kind-agnostic path needs discovery anyway. One mechanism
serves every kind: the group/version's resource list (``/api/v1``,
``/apis/<group>/<version>``) gives the plural and the scope, cached per
connection and refreshed when a kind is missing (a CRD applied a moment ago).

One :class:`Connection` per cluster serves the observer, the applier and the
drift watches; :meth:`Connection.acting_as` gives the same connection making its
calls as a namespace's identity (Kubernetes impersonation, docs/teams.md), whose
refusals by the cluster's RBAC are :class:`Forbidden`. Error texts that reach logs
or status keys come from :func:`safe` or the API server's own message: never a
kubeconfig or a token.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec
from lightkube import KubeConfig
from lightkube.config import models as _kubeconfig_models

from berth.controllers.propagator import managed
from berth.http import Answer
from berth.kubeexec import plugin_of
from berth.kubehttp import CredentialError, KubeHttp
from berth.store.codec import decoder, typed
from berth.store.documents import Endpoint, KubeObjectRef, Reachability
from berth.store.documents.tenancy import Identity

log = logging.getLogger(__name__)

# lightkube reads a kubeconfig with msgspec.convert into its own types: their first
# conversion from two probe threads at once crashes the process (berth.store.codec),
# so msgspec builds what it knows of them here, once, under the codec's lock.
for _type in (_kubeconfig_models.Cluster, _kubeconfig_models.Context,
              _kubeconfig_models.User):
    decoder(_type)

FIELD_MANAGER = "berth"
MANAGED_BY = "app.kubernetes.io/managed-by"  # label on every object berth applies
OWNER = "berth.dev/application"  # annotation: "<namespace>/<name>" of the application
GENERATION = "berth.dev/generation"  # annotation: the application's generation applied
DECISION = "berth.dev/decision"  # annotation: the scheduler's decision that placed it
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
CLAIM_TRIES = 5  # claims of a creation's fields that others' writes may overtake (managed.py)
# The resourceVersion a creation names (no object that exists has it), and what an API
# server says that takes none on creation (Connection.create).
NO_VERSION = "1"
VERSION_ON_CREATE = "resourceVersion should not be set on objects to be created"
# A list of the objects' metadata alone (names are all a probe reads of the CRDs: a
# CRD's schema can weigh hundreds of KiB), or the whole list from a server that cannot.
METADATA_ONLY = ("application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io,"
                 "application/json")

# The API server refuses an invalid object with 422 (or 400); a value of the
# wrong type fails while building the typed patch, reported as a 500 with this
# text. Retrying either cannot help until the manifest changes.
_INVALID_500 = "failed to create typed patch object"


def safe(exc: BaseException) -> str:
    """An error message fit for a log or a status key: never credentials."""
    text = str(exc).split("\n", 1)[0][:300]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class Rejected(Exception):
    """The cluster refused the manifest as invalid: retrying will not help."""


class Unavailable(Exception):
    """The cluster could not be reached or failed; retrying later may help."""


class NotServed(Unavailable):
    """The cluster serves no such apiVersion or kind (yet: its CRD may come)."""


class Exists(Unavailable):
    """A creation met a namesake: someone made the object since berth read it as
    absent. Nothing was written."""


class Forbidden(Unavailable):
    """The cluster's RBAC refused the call (HTTP 403) to whom it was made as: retried
    later, as an administrator of the cluster may grant it."""


class NoVersionOnCreate(Unavailable):
    """The API server takes no resourceVersion on a creation (kubernetes#106745):
    nothing was written; create with a POST instead."""


@dataclass(frozen=True, slots=True)
class Probe:
    state: Reachability | None  # None: no verdict yet (failing within the grace)
    reason: str = ""
    custom_resources: tuple[str, ...] = ()
    version: str = ""  # the API server's gitVersion ("": not known)
    endpoint: Endpoint | None = None  # where it is, as the kubeconfig says (no credential)


@dataclass(frozen=True, slots=True)
class Kind:
    """Where a kind lives in the REST API."""

    base: str  # /api/v1 or /apis/<group>/<version>
    plural: str
    namespaced: bool

    def path(self, name: str | None = None, namespace: str | None = None) -> str:
        where = f"/namespaces/{namespace}" if self.namespaced and namespace else ""
        return f"{self.base}{where}/{self.plural}" + (f"/{name}" if name else "")


# -- the few response fields berth reads ----------------------------------------


class _Discovered(msgspec.Struct):
    name: str
    kind: str
    namespaced: bool = False


class _ResourceList(msgspec.Struct):
    resources: list[_Discovered] = []


class _Version(msgspec.Struct):
    gitVersion: str = ""  # the API's own name


class _Status(msgspec.Struct):
    message: str = ""
    reason: str = ""


class ObjectMeta(msgspec.Struct):
    name: str = ""
    namespace: str | None = None
    uid: str = ""
    resourceVersion: str = ""
    generation: int = 0
    annotations: dict[str, str] = {}


class KubeObject(msgspec.Struct):
    """An object as the API server returned it: its identity and versions decoded,
    its ``spec`` and ``status`` left as bytes until someone judges them."""

    apiVersion: str = ""
    kind: str = ""
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: msgspec.Raw = msgspec.Raw(b"{}")
    status: msgspec.Raw = msgspec.Raw(b"{}")


class WatchEvent(msgspec.Struct):
    type: str
    object: KubeObject


class _Named(msgspec.Struct):
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)


class _NamedList(msgspec.Struct):
    # null, not [], in a PartialObjectMetadataList with nothing in it (a cluster with no
    # CRD: the probe said "custom resources unknown" there)
    items: list[_Named] | None = None


def _refusal(resp: Answer, what: str) -> Unavailable:
    """The error for a call about ``what`` the cluster did not answer as hoped."""
    if resp.status == 403:
        return Forbidden(f"{what}: {_error(resp)}")
    return Unavailable(f"{what}: {_error(resp)}")


def _error(resp: Answer) -> str:
    try:
        status = typed(resp.body, _Status)
        text = status.message or status.reason
    except msgspec.DecodeError:
        text = resp.body[:200].decode("utf-8", "replace")
    return f"HTTP {resp.status}: {text}"[:500]


class Connection:
    """A cluster's API, from its kubeconfig."""

    def __init__(self, kubeconfig: dict[str, Any], timeout: float) -> None:
        config = KubeConfig.from_dict(kubeconfig)
        single = config.get()
        if single is None:
            raise ValueError("the kubeconfig names no current context")
        self.namespace: str = single.namespace or "default"
        self.config, self.timeout = single, timeout  # watches.py makes its client from them
        # which API server, reached as which user: Clusters that are namespaces of one
        # API server, with the same credentials, see the same Nodes and Pods (a digest:
        # the credentials are kept nowhere else)
        self.server = "server " + hashlib.sha256(
            repr((single.cluster, single.user, single.fname)).encode()).hexdigest()[:32]
        # the user's exec plugin, berth's own (one per connection: its token is shared by
        # the calls and the watches, and it runs once for all of them)
        self.exec = plugin_of(kubeconfig, single.context_name)
        self.http = KubeHttp(single, timeout, self.exec)
        self.endpoint = Endpoint(self.http.server, self.http.ca)
        self._kinds: dict[str, dict[str, Kind]] = {}  # apiVersion → kind name → Kind
        self._server_version = ""
        self._lock = threading.Lock()
        self.closed = False
        self.identity: Identity | None = None  # whom its calls are made as (None: the user)
        self._acting: tuple[tuple[str, str], ...] = ()  # the headers that say so
        self._as: dict[tuple[tuple[str, str], ...], Connection] = {}  # by those headers

    def acting_as(self, identity: Identity | None) -> Connection:
        """This connection making its calls as ``identity`` (None: as its own user): one
        per identity, sharing this one's sockets, credentials and discovery."""
        if identity is None:
            return self
        acting = identity.headers()
        with self._lock:
            found = self._as.get(acting)
            if found is None:
                found = copy.copy(self)  # shares the http client, the kinds, the lock
                found.identity, found._acting, found._as = identity, acting, {}
                self._as[acting] = found
        return found

    def _request(self, method: str, path: str, *, params: dict[str, str] | None = None,
                 body: bytes = b"", content_type: str = "") -> Answer:
        try:
            return self.http.request(method, path, params=params, body=body,
                                     content_type=content_type, acting=self._acting)
        except Exception as exc:
            raise Unavailable(f"{method} {path}: {safe(exc)}") from exc

    # -- observing -------------------------------------------------------------

    def probe(self, timeout: float) -> Probe:
        """What the API server says of itself, and where it is (as the kubeconfig says)."""
        return dataclasses.replace(self._probe(timeout), endpoint=self.endpoint)

    def _probe(self, timeout: float) -> Probe:
        try:
            resp = self.http.request("GET", "/readyz", timeout=timeout)
            if resp.status == 404:  # older API servers: /version answers if it is up
                resp = self.http.request("GET", "/version", timeout=timeout)
        except CredentialError as exc:  # reachable perhaps, but not with these credentials
            return Probe(Reachability.UNHEALTHY, f"credentials: {str(exc)[:300]}")
        except Exception as exc:
            return Probe(Reachability.OFFLINE, f"unreachable: {safe(exc)}")
        if resp.status in (401, 403):
            return Probe(Reachability.UNHEALTHY, f"credentials refused (HTTP {resp.status})")
        if resp.status != 200:
            return Probe(Reachability.UNHEALTHY, f"not ready (HTTP {resp.status})")
        version = self._version(timeout)
        try:
            resp = self.http.request("GET", CRDS, timeout=timeout, accept=METADATA_ONLY)
            if resp.status != 200:
                return Probe(Reachability.ONLINE, f"custom resources unknown: {_error(resp)}",
                             version=version)
            crds = typed(resp.body, _NamedList).items or []
        except Exception as exc:
            return Probe(Reachability.ONLINE, f"custom resources unknown: {safe(exc)}",
                         version=version)
        return Probe(Reachability.ONLINE, "", tuple(sorted(c.metadata.name for c in crds
                                                           if c.metadata.name)), version)

    def _version(self, timeout: float) -> str:
        """The API server's ``gitVersion``, asked once per connection ("" while it does
        not say: asked again at the next probe)."""
        if self._server_version:
            return self._server_version
        try:
            resp = self.http.request("GET", "/version", timeout=timeout)
            if resp.status == 200:
                self._server_version = str(typed(resp.body, _Version).gitVersion)[:64]
        except Exception as exc:
            log.debug("the API server's version: %s", safe(exc))
        return self._server_version

    # -- kinds -----------------------------------------------------------------

    def kind(self, api_version: str, kind: str) -> Kind:
        """Where ``kind`` of ``api_version`` lives; NotServed if the cluster lacks it."""
        with self._lock:
            found = self._kinds.get(api_version, {}).get(kind)
        if found is not None:
            return found
        group, _, version = api_version.rpartition("/")
        base = f"/apis/{api_version}" if group else f"/api/{version}"
        resp = self._request("GET", base)
        if resp.status == 404:
            raise NotServed(f"the cluster serves no {api_version}")
        if resp.status != 200:
            raise _refusal(resp, f"discovery of {api_version}")
        try:
            listed = typed(resp.body, _ResourceList).resources
        except msgspec.DecodeError as exc:
            raise Unavailable(f"discovery of {api_version}: {exc}") from exc
        kinds = {r.kind: Kind(base, r.name, r.namespaced) for r in listed if "/" not in r.name}
        with self._lock:
            self._kinds[api_version] = kinds
        if kind not in kinds:
            raise NotServed(f"the cluster serves no kind {kind} in {api_version}")
        return kinds[kind]

    def locate(self, body: dict[str, Any]) -> tuple[Kind, KubeObjectRef]:
        """The kind of a manifest object and where the object lives on this cluster."""
        kind = self.kind(body["apiVersion"], body["kind"])
        meta = body.get("metadata") or {}
        namespace = (meta.get("namespace") or self.namespace) if kind.namespaced else None
        return kind, KubeObjectRef(body["apiVersion"], body["kind"], meta["name"], namespace)

    # -- acting ----------------------------------------------------------------

    def apply(self, kind: Kind, ref: KubeObjectRef, body: dict[str, Any], *,
              dry_run: bool = False) -> KubeObject:
        """Server-side apply one located object, forced (berth's fields win over others'
        edits of them); the object as stored. A namespace it lives in that the
        cluster does not have is created first (as Karmada does; berth never deletes
        one: other things may live there). ``dry_run``: judged with strict field
        validation and written nowhere (a missing namespace is not created: the
        object is judged in ``default``). An object whose creation berth has not
        claimed yet (:mod:`managed`) is claimed and applied again."""
        params = {"fieldManager": FIELD_MANAGER, "force": "true"}
        if dry_run:
            params |= {"dryRun": "All", "fieldValidation": "Strict"}
        send = self._sender("PATCH", kind, ref, body, params, "application/apply-patch+yaml")
        resp = self._sent(send, ref, dry_run=dry_run)
        if not dry_run and managed.claim(resp.body, FIELD_MANAGER) is not None:
            log.info("%s: claiming the fields of berth's creation of it (made, unclaimed, "
                     "by a replica that stopped between the two)", ref)
            self._claim(kind, ref, resp.body)
            resp = self._sent(send, ref, dry_run=False)
        return self._stored(ref, resp.body)

    def create(self, kind: Kind, ref: KubeObjectRef, body: dict[str, Any]) -> KubeObject:
        """Make a located object berth read as absent; the object as stored. Exists if
        a namesake is there now (someone made it since the read: nothing of theirs is
        touched — a server-side apply without a precondition would merge into it
        wherever their fields do not clash with berth's).

        One call: a server-side apply whose body names ``resourceVersion``
        :data:`NO_VERSION`. The API server creates an absent object without
        looking at it, owned by berth's apply as any apply's fields are, and
        refuses (409) the apply on any object that exists, none of which has that
        version (etcd's first revision is the API server's own first write). A
        server that refuses a resourceVersion on creation (some releases, for some
        kinds: kubernetes#106745) gets :meth:`create_and_claim`."""
        meta = {**(body.get("metadata") or {}), "resourceVersion": NO_VERSION}
        send = self._sender("PATCH", kind, ref, {**body, "metadata": meta},
                            {"fieldManager": FIELD_MANAGER}, "application/apply-patch+yaml")
        try:
            resp = self._sent(send, ref, dry_run=False)
        except NoVersionOnCreate:
            log.info("%s: the API server takes no resourceVersion on creation: created, "
                     "then claimed", ref)
            return self.create_and_claim(kind, ref, body)
        return self._stored(ref, resp.body)

    def create_and_claim(self, kind: Kind, ref: KubeObjectRef, body: dict[str, Any]
                         ) -> KubeObject:
        """:meth:`create` in two calls: a POST (refused if a namesake exists: Exists),
        then its fields claimed as berth's apply (:mod:`managed`; a creation's are an
        Update's, which a later apply could not drop)."""
        send = self._sender("POST", kind, ref, body, {"fieldManager": FIELD_MANAGER},
                            "application/json")
        resp = self._sent(send, ref, dry_run=False)
        return self._claim(kind, ref, resp.body)

    def _sender(self, method: str, kind: Kind, ref: KubeObjectRef, body: dict[str, Any],
                params: dict[str, str], content_type: str) -> Callable[[str | None], Answer]:
        meta = {k: v for k, v in (body.get("metadata") or {}).items() if k != "namespace"}

        def send(namespace: str | None) -> Answer:
            if namespace is not None:
                meta["namespace"] = namespace
            return self._request(
                method, kind.path(ref.name if method != "POST" else None, namespace),
                params=params, content_type=content_type,
                body=msgspec.json.encode({**body, "metadata": meta}))  # JSON is YAML
        return send

    def _sent(self, send: Callable[[str | None], Answer], ref: KubeObjectRef, *,
              dry_run: bool) -> Answer:
        """The answer to a write of ``ref`` (in a namespace made first if the cluster
        lacks it); Exists, Rejected or Unavailable for a refusal."""
        resp = send(ref.namespace)
        if (resp.status == 404 and ref.namespace is not None
                and f'namespaces "{ref.namespace}" not found' in _error(resp)):
            if not dry_run:
                self._create_namespace(ref.namespace)
            resp = send("default" if dry_run else ref.namespace)
        if resp.status in (200, 201):
            return resp
        text = _error(resp)
        if resp.status == 409:  # a creation's namesake (AlreadyExists, or the version)
            raise Exists(f"{ref}: {text}")
        if resp.status in (400, 422) or (
                resp.status == 500 and _INVALID_500 in text):
            raise Rejected(f"{ref}: {text}")
        if resp.status == 500 and VERSION_ON_CREATE in text:
            raise NoVersionOnCreate(f"{ref}: {text}")
        raise _refusal(resp, str(ref))  # 404: e.g. its namespace does not exist yet

    def _claim(self, kind: Kind, ref: KubeObjectRef, raw: bytes) -> KubeObject:
        """``raw`` (the object as a write answered it) with berth's creation claimed as
        an apply (:func:`managed.claim`), read again and claimed anew while others'
        writes overtake the claim (a controller's status, say)."""
        path = kind.path(ref.name, ref.namespace)
        for _ in range(CLAIM_TRIES):
            patch = managed.claim(raw, FIELD_MANAGER)
            if patch is None:
                break
            resp = self._request("PATCH", path, body=patch,
                                 content_type="application/json-patch+json")
            if resp.status not in (200, 409, 422):  # 409, 422: its resourceVersion moved
                raise _refusal(resp, f"{ref}: claiming berth's fields")
            if resp.status != 200:
                resp = self._request("GET", path)
                if resp.status != 200:
                    raise _refusal(resp, f"{ref}: claiming berth's fields")
            raw = resp.body
        else:
            log.warning("%s: berth's fields not claimed after %d tries (claimed at its next "
                        "apply)", ref, CLAIM_TRIES)
        return self._stored(ref, raw)

    @staticmethod
    def _stored(ref: KubeObjectRef, raw: bytes) -> KubeObject:
        try:
            return typed(raw, KubeObject)
        except msgspec.DecodeError as exc:
            raise Unavailable(f"{ref}: unreadable answer: {exc}") from exc

    def _create_namespace(self, name: str) -> None:
        log.info("creating namespace %s (an object berth applies lives there)", name)
        resp = self._request(
            "PATCH", f"/api/v1/namespaces/{name}",
            params={"fieldManager": FIELD_MANAGER},
            content_type="application/apply-patch+yaml",
            body=msgspec.json.encode({"apiVersion": "v1", "kind": "Namespace", "metadata": {
                "name": name, "labels": {"app.kubernetes.io/created-by": FIELD_MANAGER}}}))
        if resp.status in (400, 422):
            raise Rejected(f"namespace {name}: {_error(resp)}")
        if resp.status not in (200, 201, 409):
            raise _refusal(resp, f"namespace {name}")

    def get(self, ref: KubeObjectRef, *, cached: bool = False) -> KubeObject | None:
        """The object as stored now; None if there is none. ``cached``: as the API
        server's watch cache holds it (``resourceVersion=0``: no read of its etcd,
        and possibly a moment behind)."""
        try:
            kind = self.kind(ref.api_version, ref.kind)
        except NotServed:
            return None
        resp = self._request("GET", kind.path(ref.name, ref.namespace),
                             params={"resourceVersion": "0"} if cached else None)
        if resp.status == 404:
            return None
        if resp.status != 200:
            raise _refusal(resp, str(ref))
        try:
            return typed(resp.body, KubeObject)
        except msgspec.DecodeError as exc:
            raise Unavailable(f"{ref}: unreadable answer: {exc}") from exc

    def exists(self, ref: KubeObjectRef) -> bool:
        return self.get(ref) is not None

    def delete(self, ref: KubeObjectRef, *, propagation: str = "Background",
               uid: str = "") -> None:
        """Delete one object and, as ``propagation`` says, what its controllers made
        (Background: at once, by the garbage collector; Foreground: before the object
        goes); one that is already gone is fine. ``uid``: only that very object (one
        deleted and made anew by someone else meanwhile is not ours)."""
        try:
            kind = self.kind(ref.api_version, ref.kind)
        except NotServed:
            return  # its kind is gone from the cluster, and the object with it
        options: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions",
                                   "propagationPolicy": propagation}
        if uid:
            options["preconditions"] = {"uid": uid}
        resp = self._request("DELETE", kind.path(ref.name, ref.namespace),
                             body=msgspec.json.encode(options),
                             content_type="application/json")
        if resp.status == 409 and uid:
            return  # replaced by another object of that name: not berth's to delete
        if resp.status not in (200, 202, 404):
            raise _refusal(resp, f"deleting {ref}")

    def close(self) -> None:
        self.closed = True
        self.http.close()


class WatchRefused(Exception):
    """The cluster does not allow watching this kind."""


class Connections:
    """One Connection per cluster key, replaced when the cluster's kubeconfig changes.

    A replaced or dropped connection may still be in use by another worker: it
    is retired, and closed only once a request started on it has timed out.
    """

    def __init__(self, timeout: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.timeout = timeout
        self.clock = clock
        self._lock = threading.Lock()
        # key → (the kubeconfig last asked for, its digest, the connection)
        self._by_key: dict[str, tuple[dict[str, Any], str, Connection]] = {}
        self._retired: list[tuple[float, Connection]] = []  # (close after, connection)

    def _retire(self, conn: Connection) -> None:
        """Close ``conn`` later; close the retired ones whose time has come."""
        now = self.clock()
        with self._lock:
            self._retired.append((now + 2 * self.timeout + 5.0, conn))
            due = [c for t, c in self._retired if t <= now]
            self._retired = [(t, c) for t, c in self._retired if t > now]
        for c in due:
            c.close()

    def get(self, key: str, kubeconfig: dict[str, Any]) -> Connection:
        """The connection for ``key``; raises ValueError for an unusable kubeconfig.

        Called per apply and per probe with the informer's kubeconfig, which is
        the same object until the Cluster changes: only a new one is hashed.
        """
        with self._lock:
            hit = self._by_key.get(key)
        if hit is not None and hit[0] is kubeconfig:
            return hit[2]
        digest = hashlib.sha256(msgspec.json.encode(kubeconfig)).hexdigest()
        if hit is not None and hit[1] == digest:
            with self._lock:
                self._by_key[key] = (kubeconfig, digest, hit[2])
            return hit[2]
        conn = Connection(kubeconfig, self.timeout)
        with self._lock:
            old = self._by_key.get(key)
            if old is not None and old[1] == digest:  # another thread was quicker
                conn.close()
                return old[2]
            self._by_key[key] = (kubeconfig, digest, conn)
        if old is not None:
            self._retire(old[2])  # other workers may be in a request on it
        return conn

    def current(self, key: str) -> Connection | None:
        with self._lock:
            hit = self._by_key.get(key)
        return hit[2] if hit else None

    def drop(self, key: str) -> None:
        with self._lock:
            hit = self._by_key.pop(key, None)
        if hit is not None:
            self._retire(hit[2])

    def close(self) -> None:
        with self._lock:
            conns = [c for _, _, c in self._by_key.values()] + [c for _, c in self._retired]
            self._by_key, self._retired = {}, []
        for conn in conns:
            conn.close()
