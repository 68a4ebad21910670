#!/usr/bin/env bash
# Builds the pinned upstream Kubernetes binaries and etcd from their Go modules (tools/) into a
# cache outside the work tree, keyed by version, so later starts and CI on this machine reuse them.
#   hack/build-k8s.sh [EXTRA...]   EXTRA: more commands of k8s.io/kubernetes/cmd, e.g. kubeadm
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=hack/lib.sh
source "$here/hack/lib.sh"

bin="$KRS_BIN_DIR"
mkdir -p "$bin"
# The local cluster's binaries, plus any named on the command line (kind/node-image.sh asks for
# kubeadm, which only a kind node needs).
k8s_bins=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl "$@")

missing=()
for b in "${k8s_bins[@]}"; do [ -x "$bin/$b" ] || missing+=("$b"); done
if [ ${#missing[@]} -gt 0 ]; then
  echo "==> building Kubernetes ${K8S_VERSION} (${missing[*]}) from its Go module; a cold build takes 20-40 minutes on 2 cores"
  minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
  ld="-s -w"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld+=" -X $p.gitVersion=${K8S_VERSION} -X $p.gitMajor=1 -X $p.gitMinor=${minor}"
    ld+=" -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
  done
  pkgs=()
  for b in "${missing[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$b"); done
  tmp=$(mktemp -d "$bin/.build.XXXXXX")
  CGO_ENABLED=0 go_build_progress "Kubernetes ${K8S_VERSION}" "$here/tools/k8s" \
    -trimpath -ldflags "$ld" -o "$tmp/" -- "${pkgs[@]}"
  for b in "${missing[@]}"; do mv "$tmp/$b" "$bin/$b"; done
  rmdir "$tmp"
fi
if [ ! -x "$bin/etcd" ]; then
  echo "==> building etcd ${ETCD_VERSION} from its Go module"
  tmp=$(mktemp -d "$bin/.build.XXXXXX")
  CGO_ENABLED=0 go_build_progress "etcd ${ETCD_VERSION}" "$here/tools/etcd" \
    -trimpath -ldflags "-s -w" -o "$tmp/etcd" -- .
  mv "$tmp/etcd" "$bin/etcd"
  rmdir "$tmp"
fi
echo "==> Kubernetes binaries ready in $bin"
