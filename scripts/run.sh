#!/usr/bin/env bash
# berth's main job on a fresh machine, on a local etcd this command starts:
# set up, start etcd (data in a temporary directory, or --data-dir DIR),
# start the scheduler, the metrics-cache and the propagator, bootstrap the
# examples of deploy/examples/ (or the files given), show what was stored at
# the contract keys and explain the scheduler's decision for the example
# application. With the examples, a real local kube-apiserver (with its own
# etcd) stands in for cluster dresden-1: the application is scheduled there
# and the propagator applies its Deployment and Service to it; paris-1's
# kubeconfig points nowhere, so the observer marks it OFFLINE.
#
#   scripts/run.sh [--keep] [--port N] [--data-dir DIR] [FILE|DIR ...]
#
# --keep leaves etcd and the processes running instead of stopping them.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
source scripts/setup.sh

keep=0; port=23790; data=""; inputs=()
while [ $# -gt 0 ]; do
  case "$1" in
    --keep) keep=1 ;;
    --port) port="$2"; shift ;;
    --data-dir) data="$2"; shift ;;
    *) inputs+=("$1") ;;
  esac
  shift
done
[ ${#inputs[@]} -gt 0 ] || inputs=(deploy/examples)
[ -n "$data" ] || data="$(mktemp -d -t berth-etcd-XXXX)/data"
mkdir -p "$data"
log="$(dirname "$data")/etcd.log"

url="http://127.0.0.1:$port"
peer="http://127.0.0.1:$((port + 1))"
echo "run: starting etcd ($BERTH_ETCD_BIN) at $url, data in $data" >&2
"$BERTH_ETCD_BIN/etcd" --name berth --data-dir "$data" \
  --listen-client-urls "$url" --advertise-client-urls "$url" \
  --listen-peer-urls "$peer" --initial-advertise-peer-urls "$peer" \
  --initial-cluster "berth=$peer" --log-level warn >"$log" 2>&1 &
etcd_pid=$!
scheduler_pid=""; cache_pid=""; propagator_pid=""; kube_pid=""
if [ "$keep" = 0 ]; then
  trap 'kill $scheduler_pid $cache_pid $propagator_pid $kube_pid $etcd_pid 2>/dev/null; wait 2>/dev/null' EXIT
fi
examples=0
if [ "${inputs[*]}" = "deploy/examples" ]; then
  examples=1
  clusters="$(dirname "$data")/clusters.yaml"
  echo "run: starting a local kube-apiserver as cluster dresden-1" >&2
  python scripts/local_cluster.py deploy/examples/clusters.yaml "$clusters" dresden-1 \
    2>"$(dirname "$data")/kube-apiserver.log" &
  kube_pid=$!
  inputs=(deploy/examples/metrics.yaml deploy/examples/applications.yaml)
fi
for _ in $(seq 100); do
  "$BERTH_ETCD_BIN/etcdctl" --endpoints "$url" endpoint health >/dev/null 2>&1 && break
  kill -0 $etcd_pid 2>/dev/null || {
    echo "run: etcd did not start (is port $port or $((port + 1)) taken? try --port N):" >&2
    tail -n 5 "$log" >&2; exit 1; }
  sleep 0.1
done

export BERTH_ETCD="$url"
berth --log-level WARNING scheduler --http 127.0.0.1:0 >"$(dirname "$data")/scheduler.log" 2>&1 &
scheduler_pid=$!
echo "run: scheduler started (pid $scheduler_pid, log $(dirname "$data")/scheduler.log)" >&2
berth --log-level WARNING metrics-cache --http 127.0.0.1:0 >"$(dirname "$data")/metrics-cache.log" 2>&1 &
cache_pid=$!
echo "run: metrics-cache started (pid $cache_pid, log $(dirname "$data")/metrics-cache.log)" >&2
berth --log-level WARNING propagator --http 127.0.0.1:0 >"$(dirname "$data")/propagator.log" 2>&1 &
propagator_pid=$!
echo "run: propagator started (pid $propagator_pid, log $(dirname "$data")/propagator.log)" >&2
if [ "$examples" = 1 ]; then
  for _ in $(seq 600); do
    [ -f "$clusters" ] && break
    kill -0 "$kube_pid" 2>/dev/null || {
      echo "run: the local kube-apiserver did not start:" >&2
      tail -n 20 "$(dirname "$data")/kube-apiserver.log" >&2; exit 1; }
    sleep 0.2
  done
  inputs+=("$clusters")
fi
berth bootstrap --force "${inputs[@]}"
echo "run: stored under /berth/ (etcdctl get --prefix /berth/ --keys-only):" >&2
"$BERTH_ETCD_BIN/etcdctl" --endpoints "$url" get --prefix /berth/ --keys-only | sed '/^$/d'
echo "run: one document:" >&2
"$BERTH_ETCD_BIN/etcdctl" --endpoints "$url" get /berth/v1/globalmetrics/heat_demand_zone_1 \
  --print-value-only 2>/dev/null || true
if "$BERTH_ETCD_BIN/etcdctl" --endpoints "$url" get --prefix /berth/v1/applications/default/web \
    --keys-only | grep -q web; then
  for _ in $(seq 100); do
    "$BERTH_ETCD_BIN/etcdctl" --endpoints "$url" get /berth/v1/bindings/applications/default/web \
      --keys-only | grep -q web && break
    sleep 0.1
  done
  sleep 1  # the metrics-cache's first poll
  echo "run: cluster status (paris-1's kubeconfig points nowhere: OFFLINE after 3 probes):" >&2
  for _ in $(seq 100); do
    "$BERTH_ETCD_BIN/etcdctl" --endpoints "$url" get --prefix /berth/v1/status/clusters/ \
      | grep -q OFFLINE && break
    sleep 0.5
  done
  "$BERTH_ETCD_BIN/etcdctl" --endpoints "$url" get --prefix /berth/v1/status/clusters/ | sed '/^$/d'
  sleep 0.5  # the scheduler's sweep after the status change
  echo "run: metric values (etcdctl get --prefix /berth/v1/metricvalues/):" >&2
  "$BERTH_ETCD_BIN/etcdctl" --endpoints "$url" get --prefix /berth/v1/metricvalues/ | sed '/^$/d'
  echo "run: the scheduler's decision (berth explain application default/web):" >&2
  berth explain application default/web || true
  if [ "$examples" = 1 ]; then
    echo "run: the propagator's status (etcdctl get /berth/v1/status/applications/default/web):" >&2
    for _ in $(seq 100); do
      "$BERTH_ETCD_BIN/etcdctl" --endpoints "$url" get /berth/v1/status/applications/default/web \
        --print-value-only | grep -q RUNNING && break
      sleep 0.2
    done
    "$BERTH_ETCD_BIN/etcdctl" --endpoints "$url" get /berth/v1/status/applications/default/web \
      --print-value-only
    echo "run: what the local kube-apiserver (dresden-1) now holds:" >&2
    python - "$clusters" <<'PY'
import sys, yaml
from berth.controllers.propagator.kube import Connection
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d and d["kind"] == "Cluster"]
conn = Connection(next(d for d in docs if d["metadata"]["name"] == "dresden-1")["spec"]["kubeconfig"], 5)
for path in ("/apis/apps/v1/namespaces/default/deployments/web", "/api/v1/namespaces/default/services/web"):
    obj = conn.http.get(path).json()
    meta = obj.get("metadata", {})
    print(f"{obj.get('kind')} {meta.get('namespace')}/{meta.get('name')}: managed by "
          f"{[f['manager'] for f in meta.get('managedFields', [])]}, labels {meta.get('labels')}")
conn.close()
PY
  fi
fi
if [ "$keep" = 1 ]; then
  echo "run: etcd (pid $etcd_pid), the scheduler (pid $scheduler_pid), the" \
       "metrics-cache (pid $cache_pid), the propagator (pid $propagator_pid) and the local" \
       "kube-apiserver (pid ${kube_pid:-none}) keep running; export BERTH_ETCD=$url" >&2
fi
