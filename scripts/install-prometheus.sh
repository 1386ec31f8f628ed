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
# The packages would start and enable their services where an init system runs:
# the tests start their own, so nothing is started (policy-rc.d) or enabled.
policy=/usr/sbin/policy-rc.d
created_policy=0
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' > "$policy" && chmod +x "$policy" && created_policy=1
fi
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
  prometheus prometheus-pushgateway >&2 || { [ $created_policy = 0 ] || rm -f "$policy"; exit 1; }
[ $created_policy = 0 ] || rm -f "$policy"
(service prometheus stop; service prometheus-pushgateway stop) >/dev/null 2>&1 || true
if command -v systemctl >/dev/null; then
  systemctl disable prometheus prometheus-pushgateway >/dev/null 2>&1 || true
fi
