#!/usr/bin/env bash
# Install berth, its three systemd services, its exporter's (optional) and its console's
# on this host.
#
#   sudo deploy/systemd/install.sh            # /opt/berth, /etc/berth, /etc/systemd/system
#
# Creates a virtualenv at $PREFIX with berth and the exact dependency versions
# of constraints.txt, writes each process's default configuration to
# $ETC/<process>.yaml and an environment file $ETC/etcd-<process>.env (mode
# 0600) unless they exist, installs the units with ExecStart pointing at
# $PREFIX, and reloads systemd. Nothing is started: fill in the environment
# files (BERTH_ETCD, the process's etcd user and password) and the TLS files
# in $ETC/etcd/, then `systemctl enable --now berth-scheduler berth-propagator
# berth-metrics-cache`.
#
# PREFIX, ETC, UNITDIR and SYSTEMCTL=0 (do not reload systemd) can be set, to
# install elsewhere (the test suite installs into a scratch directory).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PREFIX="${PREFIX:-/opt/berth}"
ETC="${ETC:-/etc/berth}"
UNITDIR="${UNITDIR:-/etc/systemd/system}"
SYSTEMCTL="${SYSTEMCTL:-1}"
PYTHON="${PYTHON:-python3}"

echo "berth: installing into $PREFIX (virtualenv; versions from constraints.txt)"
"$PYTHON" -m venv "$PREFIX"
"$PREFIX/bin/pip" install -q --disable-pip-version-check -c "$here/constraints.txt" "$here"
install -d -m 0755 "$PREFIX/share/doc/berth"
install -m 0644 "$here/docs/operations.md" "$PREFIX/share/doc/berth/operations.md"

install -d -m 0755 "$ETC"
install -d -m 0700 "$ETC/etcd"
for process in scheduler propagator metrics-cache exporter; do
  if [ ! -e "$ETC/$process.yaml" ]; then
    "$PREFIX/bin/berth" "$process" --write-config-to "$ETC/$process.yaml"
  fi
  env="$ETC/etcd-$process.env"
  if [ ! -e "$env" ]; then
    (umask 077; cat > "$env" <<ENV
# The etcd cluster's members, comma-separated; the $process's etcd user (see
# scripts/etcd-secure.sh) and its password.
BERTH_ETCD=https://127.0.0.1:2379
BERTH_ETCD_USER=berth-$process
BERTH_ETCD_PASSWORD=
ENV
)
  fi
  sed "s#/opt/berth/#$PREFIX/#g; s#/etc/berth/#$ETC/#g" \
    "$here/deploy/systemd/berth-$process.service" > "$UNITDIR/berth-$process.service"
  chmod 0644 "$UNITDIR/berth-$process.service"
done
# The console: its etcd user's environment file and a token of its own, made once
env="$ETC/etcd-console.env"
if [ ! -e "$env" ]; then
  (umask 077; cat > "$env" <<ENV
# The etcd cluster's members, comma-separated; the console's etcd user (see
# scripts/etcd-secure.sh: a role that reads no secrets) and its password.
BERTH_ETCD=https://127.0.0.1:2379
BERTH_ETCD_USER=berth-console
BERTH_ETCD_PASSWORD=
ENV
)
fi
if [ ! -e "$ETC/console-token" ]; then
  (umask 077; "$PYTHON" -c 'import secrets; print(secrets.token_urlsafe(24))' > "$ETC/console-token")
fi
sed "s#/opt/berth/#$PREFIX/#g; s#/etc/berth/#$ETC/#g" \
  "$here/deploy/systemd/berth-console.service" > "$UNITDIR/berth-console.service"
chmod 0644 "$UNITDIR/berth-console.service"
if [ "$SYSTEMCTL" = 1 ]; then
  systemctl daemon-reload
fi
echo "berth: installed $("$PREFIX/bin/berth" --version); units in $UNITDIR"
echo "next: fill in $ETC/etcd-*.env and $ETC/etcd/{ca.crt,client.crt,client.key}, then"
echo "  systemctl enable --now berth-scheduler berth-propagator berth-metrics-cache"
echo "  (and berth-exporter where an Export writes to Argo CD or OCM: docs/argocd.md)"
echo "and, for the web console (its token in $ETC/console-token):"
echo "  systemctl enable --now berth-console"
