#!/usr/bin/env bash
# Cluster DNS and the default StorageClass of the kind cluster, as the local cluster has them and
# from the same binaries (hack/build-addons.sh builds CoreDNS and rancher's local-path-provisioner
# from their Go modules), but as Pods: each binary becomes an image here (hack/oci_image.py, the way
# hack/build-images.sh makes Kruise-rs's), with a busybox image for the provisioner's helper Pods,
# pushed to the local registry; then kind/addons/{dns,storage}.yaml are applied and this waits
# until the cluster's DNS answers and `local-path` is the default StorageClass.
#
#   kind/addons.sh NODE     KUBECONFIG and DOCKER_HOST name the kind cluster and its engine;
#                           NODE is a node container to ask the DNS from (kind/up.sh calls this
#                           once the nodes are Ready; running it again changes nothing)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=hack/lib.sh
source "$here/hack/lib.sh"
cd "$here"

node=${1:?usage: kind/addons.sh NODE-CONTAINER}
[ -n "${KUBECONFIG:-}" ] || { echo "kind/addons.sh: KUBECONFIG must name the kind cluster" >&2; exit 1; }
k() { "$KRS_BIN_DIR/kubectl" "$@"; }
registry=$KRS_REGISTRY
# Where the provisioner puts volumes, on each node (inside the node container).
DATA_DIR=/var/local-path-provisioner

hack/build-addons.sh >&2

work="$KRS_DIR/kind/addon-images"
rm -rf "$work"
mkdir -p "$work"

# rootfs DIR BINARY: an image root with the binary in /usr/local/bin, the shared libraries it
# links against if it is not static (found with ldd), a passwd and group, and /tmp.
rootfs() {
  local dir=$1 bin=$2 lib
  mkdir -p "$dir/usr/local/bin" "$dir/etc" "$dir/tmp"
  chmod 1777 "$dir/tmp"
  install -m 0755 "$bin" "$dir/usr/local/bin/$(basename "$bin")"
  if ldd "$bin" >/dev/null 2>&1; then
    for lib in $(ldd "$bin" | awk '/=>/ {print $3} /^\s*\/lib/ {print $1}'); do
      mkdir -p "$dir$(dirname "$lib")"
      cp -L "$lib" "$dir$lib"
    done
  fi
  printf 'root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/:/sbin/nologin\n' >"$dir/etc/passwd"
  printf 'root:x:0:\nnobody:x:65534:\n' >"$dir/etc/group"
}

# push NAME TAG ENTRYPOINT LAYER...: pushes the image and prints its name by digest (the same
# inputs give the same digest, so a node never runs a stale image under a reused tag).
push() {
  local name=$1 tag=$2 entrypoint=$3 out digest l
  shift 3
  local layers=()
  for l in "$@"; do layers+=(--layer "$l"); done
  out=$(python3 hack/oci_image.py --registry "$registry" --name "kruise-rs/$name" --tag "$tag" \
    "${layers[@]}" --entrypoint "$entrypoint" --label "org.opencontainers.image.title=$name")
  digest=$(awk '{for (i = 1; i < NF; i++) if ($i == "manifest") print $(i + 1)}' <<<"$out")
  [ -n "$digest" ] || die kind "pushing kruise-rs/$name gave no digest: $out"
  echo "$registry/kruise-rs/$name@$digest"
}

log "kind add-ons: images of coredns $COREDNS_VERSION, local-path-provisioner $LOCAL_PATH_PROVISIONER_VERSION and a busybox helper"
rootfs "$work/coredns" "$KRS_BIN_DIR/coredns"
coredns_image=$(push coredns "$COREDNS_VERSION" '["/usr/local/bin/coredns"]' "$work/coredns")
rootfs "$work/provisioner" "$KRS_BIN_DIR/local-path-provisioner"
provisioner_image=$(push local-path-provisioner "$LOCAL_PATH_PROVISIONER_VERSION" \
  '["/usr/local/bin/local-path-provisioner"]' "$work/provisioner")
# The helper runs the ConfigMap's setup and teardown scripts with sh: Debian's static busybox and
# its applets, as hack/images.sh makes the test images.
busybox=$(command -v busybox) || die kind "busybox is missing (Debian: busybox-static)"
mkdir -p "$work/helper/bin" "$work/helper/tmp" "$work/helper/etc"
chmod 1777 "$work/helper/tmp"
install -m 0755 "$busybox" "$work/helper/bin/busybox"
for applet in $("$busybox" --list); do
  [ "$applet" = busybox ] || ln -sf busybox "$work/helper/bin/$applet"
