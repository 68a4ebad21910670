#!/usr/bin/env bash
# For users with Docker: a kind cluster (kind/cluster.yaml) with a local registry, Kruise-rs built
# with Docker, loaded into the nodes and installed from the very same deploy/ the local cluster's
# in-cluster e2e proves. Then, with --e2e, runs the e2e suite against it.
#   kind/up.sh [--e2e]      kind/down.sh removes it all.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
for tool in docker kind kubectl cargo python3; do
  command -v "$tool" >/dev/null || { echo "kind/up.sh needs $tool on PATH" >&2; exit 1; }
done
cluster=kruise-rs
registry_port=5001

if [ "$(docker inspect -f '{{.State.Running}}' kind-registry 2>/dev/null || true)" != true ]; then
  echo "==> starting the kind-registry container on 127.0.0.1:$registry_port"
  docker run -d --restart=always -p "127.0.0.1:$registry_port:5000" --name kind-registry registry:2 >/dev/null
fi
if ! kind get clusters | grep -qx "$cluster"; then
  echo "==> creating kind cluster $cluster"
  kind create cluster --config kind/cluster.yaml --wait 120s
fi
docker network connect kind kind-registry 2>/dev/null || true
export KUBECONFIG="${KUBECONFIG:-$HOME/.kube/config}"
kubectl config use-context "kind-$cluster" >/dev/null

echo "==> test images (no Docker build needed: hack/images.sh pushes over HTTP)"
KRS_REGISTRY="127.0.0.1:$registry_port" hack/images.sh

echo "==> building Kruise-rs images with Docker and loading them into the nodes"
docker build --target manager -t kruise-rs/kruise-manager:dev .
docker build --target daemon -t kruise-rs/kruise-daemon:dev .
kind load docker-image --name "$cluster" kruise-rs/kruise-manager:dev kruise-rs/kruise-daemon:dev

echo "==> installing deploy/"
kubectl apply --server-side --force-conflicts -k deploy/
kubectl -n kruise-system rollout status deployment/kruise-controller-manager --timeout=300s
kubectl -n kruise-system rollout status daemonset/kruise-daemon --timeout=300s
kubectl wait --for condition=established --timeout=60s -f deploy/crds/

if [ "${1:-}" = --e2e ]; then
  echo "==> running the e2e suite against kind"
  KRUISE_E2E_REGISTRY="localhost:$registry_port" KRUISE_E2E_INCLUSTER=1 \
    cargo test -p kruise-e2e -- --test-threads 3
fi
echo "==> kind cluster $cluster runs Kruise-rs (kubectl context kind-$cluster)"
