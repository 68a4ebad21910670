#!/usr/bin/env bash
# A kind cluster running Kruise-rs, built on this machine without pulling anything: kind (from its
# Go module), a Docker engine of our own if none runs (kind/engine.sh), a node image built here
# (kind/node-image.sh), the local registry for every image, cluster DNS and a default StorageClass
# (kind/addons.sh), and Kruise-rs installed from the very same deploy/ that the local cluster's
# behaviour suite proves (hack/install.sh).
#
#   kind/up.sh          create the cluster (idempotent), install Kruise-rs
#   kind/up.sh --e2e    and then run the behaviour suite against it (hack/test.sh smoke suite serial)
#   kind/down.sh        removes everything kind/up.sh made
#
# KUBECONFIG of the cluster: .cluster/kind/kubeconfig. With DOCKER_HOST set, that engine is used
# instead of our own (kind/engine.sh is then not started).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=hack/lib.sh
source "$here/hack/lib.sh"
cd "$here"

CLUSTER=kruise-rs
# The nodes' network: created here with a fixed subnet, so that the registry's address on it
# (the bridge's own address) is known to the node image.
NETWORK=kruise-kind
SUBNET=172.30.0.0/24
GATEWAY=172.30.0.1
KIND_DIR="$KRS_DIR/kind"
KRS_PIDS="$KIND_DIR/pids"
KRS_LOGS="$KIND_DIR/logs"
export KRS_PIDS KRS_LOGS
mkdir -p "$KIND_DIR" "$KRS_PIDS" "$KRS_LOGS"
KIND_KUBECONFIG="$KIND_DIR/kubeconfig"

[ "$(id -u)" = 0 ] || { echo "kind/up.sh runs a Docker engine and containers and needs root" >&2; exit 1; }
hack/install-deps.sh kind
for tool in docker go cargo python3 socat; do
  command -v "$tool" >/dev/null || { echo "kind/up.sh needs $tool on PATH (hack/install-deps.sh installs the Debian ones)" >&2; exit 1; }
done

own_engine=$(kind/engine.sh env)
if [ -z "${DOCKER_HOST:-}" ] || [ "export DOCKER_HOST=$DOCKER_HOST" = "$own_engine" ]; then
  kind/engine.sh up
  eval "$own_engine"
fi
export DOCKER_HOST
hack/build-k8s.sh kubeadm
hack/build-kind.sh
kind_bin="$KRS_BIN_DIR/kind"

# The local registry (hack/cluster.sh runs it); alone if the local cluster is down.
if ! curl -sf "http://$KRS_REGISTRY/v2/" >/dev/null; then
  log "kind: starting the image registry on $KRS_REGISTRY"
  registry_config "$KIND_DIR/registry/config.yml"
  start kind-registry docker-registry serve "$KIND_DIR/registry/config.yml"
  wait_for kind-registry 30 curl -sf "http://$KRS_REGISTRY/v2/"
  hack/images.sh >"$KRS_LOGS/images.log" 2>&1 || die images "building or pushing the test images failed"
fi

if ! docker network inspect "$NETWORK" >/dev/null 2>&1; then
  docker network create --driver bridge --subnet "$SUBNET" --gateway "$GATEWAY" "$NETWORK" >/dev/null
fi
# The nodes pull 127.0.0.1:5000/... (the names deploy/ and the tests use) from the registry's
# address on their network (the node image's containerd says so); socat carries that address to
# the registry, which listens on loopback only.
if ! pid_alive kind-registry-proxy; then
  start kind-registry-proxy socat "TCP-LISTEN:${KRS_REGISTRY##*:},bind=$GATEWAY,fork,reuseaddr" "TCP:$KRS_REGISTRY"
  wait_for kind-registry-proxy 10 curl -sf "http://$GATEWAY:${KRS_REGISTRY##*:}/v2/"
fi

node_image=$(kind/node-image.sh)

