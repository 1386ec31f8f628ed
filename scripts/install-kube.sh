#!/usr/bin/env bash
# Build kube-apiserver from source through the Go module proxy and cache it in
# ~/.cache/berth/kube-apiserver-<version>/. k8s.io/kubernetes's go.mod replaces
# its staging modules with ./staging/... paths, so `go install` refuses it: we
# build in a scratch module that requires k8s.io/kubernetes and replaces each
# k8s.io/<staging> module with its published v0.Y.Z release, the list read from
# k8s.io/kubernetes's own go.mod (as projects importing k8s.io/kubernetes do).
# GOTOOLCHAIN=local: the installed Go must build it (1.36 needs Go 1.26).
# Prints the directory holding kube-apiserver on its last line.
set -euo pipefail
VERSION="${BERTH_KUBE_VERSION:-v1.36.3}"
CACHE="${BERTH_CACHE:-$HOME/.cache/berth}"
DEST="$CACHE/kube-apiserver-$VERSION"
if [ -x "$DEST/kube-apiserver" ]; then
  echo "kube-apiserver $VERSION: cached in $DEST" >&2
  echo "$DEST"
  exit 0
fi
command -v go >/dev/null || { echo "kube-apiserver: Go is needed to build it" >&2; exit 1; }
export GOTOOLCHAIN=local GOFLAGS=-mod=mod
minor_patch="${VERSION#v1.}"
staging="v0.${minor_patch}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo "kube-apiserver $VERSION: building from source in $work (first time only, a few minutes)" >&2
gomod="$(go mod download -json "k8s.io/kubernetes@$VERSION" \
  | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')"
cd "$work"
go mod init berth.local/kubebuild >/dev/null 2>&1
go mod edit -go="$(sed -n 's/^go //p' "$gomod")"
modules="$(sed -n 's#^[[:space:]]*\(k8s.io/[^ ]*\) => ./staging/.*#\1#p' "$gomod")"
echo "  replacing $(echo "$modules" | wc -l) staging modules with their $staging releases" >&2
for m in $modules; do
  go mod edit -replace "$m=$m@$staging"
done
go mod edit -require "k8s.io/kubernetes@$VERSION"
echo "  resolving modules ..." >&2
go get "k8s.io/kubernetes/cmd/kube-apiserver@$VERSION" >&2
echo "  compiling (this is the long part) ..." >&2
mkdir -p "$DEST.tmp"
v="k8s.io/component-base/version"
CGO_ENABLED=0 go build -trimpath \
  -ldflags="-s -w -X $v.gitVersion=$VERSION -X $v.gitMajor=1 -X $v.gitMinor=${minor_patch%%.*}" \
  -o "$DEST.tmp/kube-apiserver" \
  k8s.io/kubernetes/cmd/kube-apiserver >&2
rm -rf "$DEST" && mv "$DEST.tmp" "$DEST"
"$DEST/kube-apiserver" --version >&2
echo "$DEST"
