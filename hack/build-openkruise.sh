#!/usr/bin/env bash
# Builds OpenKruise (the Go original, for the side-by-side benchmark hack/bench-openkruise.sh)
# from its Go module at a pinned version into the cache next to the Kubernetes binaries.
#
# What it builds is NOT the OpenKruise v1.9.0 release: the module proxy's "v1.9.0" records its
# origin as commit 4c2bbcec, a master commit 49 commits past the release branch's split (it
# stores seven kinds as v1beta1; the release, tag v1.9.0 = commit b1e001a95, stores them as
# v1alpha1). The proxy does not serve the tag's commit. This script prints the commit it built
# and writes it to $dest/commit; the benchmark's baseline is that commit. Kruise-rs's tests
# compare with the release through api/tests/data/openkruise-v1.9.0.json, which
# hack/openkruise-facts.py reads from the tag, never with this module.
#
#   $KRS_CACHE/openkruise-$OPENKRUISE_VERSION/bin/{manager,daemon}   release-style builds
#   $KRS_CACHE/openkruise-$OPENKRUISE_VERSION/src/config/            its CRDs and webhook configs
# The module's own go.mod (with its replace directives) is the main module of the build, so the
# binaries are what its Dockerfile builds (`go build .` for the manager, ./cmd/daemon). A cold
# build downloads the modules and compiles for about 5 to 15 minutes on 2 cores; after that
# this prints where the binaries are and exits.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=hack/versions.sh
source "$here/hack/versions.sh"

OPENKRUISE_VERSION=${OPENKRUISE_VERSION:-v1.9.0}
dest="$KRS_CACHE/openkruise-$OPENKRUISE_VERSION"
module=github.com/openkruise/kruise
# The checksum database has no entry for this module (its lookup answers 404), so the module
# is fetched without it and checked here against the hash recorded when this script was
# pinned; its dependencies are still checked against the module's own go.sum.
OPENKRUISE_SUM=${OPENKRUISE_SUM:-h1:7MWDURrU7VlkapL1qaFLQehJG0OdTN338RSvzuzR3kU=}

# The commit the proxy's copy came from (`Origin.Hash` of `go mod download -json`).
PROXY_COMMIT=4c2bbcec
built_from() {
  echo "==> built from the module proxy's ${module}@${OPENKRUISE_VERSION} = commit $(cat "$dest/commit" 2>/dev/null || echo "$PROXY_COMMIT?") (master, not the release tag v1.9.0 = b1e001a95)"
}

# The version is read from the module information Go embeds in the binary.
is_pinned() { go version -m "$1" 2>/dev/null | grep -qE "^[[:space:]]+mod[[:space:]]+${module}[[:space:]]+${OPENKRUISE_VERSION}([[:space:]]|$)|^[[:space:]]+path[[:space:]]+${module}"; }

case ${1:-} in
  "") ;;
  *) echo "usage: $0" >&2; exit 2 ;;
esac

if [ -x "$dest/bin/manager" ] && [ -x "$dest/bin/daemon" ] && [ -d "$dest/src/config/crd" ] &&
  [ -f "$dest/.complete" ]; then
  built_from
  echo "==> OpenKruise ${OPENKRUISE_VERSION} ready in $dest"
  exit 0
fi

mkdir -p "$dest"
if [ ! -f "$dest/src/go.mod" ]; then
  echo "==> downloading the ${module}@${OPENKRUISE_VERSION} module" >&2
  # Outside any module, `go mod download` fetches exactly the named version; -json names the
  # read-only directory it unpacked to, copied here so the build can write go.sum updates.
  info=$(cd "$dest" && GONOSUMDB=$module GO111MODULE=on go mod download -json "${module}@${OPENKRUISE_VERSION}")
  field() { printf '%s\n' "$info" | sed -n "s/^[[:space:]]*\"$1\": \"\\(.*\\)\",*\$/\\1/p"; }
  dir=$(field Dir)
  sum=$(field Sum)
  origin=$(field Hash)
  if [ -z "$dir" ] || [ ! -f "$dir/go.mod" ]; then
    echo "!! go mod download did not give the module's directory:" >&2
    printf '%s\n' "$info" >&2
    exit 1
  fi
  [ "$sum" = "$OPENKRUISE_SUM" ] || {
    echo "!! ${module}@${OPENKRUISE_VERSION} has hash $sum, expected $OPENKRUISE_SUM" >&2
    exit 1
  }
  rm -rf "$dest/src.tmp"
  cp -r "$dir" "$dest/src.tmp"
  chmod -R u+w "$dest/src.tmp"
  mv "$dest/src.tmp" "$dest/src"
  [ -n "$origin" ] && echo "$origin" >"$dest/commit"
fi

mkdir -p "$dest/bin"
cd "$dest/src"
echo "==> building OpenKruise ${OPENKRUISE_VERSION} manager and daemon (cold: several minutes)"
# As its Dockerfile: static binaries, no cgo. -trimpath keeps machine paths out of the binaries.
CGO_ENABLED=0 GONOSUMDB=$module GOFLAGS=-mod=mod go build -trimpath -ldflags "-s -w" -o "$dest/bin/manager.tmp" .
CGO_ENABLED=0 GONOSUMDB=$module GOFLAGS=-mod=mod go build -trimpath -ldflags "-s -w" -o "$dest/bin/daemon.tmp" ./cmd/daemon
mv "$dest/bin/manager.tmp" "$dest/bin/manager"
mv "$dest/bin/daemon.tmp" "$dest/bin/daemon"
is_pinned "$dest/bin/manager" || echo "!! note: the manager's embedded module version is not ${OPENKRUISE_VERSION}" >&2
touch "$dest/.complete"
built_from
echo "==> OpenKruise ${OPENKRUISE_VERSION} ready in $dest"
