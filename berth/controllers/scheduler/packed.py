"""Workload objects kept packed: what an application's workloads were written as,
for the overrides to render again per cluster (:mod:`demands`), kept for as long
as the application is, and read only when an override selects it.

A Deployment's JSON is a few hundred bytes, most of them the same words in
every manifest; deflate primed with those words keeps a fifth to a quarter of
it (a Deployment of 338 bytes in 65, packed in 7 µs, unpacked in 1 µs): at
100,000 applications, tens of megabytes of the scheduler's memory
(docs/benchmarks.md, 10,000 clusters and 100,000 applications). Raw deflate
(no header or checksum: the bytes never leave the process).
"""

from __future__ import annotations

import zlib
from typing import Final

# Words Kubernetes workload manifests share, the commonest last (deflate reaches back
# 32 KiB; nearer is shorter). Changing it is safe: nothing packed outlives the process.
_WORDS: Final = (
    b'"volumeClaimTemplates":[{"metadata":{"name":""},"spec":{"accessModes":'
    b'["ReadWriteOnce"],"resources":{"requests":{"storage":""}}}}],"serviceName":"",'
    b'"backoffLimit":,"completions":,"parallelism":,"restartPolicy":"Never",'
    b'"nodeSelector":{},"tolerations":[{"key":"","operator":"Exists","effect":""}],'
    b'"volumes":[{"name":"","configMap":{"name":""}}],"volumeMounts":[{"name":"",'
    b'"mountPath":""}],"env":[{"name":"","value":""}],"ports":[{"containerPort":,'
    b'"protocol":"TCP"}],"imagePullPolicy":"IfNotPresent","readinessProbe":{"httpGet":'
    b'{"path":"","port":}},"args":[],"command":[],"limits":{"cpu":"","memory":""},'
    b'"nvidia.com/gpu":"ephemeral-storage":"strategy":{"type":"RollingUpdate"},'
    b'{"apiVersion":"batch/v1","kind":"Job",{"apiVersion":"v1","kind":"Pod",'
    b'{"apiVersion":"apps/v1","kind":"StatefulSet",'
    b'{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"","namespace":"",'
    b'"labels":{"app.kubernetes.io/name":"","app":""},"annotations":{}},"spec":'
    b'{"replicas":,"selector":{"matchLabels":{"app":""}},"template":{"metadata":'
    b'{"labels":{"app":""}},"spec":{"containers":[{"name":"main","image":"",'
    b'"resources":{"requests":{"cpu":"m","memory":"Mi"}}}]}}}}')


def pack(raw: bytes) -> bytes:
    """``raw`` deflated, primed with the words manifests share."""
    packer = zlib.compressobj(zlib.Z_DEFAULT_COMPRESSION, zlib.DEFLATED, -15, zdict=_WORDS)
    return packer.compress(raw) + packer.flush()


def unpack(packed: bytes) -> bytes:
    """What :func:`pack` was given."""
    unpacker = zlib.decompressobj(-15, zdict=_WORDS)
    return unpacker.decompress(packed) + unpacker.flush()


__all__ = ["pack", "unpack"]
