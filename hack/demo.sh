#!/usr/bin/env bash
# make demo: from a fresh machine to an in-place rollout you can watch. Installs what is missing,
# brings up the local cluster, installs Kruise-rs in it from deploy/, creates the demo CloneSet
# (examples/demo-cloneset.yaml), changes both images, shows the rollout live, and checks that it
# really happened in place. A failure names the step and shows the log lines that explain it.
set -Eeuo pipefail
# shellcheck source=hack/lib.sh
source "$(dirname "$0")/lib.sh"
cd "$KRS_ROOT"

STEPS=8
step_no=0
step_name=""
step() {
  step_no=$1
  step_name=$2
  log "step $step_no/$STEPS: $step_name"
}
k() { "$KRS_BIN_DIR/kubectl" "$@"; }

# The log lines that explain a failure of the current step.
explain() {
  local f
  case $step_no in
    3)
      for f in containerd etcd kube-apiserver kubelet registry; do
        [ -f "$KRS_LOGS/$f.log" ] || continue
        printf '!!  last lines of .cluster/logs/%s.log:\n' "$f" >&2
        tail -n 8 "$KRS_LOGS/$f.log" | sed 's/^/    /' >&2
      done
      ;;
    5)
      k -n kruise-system get pods -o wide >&2 || true
      k -n kruise-system logs deployment/kruise-controller-manager --tail 20 >&2 || true
      k -n kruise-system get events --sort-by .lastTimestamp 2>/dev/null | tail -n 10 >&2 || true
      ;;
    6 | 7 | 8)
      k get clonesets.apps.kruise.io demo -o wide >&2 || true
      k get pods -l app=demo -o wide >&2 || true
      k get events --sort-by .lastTimestamp 2>/dev/null | tail -n 15 >&2 || true
      k -n kruise-system logs deployment/kruise-controller-manager --tail 20 >&2 || true
      ;;
  esac
}
on_error() {
  local rc=$?
  trap - ERR
  printf '\n!!  make demo failed in step %s/%s (%s), exit code %s\n' "$step_no" "$STEPS" "$step_name" "$rc" >&2
  explain
  printf '!!  fix the cause and run make demo again: finished steps are skipped quickly.\n' >&2
  exit "$rc"
}
trap on_error ERR

step 1 "installing missing packages"
hack/install-deps.sh
step 2 "building Kubernetes from source if it is not cached (first time: 20-40 minutes, progress every 30 s)"
hack/build-k8s.sh
step 3 "starting the local cluster"
hack/cluster.sh up
export KUBECONFIG="$KRS_DIR/kubeconfig"
step 4 "building Kruise-rs (first time: several minutes)"
cargo build -p kubectl-kruise --bins
target=${CARGO_TARGET_DIR:-$KRS_ROOT/target}
mkdir -p "$KRS_DIR/bin"
ln -sf "$target/debug/kubectl-kruise" "$KRS_DIR/bin/kubectl-kruise"
ln -sf "$KRS_BIN_DIR/kubectl" "$KRS_DIR/bin/kubectl"
export PATH="$KRS_DIR/bin:$PATH"
step 5 "building the manager and daemon images and installing Kruise-rs in the cluster"
hack/install.sh

step 6 "creating the demo CloneSet (4 Pods: app, then its sidecar) and waiting until it is ready"
k delete clonesets.apps.kruise.io demo --ignore-not-found --wait=true >/dev/null
k wait --for=delete pod -l app=demo --timeout=120s >/dev/null 2>&1 || true
k apply -f examples/demo-cloneset.yaml
kubectl-kruise rollout status clone/demo --timeout 5m
before="$KRS_DIR/demo-before.json"
k get pods -l app=demo -o json >"$before"

step 7 "updating both images in place, two Pods at a time: testapp v1 -> v2, sidecar v1 -> v2"
kubectl-kruise set image clone/demo app="$KRS_REGISTRY/kruise-rs/testapp:v2" sidecar="$KRS_REGISTRY/kruise-rs/sidecar:v2"
if [ -t 1 ] && [ -z "${CI:-}" ]; then
  kubectl-kruise rollout watch clone/demo --exit-when-done
else
  kubectl-kruise rollout status clone/demo --timeout 5m
fi

step 8 "checking that the update happened in place"
k get pods -l app=demo -o json | python3 hack/demo_check.py "$before" "$KRS_REGISTRY/kruise-rs/testapp:v2" "$KRS_REGISTRY/kruise-rs/sidecar:v2"
trap - ERR

cat <<MSG

The demo CloneSet was updated in place: same Pods, same UIDs, each container restarted once, the
app before its sidecar. Go on by hand:
  export KUBECONFIG=$KUBECONFIG PATH=$KRS_DIR/bin:\$PATH
  kubectl kruise rollout watch clone/demo            # the live view (q quits, ? lists the keys)
  kubectl kruise set image clone/demo app=$KRS_REGISTRY/kruise-rs/testapp:v3
  kubectl kruise rollout partition clone/demo 2      # hold two Pods back on the old revision
  kubectl kruise rollout promote clone/demo --full
  kubectl kruise rollout undo clone/demo
  kubectl kruise recreate-container <pod> -c app     # restart one container in place
Tear down:
  make cluster-down
MSG
