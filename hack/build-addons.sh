#!/usr/bin/env bash
# Builds the local cluster's add-ons from their Go modules (tools/coredns, tools/local-path-provisioner,
# tools/metrics-server) into the versioned binary cache next to the Kubernetes binaries: CoreDNS
# (cluster DNS), rancher's local-path-provisioner (the default StorageClass) and metrics-server (the
# Metrics API behind `kubectl top`). hack/cluster.sh up calls this; a
# binary whose embedded module version is not the pinned one is rebuilt.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=hack/lib.sh
source "$here/hack/lib.sh"

bin="$KRS_BIN_DIR"
mkdir -p "$bin"

# is_pinned BINARY MODULE VERSION: the binary embeds MODULE at VERSION (read from the module
# information Go writes into every binary).
is_pinned() {
  go version -m "$1" 2>/dev/null | grep -qE "^[[:space:]]+(mod|dep)[[:space:]]+$2[[:space:]]+$3([[:space:]]|$)"
}

# build NAME MODULE VERSION TOOLDIR PACKAGE
build() {
  local name=$1 module=$2 version=$3 dir=$4 pkg=$5
  if [ -x "$bin/$name" ] && is_pinned "$bin/$name" "$module" "$version"; then
    return 0
  fi
  echo "==> building $name $version from its Go module; a cold build takes a few minutes on 2 cores"
  local tmp
  tmp=$(mktemp -d "$bin/.build.XXXXXX")
  CGO_ENABLED=0 go_build_progress "$name $version" "$here/tools/$dir" \
    -trimpath -ldflags "-s -w" -o "$tmp/$name" -- "$pkg"
  mv "$tmp/$name" "$bin/$name"
  rmdir "$tmp"
}

build coredns github.com/coredns/coredns "$COREDNS_VERSION" coredns .
build local-path-provisioner github.com/rancher/local-path-provisioner "$LOCAL_PATH_PROVISIONER_VERSION" \
  local-path-provisioner github.com/rancher/local-path-provisioner
build metrics-server sigs.k8s.io/metrics-server "$METRICS_SERVER_VERSION" \
  metrics-server sigs.k8s.io/metrics-server/cmd/metrics-server
echo "==> cluster add-ons (coredns ${COREDNS_VERSION}, local-path-provisioner ${LOCAL_PATH_PROVISIONER_VERSION}, metrics-server ${METRICS_SERVER_VERSION}) ready in $bin"
