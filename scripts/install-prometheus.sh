#!/usr/bin/env bash
# Prometheus and the Pushgateway for the metrics-cache tests, from Debian's
# packages (prometheus 2.42, prometheus-pushgateway 1.5). Debian's build has
# no Kubernetes service discovery; the tests use static_configs.
set -euo pipefail
if command -v prometheus >/dev/null && command -v prometheus-pushgateway >/dev/null; then
  echo "prometheus: installed ($(prometheus --version 2>&1 | head -n 1))" >&2
  exit 0
fi
echo "prometheus: installing Debian's prometheus and prometheus-pushgateway" >&2
apt-get update -qq >&2
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
  prometheus prometheus-pushgateway >&2
# The packages start services where an init system runs; the tests start their own.
(service prometheus stop; service prometheus-pushgateway stop) >/dev/null 2>&1 || true
