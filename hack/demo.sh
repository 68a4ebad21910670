#!/usr/bin/env bash
# make demo: from a fresh machine to an in-place rollout you can watch. Installs what is missing,
# brings up the local cluster, installs Kruise-rs in it from deploy/, creates the demo CloneSet
# (examples/demo-cloneset.yaml), changes both images, and shows the rollout live.
set -euo pipefail
# shellcheck source=hack/lib.sh
source "$(dirname "$0")/lib.sh"
cd "$KRS_ROOT"

step() { log "step $1/7: $2"; }
step 1 "installing missing packages"
hack/install-deps.sh
step 2 "building Kubernetes from source if it is not cached (first time: 20-40 minutes)"
hack/build-k8s.sh
step 3 "starting the local cluster"
hack/cluster.sh up
export KUBECONFIG="$KRS_DIR/kubeconfig"
k() { "$KRS_BIN_DIR/kubectl" "$@"; }
step 4 "building Kruise-rs and its images (first time: several minutes)"
cargo build -p kubectl-kruise --bins
step 5 "installing Kruise-rs in the cluster"
hack/install.sh
target=${CARGO_TARGET_DIR:-$KRS_ROOT/target}
mkdir -p "$KRS_DIR/bin"
ln -sf "$target/debug/kubectl-kruise" "$KRS_DIR/bin/kubectl-kruise"
export PATH="$KRS_DIR/bin:$PATH"

step 6 "creating the demo CloneSet and waiting for its 4 Pods"
k delete clonesets.apps.kruise.io demo --ignore-not-found --wait=true >/dev/null
k apply -f examples/demo-cloneset.yaml
kubectl-kruise rollout status clone/demo --timeout 5m

step 7 "updating both images in place: testapp v1 -> v2, sidecar v1 -> v2"
kubectl-kruise set image clone/demo app="$KRS_REGISTRY/kruise-rs/testapp:v2" sidecar="$KRS_REGISTRY/kruise-rs/sidecar:v2"
if [ -t 1 ] && [ -z "${CI:-}" ]; then
  kubectl-kruise rollout watch clone/demo
else
  kubectl-kruise rollout status clone/demo --timeout 5m
fi
k get pods -l app=demo -o custom-columns='POD:.metadata.name,UID:.metadata.uid,RESTARTS:.status.containerStatuses[*].restartCount,IMAGES:.status.containerStatuses[*].image'

cat <<MSG

The demo CloneSet was updated in place: same Pods (UIDs above), each container restarted once.
Go on by hand:
  export KUBECONFIG=$KUBECONFIG PATH=$KRS_DIR/bin:\$PATH
  kubectl kruise rollout watch clone/demo            # the live view (q quits)
  kubectl kruise set image clone/demo app=$KRS_REGISTRY/kruise-rs/testapp:v3
  kubectl kruise rollout partition clone/demo 2      # hold back two Pods
  kubectl kruise rollout undo clone/demo
  kubectl kruise recreate-container <pod> -c app --wait
Tear down:
  make cluster-down
MSG
