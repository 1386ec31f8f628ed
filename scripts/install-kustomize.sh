#!/usr/bin/env bash
# kustomize, to render deploy/kubernetes in the tests: built once from source
# through the Go module proxy (about half a minute) and cached in
# ~/.cache/berth/kustomize-<version>/. Prints the directory on its last line.
set -euo pipefail
VERSION="${BERTH_KUSTOMIZE_VERSION:-v5.5.0}"
CACHE="${BERTH_CACHE:-$HOME/.cache/berth}"
DEST="$CACHE/kustomize-$VERSION"
source "$(dirname "${BASH_SOURCE[0]}")/cache-lock.sh"
cache_lock "kustomize-$VERSION"
if [ -x "$DEST/kustomize" ]; then
  echo "kustomize $VERSION: cached in $DEST" >&2
  echo "$DEST"
  exit 0
fi
command -v go >/dev/null || { echo "kustomize: Go is needed to build it" >&2; exit 1; }
log="$CACHE/kustomize-$VERSION.build.log"
mkdir -p "$CACHE"
echo "kustomize $VERSION: building from source (log: $log)" >&2
if ! GOBIN="$DEST.tmp" GOFLAGS=-mod=mod GOTOOLCHAIN=local \
    go install "sigs.k8s.io/kustomize/kustomize/v5@$VERSION" >"$log" 2>&1; then
  tail -n 20 "$log" >&2
  exit 1
fi
rm -rf "$DEST"
mv "$DEST.tmp" "$DEST"
echo "kustomize $VERSION: built into $DEST" >&2
echo "$DEST"
