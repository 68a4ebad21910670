#!/usr/bin/env bash
# Builds OpenKruise (the Go original, for the side-by-side benchmarks hack/bench-openkruise.sh
# and hack/scale-cluster.sh) into the cache next to the Kubernetes binaries.
#
# The baseline is OpenKruise v1.9.0 AS RELEASED: git tag v1.9.0 = commit b1e001a95. Give the
# tag's source and this builds it:
#
#   OPENKRUISE_SRC=GITDIR hack/build-openkruise.sh     a clone holding the tag (bare or not);
#                                                      OPENKRUISE_REF picks the ref (v1.9.0)
#   OPENKRUISE_SRC=TREE OPENKRUISE_COMMIT=SHA hack/build-openkruise.sh
#                                                      an unpacked tree of that commit
#
# On a fresh machine (the benchmark is not part of CI) get the tag's tree with:
#   git clone --bare --filter=blob:none https://github.com/openkruise/kruise DIR  (or any clone)
#   git -C DIR rev-parse v1.9.0^{commit}    # must print b1e001a957ce62bf87894d0212f5e704a8e9c2b4
#   OPENKRUISE_SRC=DIR hack/build-openkruise.sh
# The tag's go.mod dependencies come from the Go module proxy as usual, checked against the
# tag's go.sum. Result (the tag's build never overwrites the module build below):
#
#   $KRS_CACHE/openkruise-tag-v1.9.0/bin/{manager,daemon}   release-style builds
#   $KRS_CACHE/openkruise-tag-v1.9.0/src/config/            its CRDs and webhook configs
#   $KRS_CACHE/openkruise-tag-v1.9.0/commit                 the commit built (full SHA)
#
# Without OPENKRUISE_SRC, and no tag build cached, it falls back to the Go module at the
# pinned version (the older baseline) in $KRS_CACHE/openkruise-v1.9.0. That is NOT the
# release: the module proxy's "v1.9.0" records its origin as commit 4c2bbcec, a master commit
# 49 commits past the release branch's split (it stores seven kinds as v1beta1; the release
# stores them as v1alpha1), and the proxy does not serve the tag's commit. Kruise-rs's tests
# compare with the release through api/tests/data/openkruise-v1.9.0.json, which
# hack/openkruise-facts.py reads from the tag, never with either build.
#
# `hack/build-openkruise.sh --dir` prints the directory the benchmarks should use (the tag's
# build when it is complete, else the module's). Binaries are what the Dockerfile builds
# (`go build .` for the manager, ./cmd/daemon). A cold build downloads the modules and compiles
# for about 5 to 15 minutes on 2 cores; after that this prints where the binaries are and exits.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=hack/versions.sh
source "$here/hack/versions.sh"

OPENKRUISE_VERSION=${OPENKRUISE_VERSION:-v1.9.0}
OPENKRUISE_REF=${OPENKRUISE_REF:-$OPENKRUISE_VERSION}
# The release's commit; a tag build of another commit says so and is kept apart.
TAG_COMMIT=b1e001a957ce62bf87894d0212f5e704a8e9c2b4
tag_dest="$KRS_CACHE/openkruise-tag-$OPENKRUISE_REF"
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

complete() { [ -x "$1/bin/manager" ] && [ -x "$1/bin/daemon" ] && [ -d "$1/src/config/crd" ] && [ -f "$1/.complete" ]; }

case ${1:-} in
  "") ;;
  --dir)
    if complete "$tag_dest"; then echo "$tag_dest"; else echo "$dest"; fi
    exit 0
    ;;
  *) echo "usage: $0 [--dir]" >&2; exit 2 ;;
esac

# Builds the tree in $tag_dest/src (the tag's own go.mod is the main module).
build_tree() {
  mkdir -p "$tag_dest/bin"
  cd "$tag_dest/src"
  echo "==> building OpenKruise $OPENKRUISE_REF (commit $(cat "$tag_dest/commit")) manager and daemon (cold: several minutes)"
  CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "-s -w" -o "$tag_dest/bin/manager.tmp" .
  CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "-s -w" -o "$tag_dest/bin/daemon.tmp" ./cmd/daemon
  mv "$tag_dest/bin/manager.tmp" "$tag_dest/bin/manager"
  mv "$tag_dest/bin/daemon.tmp" "$tag_dest/bin/daemon"
  touch "$tag_dest/.complete"
}

tag_built_from() {
  local c
  c=$(cat "$tag_dest/commit")
  if [ "$c" = "$TAG_COMMIT" ]; then
    echo "==> built from git tag v1.9.0 = commit $c (the release)"
  else
    echo "==> built from $OPENKRUISE_REF = commit $c (NOT the release tag v1.9.0 = $TAG_COMMIT)"
  fi
  echo "==> OpenKruise $OPENKRUISE_REF ready in $tag_dest"
}

if complete "$tag_dest"; then
  tag_built_from
  exit 0
fi

if [ -n "${OPENKRUISE_SRC:-}" ]; then
  [ -e "$OPENKRUISE_SRC" ] || { echo "!! OPENKRUISE_SRC=$OPENKRUISE_SRC does not exist" >&2; exit 1; }
  mkdir -p "$tag_dest"
  if [ ! -f "$tag_dest/src/go.mod" ]; then
    rm -rf "$tag_dest/src.tmp"
    mkdir -p "$tag_dest/src.tmp"
    if commit=$(git -C "$OPENKRUISE_SRC" rev-parse --verify -q "$OPENKRUISE_REF^{commit}" 2>/dev/null); then
      echo "==> unpacking $OPENKRUISE_REF = commit $commit from $OPENKRUISE_SRC" >&2
      git -C "$OPENKRUISE_SRC" archive "$commit" | tar -x -C "$tag_dest/src.tmp"
    elif [ -f "$OPENKRUISE_SRC/go.mod" ] && [ -n "${OPENKRUISE_COMMIT:-}" ]; then
      commit=$OPENKRUISE_COMMIT
      cp -r "$OPENKRUISE_SRC/." "$tag_dest/src.tmp"
    else
      echo "!! OPENKRUISE_SRC must be a git clone holding $OPENKRUISE_REF, or a tree with OPENKRUISE_COMMIT set" >&2
      exit 1
    fi
    grep -q '^module github.com/openkruise/kruise$' "$tag_dest/src.tmp/go.mod" ||
      { echo "!! $OPENKRUISE_SRC is not OpenKruise's source" >&2; exit 1; }
    echo "$commit" >"$tag_dest/commit"
    mv "$tag_dest/src.tmp" "$tag_dest/src"
  fi
  build_tree
  tag_built_from
  exit 0
fi
echo "==> OPENKRUISE_SRC not set: building the module proxy's copy (not the release; see the header)" >&2

if complete "$dest"; then
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
