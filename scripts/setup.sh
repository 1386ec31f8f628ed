#!/usr/bin/env bash
# Set up a fresh machine for berth: a virtualenv with berth and its test and
# dev tools (.venv); etcd (built once into ~/.cache/berth, see
# install-etcd.sh); Prometheus and the Pushgateway (Debian's packages); the
# Kafka broker's jars (Maven Central, cached in ~/.cache/berth); kube-apiserver
# (built from source once, about 10 minutes, cached). Idempotent and quick
# when everything is already there.
# Source it to get BERTH_PY and BERTH_ETCD_BIN.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

if ! command -v openssl >/dev/null; then   # the TLS tests make certificates with it
  echo "setup: installing openssl" >&2
  apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openssl >&2
fi

if [ ! -x "$here/.venv/bin/python" ]; then
  echo "setup: creating $here/.venv" >&2
  python3 -m venv "$here/.venv"
fi
stamp="$here/.venv/.berth-installed"
if [ ! -f "$stamp" ] || [ "$here/pyproject.toml" -nt "$stamp" ] \
   || [ "$here/constraints.txt" -nt "$stamp" ]; then
  echo "setup: installing berth and its test tools into .venv (versions: constraints.txt)" >&2
  "$here/.venv/bin/pip" install -q --disable-pip-version-check -c "$here/constraints.txt" \
    -e "$here[test,dev]" >&2
  touch "$stamp"
fi
bash "$here/scripts/install-prometheus.sh"
bash "$here/scripts/install-kafka.sh" >/dev/null
bash "$here/scripts/install-kube-apiserver.sh" >/dev/null
bash "$here/scripts/install-kustomize.sh" >/dev/null
export BERTH_PY="$here/.venv/bin/python"
BERTH_ETCD_BIN="$(bash "$here/scripts/install-etcd.sh" | tail -n 1)"
export BERTH_ETCD_BIN
export PATH="$here/.venv/bin:$PATH"
