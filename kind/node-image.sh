#!/usr/bin/env bash
# Builds Kruise-rs's kind node image on this machine, pulling nothing from an image registry: a
# Debian root file system made by debootstrap (Debian packages only), the Kubernetes binaries
# hack/build-k8s.sh builds, and the control-plane images made from those same binaries, imported
# into the node's containerd the way `kind build node-image` does (not unpacked, pinned).
#
#   kind/node-image.sh      prints the image name; builds it unless the engine has it already
#
# The tag carries the Kubernetes version and a hash of this script and kind/node/, so a change to
# either builds a new image; the engine's data (kind/engine.sh) keeps it between runs.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=hack/lib.sh
source "$here/hack/lib.sh"

"$here/kind/engine.sh" up >&2
eval "$("$here/kind/engine.sh" env)"
"$here/hack/build-k8s.sh" kubeadm >&2

# Packages of the node: what systemd, containerd, the kubelet, kubeadm and kube-proxy need.
PACKAGES=systemd,systemd-sysv,dbus,containerd,runc,iptables,conntrack,ethtool,socat,kmod,iproute2,ca-certificates,mount,procps,containernetworking-plugins,libseccomp2,pigz,util-linux,ebtables

# The images kubeadm's static Pods and add-ons name for this Kubernetes version; etcd and pause
# are tagged as kubeadm expects, whatever version of them we built (CoreDNS is not built: the
# cluster runs without kubeadm's DNS add-on, see kind/cluster.yaml).
kubeadm_images=$("$KRS_BIN_DIR/kubeadm" config images list --kubernetes-version "$K8S_VERSION")
ETCD_TAG=$(sed -n 's#^registry.k8s.io/etcd:##p' <<<"$kubeadm_images")
PAUSE_TAG=$(sed -n 's#^registry.k8s.io/pause:##p' <<<"$kubeadm_images")
if [ -z "$ETCD_TAG" ] || [ -z "$PAUSE_TAG" ]; then
  die kind "kubeadm names no etcd or pause image: $kubeadm_images"
fi

