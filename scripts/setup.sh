#!/usr/bin/env bash
# Set up this machine for berth, one progress line per step; what the tools
# print while they build goes to a log file (named on failure, and below).
#
#   source scripts/setup.sh all       # everything the test suite needs
#   source scripts/setup.sh --demo    # only what scripts/run.sh's demo needs
#   source scripts/setup.sh --fast    # only the virtualenv: the fast tier
#                                     # (lint, types, contracts, unit tests)
#
# The demo needs: a virtualenv with berth (.venv, the versions of
# constraints.txt; berth is plain Python, nothing is compiled), etcd (built once
# from source into ~/.cache/berth, see install-etcd.sh) and kube-apiserver
# (built once from source, about three minutes). The suite also needs
# Prometheus and the Pushgateway (Debian's packages), the Kafka broker's jars
# (Maven Central), kustomize (built from source) and Debian's chromium with its
# driver (the console's browser tests). Idempotent and quick when
# everything is there. Sourcing it exports BERTH_PY, BERTH_ETCD_BIN and a PATH
# with .venv/bin first.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
what="${1:-all}"
case "$what" in
  all|--demo|--fast) ;;
  *) echo "setup: unknown mode $what (all, --demo or --fast)" >&2; return 2 2>/dev/null || exit 2 ;;
esac
cache="${BERTH_CACHE:-$HOME/.cache/berth}"
setup_log="${BERTH_SETUP_LOG:-$cache/setup.log}"
mkdir -p "$(dirname "$setup_log")"
: >"$setup_log"

step() {  # step WHAT COMMAND...: one line for the person waiting; the rest to the log
  # The command runs in a subshell with errexit on and outside any `if`, `&&`
  # or `||` (bash ignores `set -e` in a function called from one of those):
  # any command in it that fails fails the step, loudly, with the log's tail.
  local what="$1" t0=$SECONDS rc=0
  shift
  printf 'setup: %s ... ' "$what" >&2
  echo "== $what" >>"$setup_log"
  set +e
  (set -euo pipefail; "$@") >>"$setup_log" 2>&1
  rc=$?
  set -e
  if [ "$rc" = 0 ]; then
    echo "ok ($((SECONDS - t0)) s)" >&2
  else
    echo "FAILED (exit $rc); the end of $setup_log:" >&2
    tail -n 30 "$setup_log" >&2
    return "$rc"
  fi
}

install_python() {
  # The stamp holds a hash of the files that say what to install: it is
  # written only after pip succeeded, and any change to them installs again.
  [ -x "$here/.venv/bin/python" ] || python3 -m venv "$here/.venv"
  local stamp="$here/.venv/.berth-installed" want
  want="$(cat "$here/constraints.txt" "$here/pyproject.toml" "$here/testkit/pyproject.toml" \
    | sha256sum | cut -d' ' -f1)"
  if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    rm -f "$stamp"
    "$here/.venv/bin/pip" install --disable-pip-version-check -c "$here/constraints.txt" \
      -e "$here[test,dev]" -e "$here/testkit"   # the test kit: servers, harness, fakes
    echo "$want" >"$stamp"
  fi
}

if ! command -v openssl >/dev/null; then   # certificates for TLS tests and API servers
  step "openssl (apt)" bash -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openssl'
fi
step "python virtualenv .venv (berth, pinned by constraints.txt)" install_python
# Bytecode written once, here: a Python run with PYTHONDONTWRITEBYTECODE (as some shells
# and containers set it) never writes it, and every process the suite or the demo starts
# would compile berth's modules again (a quarter of a process's start; docs/development.md)
step "berth's bytecode" "$here/.venv/bin/python" -m compileall -q -j 0 "$here/berth" \
  "$here/testkit/berth_testkit" "$here/tests" "$here/scripts"
if [ "$what" != --fast ]; then
  step "etcd (built once into $cache)" bash "$here/scripts/install-etcd.sh"
  step "kubernetes control plane and kwok (built once into $cache; the first time ~6 min)" \
    bash "$here/scripts/install-kube.sh"
fi
if [ "$what" = all ]; then
  step "prometheus and pushgateway (Debian packages)" bash "$here/scripts/install-prometheus.sh"
  step "kafka broker (Maven Central jars)" bash "$here/scripts/install-kafka.sh"
  step "kustomize (built once into $cache)" bash "$here/scripts/install-kustomize.sh"
  if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
    # the console's browser tests (Selenium drives Debian's driver; nothing is downloaded)
    step "chromium and chromium-driver (apt)" bash -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver'
  fi
fi
echo "setup: done (tool output in $setup_log)" >&2
export BERTH_PY="$here/.venv/bin/python"
if [ "$what" != --fast ]; then
  BERTH_ETCD_BIN="$(bash "$here/scripts/install-etcd.sh" 2>/dev/null | tail -n 1)"
  export BERTH_ETCD_BIN
fi
export PATH="$here/.venv/bin:$PATH"
