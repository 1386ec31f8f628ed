#!/usr/bin/env bash
# The whole test suite on a fresh machine: set up, lint, type-check, build the docs, then the
# unit tests and the integration tests against the real servers the suite
# starts itself (etcd, Prometheus with a Pushgateway, a Kafka broker, kube-apiservers;
# ksqlDB as a protocol-level test server). Extra arguments go to pytest.
#
#   scripts/test.sh --fast    the fast tier: only the virtualenv is set up (no server is
#                             built or started), then ruff, mypy, the import contracts and
#                             every unit test (-m unit) on two workers; extra arguments go
#                             to pytest
#   scripts/test.sh --workers N   the suite on N workers side by side (two unless said:
#                             about 30 min on two cores; --workers 1: in one process,
#                             about 70 min; docs/development.md)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
mode=all
workers=2  # two workers side by side unless --workers says otherwise (CI: two)
if [ "${1:-}" = --fast ]; then
  mode=--fast
  shift
elif [ "${1:-}" = --workers ]; then
  [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || { echo "--workers needs a number of workers" >&2; exit 2; }
  workers=$2
  shift 2
fi
side=()
[ "$workers" = 1 ] || side=(-n "$workers" --dist loadscope --no-loadscope-reorder)
source scripts/setup.sh "$mode"

echo "== ruff" >&2
ruff check .
echo "== mypy" >&2
mypy
echo "== import contracts (pyproject.toml [tool.importlinter])" >&2
lint-imports --no-cache --no-logo
if [ "$mode" = --fast ]; then
  echo "== pytest -m unit (no server)" >&2
  exec python -m pytest -p no:cacheprovider -n 2 --dist loadscope --no-loadscope-reorder \
    -m unit --durations=20 tests/unit "$@"
fi
echo "== docs (Sphinx; warnings, broken links among them, are errors)" >&2
scripts/docs.sh
echo "== pytest (berth is plain Python, as it ships)" >&2
# on two workers unless --workers (tests/conftest.py lays the tests out for them); the
# slowest 20 tests are printed at the end of every run (what the suite's time goes to)
python -m pytest -p no:cacheprovider "${side[@]}" --durations=20 "$@"
