#!/usr/bin/env bash
# berth's demo: the whole system on this machine, left running.
#
#   scripts/run.sh           set up what the demo needs (once), then start a
#                            three-member etcd cluster, the scheduler, the
#                            propagator and the metrics-cache (two replicas
#                            each) and three local Kubernetes API servers as
#                            clusters in three locations (helsinki in Pull mode:
#                            reached by its agent alone); apply four example
#                            applications, show where each runs and why, then
#                            change a metric and show an application move
#                            (made before broken); print the web console's URL
#   scripts/run.sh --stop    stop everything the demo started, remove its data
#   scripts/run.sh --help    this text
#
# Progress is one line per step; the tools' own output goes to
# ~/.cache/berth/setup.log and the processes' logs to ~/.cache/berth/demo/logs/.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
case "${1:-}" in
  -h|--help)
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
    exit 0 ;;
  --stop)
    if [ -x .venv/bin/python ]; then exec .venv/bin/python scripts/demo.py stop; fi
    echo "run: nothing was set up here, so nothing runs" >&2
    exit 0 ;;
  "") ;;
  *)
    echo "run: unknown argument '$1' (scripts/run.sh --help)" >&2
    exit 2 ;;
esac
BERTH_RUN_STARTED="$(date +%s.%N)"
export BERTH_RUN_STARTED
source scripts/setup.sh --demo
exec python scripts/demo.py start
