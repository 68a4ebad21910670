#!/usr/bin/env bash
# Builds the local cluster's add-ons from their Go modules (tools/coredns, tools/local-path-provisioner,
# tools/metrics-server, tools/csi, tools/csi-hostpath) into the versioned binary cache next to the
# Kubernetes binaries: CoreDNS (cluster DNS), rancher's local-path-provisioner (the default
# StorageClass), metrics-server (the Metrics API behind `kubectl top`), and expandable CSI storage
# (a small host-path driver with the Kubernetes CSI provisioner and resizer). hack/cluster.sh up calls this; a
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
build csi-provisioner github.com/kubernetes-csi/external-provisioner/v5 "$CSI_PROVISIONER_VERSION" \
  csi github.com/kubernetes-csi/external-provisioner/v5/cmd/csi-provisioner
build csi-resizer github.com/kubernetes-csi/external-resizer "$CSI_RESIZER_VERSION" \
  csi github.com/kubernetes-csi/external-resizer/cmd/csi-resizer
# Our own driver has no module version to pin: rebuilt when its source's checksum changes.
csi_sum=$(cat "$here"/tools/csi-hostpath/{main.go,go.mod,go.sum} | sha256sum | cut -d' ' -f1)
if [ "$(cat "$bin/csi-hostpath.sum" 2>/dev/null)" != "$csi_sum" ]; then
  rm -f "$bin/csi-hostpath"
fi
build csi-hostpath github.com/container-storage-interface/spec v1.11.0 csi-hostpath .
echo "$csi_sum" >"$bin/csi-hostpath.sum"
echo "==> cluster add-ons (coredns ${COREDNS_VERSION}, local-path-provisioner ${LOCAL_PATH_PROVISIONER_VERSION}, metrics-server ${METRICS_SERVER_VERSION}, CSI provisioner ${CSI_PROVISIONER_VERSION} and resizer ${CSI_RESIZER_VERSION}) ready in $bin"
