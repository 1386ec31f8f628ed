#!/usr/bin/env bash
# Build a Kubernetes control plane from source through the Go module proxy and
# cache it in ~/.cache/berth/kube-<version>/: kube-apiserver,
# kube-controller-manager and kube-scheduler from one k8s.io/kubernetes
# release, plus kwok (sigs.k8s.io/kwok), which plays the kubelets: it keeps
# Nodes alive and runs Pods through their lifecycle without a container
# runtime. Together they make a cluster in which a Deployment gets Pods and
# the Pods become Ready (testkit/berth_testkit/servers/kube.py).
#
# k8s.io/kubernetes's go.mod replaces its staging modules with ./staging/...
# paths, so `go install` refuses it: we build in a scratch module that
# requires k8s.io/kubernetes and replaces each k8s.io/<staging> module with its
# published v0.Y.Z release, the list read from k8s.io/kubernetes's own go.mod
# (as projects importing k8s.io/kubernetes do). kwok's go.mod has no replace
# directives: `go install` builds it as released.
# GOTOOLCHAIN=local: the installed Go must build it (1.36 needs Go 1.26).
# Prints the directory holding the four binaries on its last line.
set -euo pipefail
VERSION="${BERTH_KUBE_VERSION:-v1.36.3}"
KWOK_VERSION="${BERTH_KWOK_VERSION:-v0.8.0}"
CACHE="${BERTH_CACHE:-$HOME/.cache/berth}"
DEST="$CACHE/kube-$VERSION-kwok-$KWOK_VERSION"
source "$(dirname "${BASH_SOURCE[0]}")/cache-lock.sh"
cache_lock "kube-$VERSION-kwok-$KWOK_VERSION"
BINARIES=(kube-apiserver kube-controller-manager kube-scheduler)
complete() {
  for b in "${BINARIES[@]}" kwok; do [ -x "$DEST/$b" ] || return 1; done
}
if complete; then
  echo "kubernetes $VERSION and kwok $KWOK_VERSION: cached in $DEST" >&2
  echo "$DEST"
  exit 0
fi
command -v go >/dev/null || { echo "kubernetes: Go is needed to build it" >&2; exit 1; }
export GOTOOLCHAIN=local GOFLAGS=-mod=mod
minor_patch="${VERSION#v1.}"
staging="v0.${minor_patch}"
work="$(mktemp -d)"
trap 'rm -rf "$work" "$DEST.tmp"' EXIT
echo "kubernetes $VERSION: building ${BINARIES[*]} from source in $work (first time only, several minutes)" >&2
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
packages=()
for b in "${BINARIES[@]}"; do packages+=("k8s.io/kubernetes/cmd/$b"); done
echo "  resolving modules ..." >&2
go get "${packages[@]/%/@$VERSION}" >&2
echo "  compiling (this is the long part) ..." >&2
rm -rf "$DEST.tmp" && mkdir -p "$DEST.tmp"
v="k8s.io/component-base/version"
CGO_ENABLED=0 go build -trimpath \
  -ldflags="-s -w -X $v.gitVersion=$VERSION -X $v.gitMajor=1 -X $v.gitMinor=${minor_patch%%.*}" \
  -o "$DEST.tmp/" "${packages[@]}" >&2
echo "  kwok $KWOK_VERSION: compiling ..." >&2
CGO_ENABLED=0 GOBIN="$DEST.tmp" go install -trimpath -ldflags="-s -w" \
  "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION" >&2
for b in "${BINARIES[@]}" kwok; do
  [ -x "$DEST.tmp/$b" ] || { echo "kubernetes: $b was not built" >&2; exit 1; }
done
rm -rf "$DEST" && mv "$DEST.tmp" "$DEST"
"$DEST/kube-apiserver" --version >&2
"$DEST/kwok" --version >&2 || true
echo "$DEST"