key=$(cat "$0" "$here"/kind/node/* | sha256sum | cut -c1-12)
base_image="kruise-rs/kind-base:$(echo "$PACKAGES" | sha256sum | cut -c1-12)"
node_image="kruise-rs/kind-node:${K8S_VERSION}-$key"
if docker image inspect "$node_image" >/dev/null 2>&1; then
  echo "$node_image"
  exit 0
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/kruise-kind-image.XXXXXX")
trap 'rm -rf "$work"' EXIT

if ! docker image inspect "$base_image" >/dev/null 2>&1; then
  log "kind node image: the Debian root file system (debootstrap, a few minutes the first time)"
  debootstrap --variant=minbase --include="$PACKAGES" bookworm "$work/rootfs" http://deb.debian.org/debian \
    >"$work/debootstrap.log" 2>&1 || { tail -20 "$work/debootstrap.log" >&2; die kind "debootstrap failed"; }
  # Debian enables containerd at install; the node's kubelet is enabled below.
  tar -C "$work/rootfs" -c . | docker import - "$base_image" >/dev/null
  rm -rf "$work/rootfs"
fi

build() { # tag context-dir: classic builder, nothing to pull (FROM scratch or a local image)
  DOCKER_BUILDKIT=0 docker build -q -t "$1" "$2" >/dev/null
}

log "kind node image: control-plane images from the binaries of $KRS_BIN_DIR"
mkdir -p "$work/images"
for c in kube-apiserver kube-controller-manager kube-scheduler etcd pause; do
  mkdir -p "$work/$c"
  case $c in
    etcd) cp "$KRS_BIN_DIR/etcd" "$work/$c/"; tag="registry.k8s.io/etcd:$ETCD_TAG" ;;
    pause) cp "$KRS_CACHE/pause-$(sha256sum "$here/hack/images/pause.c" | cut -c1-12)" "$work/$c/pause"; tag="registry.k8s.io/pause:$PAUSE_TAG" ;;
    *) cp "$KRS_BIN_DIR/$c" "$work/$c/"; tag="registry.k8s.io/$c:$K8S_VERSION" ;;
  esac
  if [ "$c" = pause ]; then
    printf 'FROM scratch\nCOPY pause /pause\nENTRYPOINT ["/pause"]\n' >"$work/$c/Dockerfile"
  else
    printf 'FROM scratch\nENV PATH=/usr/local/bin:/usr/bin:/bin\nCOPY %s /usr/local/bin/%s\n' "$c" "$c" >"$work/$c/Dockerfile"
  fi
  build "$tag" "$work/$c"
  docker save "$tag" -o "$work/images/$c.tar"
done
# kube-proxy programs iptables: it needs the tools, so it is built on the node's own base.
mkdir -p "$work/kube-proxy"
cp "$KRS_BIN_DIR/kube-proxy" "$work/kube-proxy/"
printf 'FROM %s\nCOPY kube-proxy /usr/local/bin/kube-proxy\n' "$base_image" >"$work/kube-proxy/Dockerfile"
build "registry.k8s.io/kube-proxy:$K8S_VERSION" "$work/kube-proxy"
docker save "registry.k8s.io/kube-proxy:$K8S_VERSION" -o "$work/images/kube-proxy.tar"

log "kind node image: the node ($node_image)"
mkdir -p "$work/node"
cp "$here"/kind/node/* "$work/node/"
sed -i "s#@SANDBOX_IMAGE@#registry.k8s.io/pause:$PAUSE_TAG#" "$work/node/containerd.toml"
for b in kubeadm kubelet kubectl; do cp "$KRS_BIN_DIR/$b" "$work/node/"; done
cat >"$work/node/Dockerfile" <<DOCKERFILE
FROM $base_image
COPY kubeadm kubelet kubectl /usr/bin/
COPY entrypoint /usr/local/bin/entrypoint
COPY kubelet.service /etc/systemd/system/kubelet.service
COPY 10-kubeadm.conf /etc/systemd/system/kubelet.service.d/10-kubeadm.conf
COPY containerd.toml /etc/containerd/config.toml
COPY registry-hosts.toml /etc/containerd/certs.d/127.0.0.1:5000/hosts.toml
RUN mkdir -p /kind /etc/cni/net.d /etc/kubernetes/manifests && echo "$K8S_VERSION" > /kind/version \\
 && ln -sf /etc/systemd/system/kubelet.service /etc/systemd/system/multi-user.target.wants/kubelet.service \\
 && ln -sf /usr/lib/cni /opt/cni 2>/dev/null || true
ENV container=docker
STOPSIGNAL SIGRTMIN+3
ENTRYPOINT ["/usr/local/bin/entrypoint"]
DOCKERFILE
build "$node_image.stage" "$work/node"

# The images go into the node's containerd content store: a container of the stage image runs
# containerd alone (no systemd, no mounts needed since nothing is unpacked) and is committed.
cid=$(docker run -d --entrypoint containerd -v "$work/images:/images:ro" "$node_image.stage")
wait_for kind 30 docker exec "$cid" ctr version
for t in "$work"/images/*.tar; do
  docker exec "$cid" ctr --namespace=k8s.io images import --label=io.cri-containerd.pinned=pinned \
    --all-platforms --no-unpack --digests "/images/$(basename "$t")" >/dev/null
done
docker exec "$cid" ctr --namespace=k8s.io images ls -q >&2
docker stop -t 5 "$cid" >/dev/null
docker commit --change 'ENTRYPOINT ["/usr/local/bin/entrypoint"]' "$cid" "$node_image" >/dev/null
docker rm "$cid" >/dev/null
docker rmi "$node_image.stage" >/dev/null
echo "$node_image"