done
printf 'root:x:0:0:root:/root:/bin/sh\n' >"$work/helper/etc/passwd"
printf 'root:x:0:\n' >"$work/helper/etc/group"
busybox_version=$("$busybox" 2>&1 | sed -n '1s/^BusyBox v\([0-9.]*\).*/\1/p')
helper_image=$(push local-path-helper "busybox-${busybox_version:-unknown}" '["/bin/sh"]' "$work/helper")
rm -rf "$work"

# The kubelet's clusterDNS (kind/kubeadm: the 10th address of the Service range) and domain.
kubelet_config=$(k -n kube-system get configmap kubelet-config -o jsonpath='{.data.kubelet}')
dns_ip=$(awk '/^clusterDNS:/ {getline; sub(/^[ -]+/, ""); print; exit}' <<<"$kubelet_config")
domain=$(awk '/^clusterDomain:/ {print $2; exit}' <<<"$kubelet_config")
if [ -z "$dns_ip" ] || [ -z "$domain" ]; then die kind "no clusterDNS or clusterDomain in the kubelet's configuration"; fi

render() { # FILE
  sed -e "s|@DNS_IP@|$dns_ip|g" -e "s|@CLUSTER_DOMAIN@|$domain|g" -e "s|@DATA_DIR@|$DATA_DIR|g" \
    -e "s|@COREDNS_IMAGE@|$coredns_image|g" -e "s|@PROVISIONER_IMAGE@|$provisioner_image|g" \
    -e "s|@HELPER_IMAGE@|$helper_image|g" "kind/addons/$1"
}
config_sha=$(render dns.yaml | sha256sum | cut -c1-16)

# What the add-ons' Pods say, when they do not come up.
explain() {
  warn "kind add-ons: $*; their Pods, logs and Events follow"
  k -n kube-system get pods -o wide >&2 || true
  k -n kube-system describe pods -l k8s-app=kube-dns >&2 || true
  k -n kube-system describe pods -l app=local-path-provisioner >&2 || true
  k -n kube-system logs deploy/coredns --tail 40 >&2 || true
  k -n kube-system logs deploy/local-path-provisioner --tail 40 >&2 || true
  k -n kube-system get events --sort-by=.lastTimestamp 2>/dev/null | tail -30 >&2 || true
  exit 1
}

log "kind add-ons: CoreDNS behind kube-dns ($dns_ip), local-path-provisioner behind the default StorageClass"
render dns.yaml | sed "s|@CONFIG_SHA@|$config_sha|" | k apply -f - >/dev/null
render storage.yaml | k apply -f - >/dev/null
# kind's own default class: without a storage manifest in the node image, kind creates `standard`
# for kubernetes.io/host-path, which nothing here serves; local-path is the default instead.
if [ "$(k get storageclass standard -o jsonpath='{.provisioner}' 2>/dev/null)" = kubernetes.io/host-path ]; then
  k delete storageclass standard >/dev/null
fi
k -n kube-system rollout status deployment/coredns --timeout 180s >&2 || explain "CoreDNS is not Ready"
k -n kube-system rollout status deployment/local-path-provisioner --timeout 180s >&2 ||
  explain "local-path-provisioner is not running"

# The API server's own name answers through the kube-dns Service, asked from a node's network
# (its kube-proxy's rules included) with this machine's busybox.
api_ip=$(k get service kubernetes -o jsonpath='{.spec.clusterIP}')
node_pid=$(docker inspect -f '{{.State.Pid}}' "$node")
dns_answers() {
  nsenter -t "$node_pid" -n "$busybox" nslookup "kubernetes.default.svc.$domain" "$dns_ip" 2>/dev/null |
    grep -qE "^Address:?[[:space:]]+$api_ip\$"
}
deadline=$(($(date +%s) + 60))
until dns_answers; do
  [ "$(date +%s)" -lt "$deadline" ] || explain "kubernetes.default.svc.$domain does not resolve at $dns_ip"
  sleep 1
done

# The provisioner serves once its controller started; local-path is the one default class.
provisioner_started() {
  k -n kube-system logs deployment/local-path-provisioner 2>/dev/null | grep -q "Started provisioner controller"
}
deadline=$(($(date +%s) + 60))
until provisioner_started; do
  [ "$(date +%s)" -lt "$deadline" ] || explain "local-path-provisioner did not start its controller"
  sleep 1
done
defaults=$(k get storageclass -o jsonpath='{range .items[?(@.metadata.annotations.storageclass\.kubernetes\.io/is-default-class=="true")]}{.metadata.name}{"\n"}{end}')
[ "$defaults" = local-path ] || explain "the default StorageClass is not local-path alone: ${defaults:-none}"
log "kind add-ons ready: DNS answers at $dns_ip, default StorageClass local-path ($DATA_DIR on each node)"
