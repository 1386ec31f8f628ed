#!/usr/bin/env bash
# berth's main job on a fresh machine, on a local etcd this command starts:
# set up, start etcd (data in a temporary directory, or --data-dir DIR),
# start the scheduler, the metrics-cache and the propagator's cluster
# observer, bootstrap the examples of deploy/examples/ (or the files given),
# show what was stored at the contract keys and explain the scheduler's
# decision for the example application. The example clusters' kubeconfigs
# point at no real cluster, so the observer marks them OFFLINE and the example
# application is "Unschedulable: clusters not ONLINE", which `berth explain`
# shows; give them real kubeconfigs and it is scheduled.
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
scheduler_pid=""; cache_pid=""; propagator_pid=""
if [ "$keep" = 0 ]; then
  trap 'kill $scheduler_pid $cache_pid $propagator_pid $etcd_pid 2>/dev/null; wait 2>/dev/null' EXIT
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
echo "run: propagator (cluster observer) started (pid $propagator_pid)" >&2
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
  echo "run: cluster status (the example kubeconfigs point nowhere: OFFLINE after 3 probes):" >&2
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
fi
if [ "$keep" = 1 ]; then
  echo "run: etcd (pid $etcd_pid), the scheduler (pid $scheduler_pid), the" \
       "metrics-cache (pid $cache_pid) and the propagator (pid $propagator_pid) keep running;" \
       "export BERTH_ETCD=$url" >&2
fi
