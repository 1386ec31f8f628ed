#!/usr/bin/env bash
# Build etcd and etcdctl from source through the Go module proxy and cache them
# under ~/.cache/berth/etcd-<version>/.  etcd's own go.mod files carry replace
# directives, so `go install module@version` refuses them: we build inside a
# scratch module that simply requires the released modules.  If the build fails
# we fall back to Debian's etcd-server package (3.4) and say so.
#
# Prints the directory that holds `etcd` and `etcdctl` on its last line.
set -euo pipefail

ETCD_VERSION="${BERTH_ETCD_VERSION:-v3.6.16}"
CACHE="${BERTH_CACHE:-$HOME/.cache/berth}"
DEST="$CACHE/etcd-$ETCD_VERSION"
source "$(dirname "${BASH_SOURCE[0]}")/cache-lock.sh"
cache_lock "etcd-$ETCD_VERSION"

if [ -x "$DEST/etcd" ] && [ -x "$DEST/etcdctl" ]; then
  echo "etcd $ETCD_VERSION: cached in $DEST" >&2
  echo "$DEST"
  exit 0
fi

build() {
  command -v go >/dev/null || { echo "go is not installed" >&2; return 1; }
  local work
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' RETURN
  echo "etcd $ETCD_VERSION: building from source in $work (first time only, a few minutes)" >&2
  cd "$work"
  export GOTOOLCHAIN=local GOFLAGS=-mod=mod
  go mod init berth.local/etcdbuild >/dev/null 2>&1
  echo "  resolving modules ..." >&2
  go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION" "go.etcd.io/etcd/etcdctl/v3@$ETCD_VERSION" >&2
  mkdir -p "$DEST.tmp"
  echo "  compiling etcd ..." >&2
  CGO_ENABLED=0 go build -trimpath -o "$DEST.tmp/etcd" go.etcd.io/etcd/server/v3 >&2
  echo "  compiling etcdctl ..." >&2
  CGO_ENABLED=0 go build -trimpath -o "$DEST.tmp/etcdctl" go.etcd.io/etcd/etcdctl/v3 >&2
  rm -rf "$DEST" && mv "$DEST.tmp" "$DEST"
}

if build; then
  "$DEST/etcd" --version | head -1 >&2
  echo "$DEST"
  exit 0
fi

echo "etcd $ETCD_VERSION: build failed; falling back to Debian's etcd-server (3.4)" >&2
if ! command -v etcd >/dev/null; then
  apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq etcd-server etcd-client >&2
fi
mkdir -p "$CACHE/etcd-debian"
ln -sf "$(command -v etcd)" "$CACHE/etcd-debian/etcd"
ln -sf "$(command -v etcdctl)" "$CACHE/etcd-debian/etcdctl"
"$CACHE/etcd-debian/etcd" --version | head -1 >&2
echo "$CACHE/etcd-debian"
