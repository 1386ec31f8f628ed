"""A local Kubernetes API server for ``scripts/run.sh``: the one berth deploys to.

    python scripts/local_cluster.py CLUSTERS_YAML OUT_YAML NAME

Starts kube-apiserver (built by ``scripts/install-kube-apiserver.sh``, with
its own etcd, as the test suite runs it), then writes OUT_YAML: the Cluster
documents of CLUSTERS_YAML with the kubeconfig of cluster NAME replaced by
this server's (mode 0600: it holds the admin token). Runs until SIGTERM or
SIGINT, then stops the server and removes its files.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.servers.kube import KubeApiServer  # noqa: E402


def main() -> int:
    source, out, name = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
    docs = list(yaml.safe_load_all(Path(source).read_text()))
    server = KubeApiServer(name)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    try:
        server.start()
        for doc in docs:
            if doc and doc.get("kind") == "Cluster" and doc["metadata"]["name"] == name:
                doc["spec"]["kubeconfig"] = server.kubeconfig()
        tmp = out.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            yaml.safe_dump_all(docs, f, sort_keys=False)
        tmp.rename(out)  # appears whole
        print(f"local_cluster: kube-apiserver {name} at {server.url}", file=sys.stderr)
        stop.wait()
    finally:
        server.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