# kind creates its nodes with --privileged; an engine that cannot give every capability refuses
# that (this machine lacks CAP_SYS_RESOURCE), and kind/bin/docker asks for what it can give.
kind_path=$PATH
if ! docker run --rm --privileged --entrypoint /bin/true "$node_image" >/dev/null 2>&1; then
  log "kind: this engine refuses privileged containers; nodes get every capability but CAP_SYS_RESOURCE (kind/bin/docker)"
  KRUISE_KIND_DOCKER=$(command -v docker)
  export KRUISE_KIND_DOCKER
  kind_path="$here/kind/bin:$PATH"
fi
kind() { PATH=$kind_path KIND_EXPERIMENTAL_DOCKER_NETWORK=$NETWORK "$kind_bin" "$@"; }

if ! kind get clusters 2>/dev/null | grep -qx "$CLUSTER"; then
  log "kind: creating cluster $CLUSTER from $node_image"
  kind create cluster --name "$CLUSTER" --image "$node_image" --config kind/cluster.yaml \
    --kubeconfig "$KIND_KUBECONFIG" --retain
fi
kind get kubeconfig --name "$CLUSTER" >"$KIND_KUBECONFIG"
export KUBECONFIG=$KIND_KUBECONFIG
k() { "$KRS_BIN_DIR/kubectl" "$@"; }

# Pod networking instead of kind's default CNI (an image we cannot pull): each node bridges its
# own Pod range and routes every other node's range to that node.
log "kind: Pod network (a bridge per node, routes between nodes)"
# The controller-manager gives each node its Pod range shortly after the node registers.
node_ranges() {
  k get nodes -o jsonpath='{range .items[*]}{.metadata.name} {.spec.podCIDR} {.status.addresses[?(@.type=="InternalIP")].address}{"\n"}{end}'
}
all_ranges_given() { node_ranges | awk 'NF != 3 {bad = 1} END {exit bad}'; }
wait_for kind 120 all_ranges_given
nodes=$(node_ranges)
while read -r name cidr _; do
  docker exec -i "$name" sh -c 'mkdir -p /etc/cni/net.d && cat > /etc/cni/net.d/10-kruise-kind.conflist' <<JSON
{
  "cniVersion": "1.0.0",
  "name": "kruise-kind",
  "plugins": [
    {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "$cidr"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
JSON
  while read -r other ocidr oip; do
    [ "$other" = "$name" ] || docker exec "$name" ip route replace "$ocidr" via "$oip"
  done <<<"$nodes"
done <<<"$nodes"
k wait --for condition=Ready node --all --timeout 180s >/dev/null

# Cluster DNS and the default StorageClass, as the local cluster has them: Pods of images built here.
kind/addons.sh "$CLUSTER-control-plane"

log "kind: installing Kruise-rs from deploy/"
if [ "${1:-}" = --e2e ]; then
  # As `make test`'s install stage: unoptimised images (PROFILE=dev unless set), built from the
  # same debug binaries the suite's build stage makes. `kind/up.sh` alone ships release ones.
  PROFILE=${PROFILE:-dev} hack/install.sh
else
  hack/install.sh
fi

if [ "${1:-}" = --e2e ]; then
  log "kind: the behaviour suite (smoke gate, suite, serial phase)"
  # The same stages `make test` runs against the local cluster's install. The tests check Kruise's
  # reports against the node's runtime: its socket, seen through the node container's root.
  node_root=/proc/$(docker inspect -f '{{.State.Pid}}' "$CLUSTER-control-plane")/root
  # Servers a test runs itself (a webhook) are reached by the API server at the gateway.
  KUBECONFIG=$KIND_KUBECONFIG KRUISE_E2E_CRI_SOCKET="$node_root/run/containerd/containerd.sock" \
    KRUISE_E2E_HOST_ADDRESS=$GATEWAY hack/test.sh build smoke suite serial
fi
log "kind cluster $CLUSTER runs Kruise-rs: export KUBECONFIG=$KIND_KUBECONFIG"
