#!/usr/bin/env bash
# Runs the end-to-end suite (the kruise-e2e crate) against a real cluster.
#
#   hack/e2e.sh              With KUBECONFIG set: against that cluster, which must already run
#                            Kruise-rs (make install), or with KRUISE_E2E_DEV=1 gets the manager and
#                            daemon as host processes. Without: brings up the local cluster, runs
#                            Kruise-rs on it in dev mode (hack/dev-up.sh), runs the suite, and
#                            brings it all down again.
#   hack/e2e.sh --cycle      the same, then proves cluster-down + cluster-up works twice in a row.
#   hack/e2e.sh --incluster  local cluster, Kruise-rs installed from deploy/ with images built here
#                            (hack/install.sh); runs the in-cluster subset, then uninstalls.
#   hack/e2e.sh --print-incluster-tests   names the test files of that subset
set -euo pipefail
# shellcheck source=hack/lib.sh
source "$(dirname "$0")/lib.sh"
cd "$KRS_ROOT"


# The in-cluster subset, run against the manager and daemon installed from deploy/ (release
# images): the CloneSet scenarios (manager + webhook), every duty of the daemon under its shipped
# RBAC (ContainerRecreateRequests, image pulls, runtime-containers-meta; daemon <-> API server
# through the Service address, as a user's cluster has it), the Pod webhook's namespace scope,
# RBAC and failover. The tests read KRUISE_E2E_INCLUSTER and never start host processes then.
INCLUSTER_NAMES=(cluster cloneset crr daemonset imagepull runtime_meta webhook_scope statefulset incluster sidecarset plugin_dev cli_kruise_history)
INCLUSTER_TESTS=()
for t in "${INCLUSTER_NAMES[@]}"; do INCLUSTER_TESTS+=(--test "$t"); done

mode=dev
cycle=false
case ${1:-} in
  --cycle) cycle=true ;;
  --incluster) mode=incluster ;;
  # kind/up.sh --e2e runs the same subset on a kind cluster.
  --print-incluster-tests) echo "${INCLUSTER_NAMES[*]}"; exit 0 ;;
  "") ;;
  *) echo "usage: $0 [--cycle|--incluster|--print-incluster-tests]" >&2; exit 2 ;;
esac

log "building Kruise-rs and the e2e suite"
# The suite drives the binaries (kubectl-kruise, and the manager and daemon in dev mode).
cargo build --workspace --bins
cargo test -p kruise-e2e --no-run

run_suite() {
  log "running the e2e suite against $KUBECONFIG"
  # A few tests at a time: they share one small node.
  # --no-fail-fast: a failing file does not hide how the others fare.
  cargo test -p kruise-e2e --no-fail-fast "$@" -- --test-threads "${E2E_THREADS:-3}"
}

# The test files run against the cluster under test: all but the kwok scale cluster's
# (run_kwok_suite) and, unless asked for, the in-cluster checks.
suite_tests() { # [incluster]
  local f name
  for f in e2e/tests/*.rs; do
    name=$(basename "$f" .rs)
    [[ " ${KWOK_TESTS[*]} " == *" $name "* ]] && continue
    [ "$name" != incluster ] || [ "${1:-}" = incluster ] || continue
    echo --test "$name"
  done
}
# Multi-node behaviour on the kwok scale cluster (hack/scale-cluster.sh: its own control plane,
# ports and state; shared, hence its lock). The tests start the manager they need (the debug
# build above) and stop it; the cluster is brought down only if this run brought it up.
KWOK_TESTS=(daemonset_kwok)
scale_up=false
run_kwok_suite() {
  local t args=() rc=0
  for t in "${KWOK_TESTS[@]}"; do args+=(--test "$t"); done
  exec 9>/tmp/kruise-scale.lock
  flock 9
  if ! hack/scale-cluster.sh running; then
    scale_up=true
    hack/scale-cluster.sh up
  fi
  log "running the kwok tests against .cluster/scale/kubeconfig"
  cargo test -p kruise-e2e --no-fail-fast "${args[@]}" -- --test-threads 1 || rc=$?
  scale_down
  flock -u 9
  return "$rc"
}
# Also from the EXIT trap, should the run stop half-way.
scale_down() {
  if $scale_up; then
    scale_up=false
    hack/scale-cluster.sh down || true
  fi
}

if [ -n "${KUBECONFIG:-}" ] && [ "$mode" = dev ]; then
  if [ "${KRUISE_E2E_DEV:-}" = 1 ]; then
    hack/dev-up.sh
    trap 'hack/dev-up.sh down' EXIT
  fi
  # shellcheck disable=SC2046 # one word a flag or name
  run_suite $(suite_tests incluster)
  exit 0
fi

local_up=false
cleanup() {
  scale_down
  if $local_up; then hack/cluster.sh down || true; fi
}
trap cleanup EXIT
hack/cluster.sh up
local_up=true
export KUBECONFIG="$KRS_DIR/kubeconfig"

if [ "$mode" = incluster ]; then
  # A dev-mode manager or daemon left running would serve beside the installed ones.
  hack/dev-up.sh down
  hack/install.sh
  log "checking that deploy/ applies cleanly on a live cluster (server-side dry run)"
  "$KRS_BIN_DIR/kubectl" apply -k deploy/ --dry-run=server >/dev/null
  KRUISE_E2E_INCLUSTER=1 run_suite "${INCLUSTER_TESTS[@]}"
  hack/install.sh uninstall
  # The plugin's install/check/uninstall and the Helm chart need the cluster without Kruise, with
  # the images just built (tag dev); the test uninstalls what it installed.
  log "kubectl kruise install/check/uninstall and the Helm chart"
  KUBECTL="$KRS_BIN_DIR/kubectl" KRUISE_E2E_INCLUSTER=1 \
    cargo test -p kruise-e2e --test plugin_install -- --include-ignored
  # `kubectl kruise dev` runs for real only on a cluster without Kruise and without a dev-mode
  # manager (elsewhere the same test checks that it refuses): here, after the uninstall.
  log "kubectl kruise dev: the embedded manager, a rollout, Ctrl-C"
  cargo test -p kruise-e2e --test plugin_dev
  exit 0
fi

hack/dev-up.sh
# Everything but the in-cluster checks, which need Kruise-rs installed from deploy/.
# shellcheck disable=SC2046 # one word a flag or name
run_suite $(suite_tests)
run_kwok_suite
# The daemon's CRI client against the cluster's containerd.
KRUISE_CRI_ENDPOINT="unix://$KRS_CONTAINERD_SOCK" cargo test -p kruise-daemon --test cri -- --include-ignored

if $cycle; then
  for round in 1 2; do
    log "cluster down/up cycle $round of 2"
    hack/cluster.sh down
    if [ "$round" = 1 ]; then
      # What is not the cluster's must survive its teardown: a KUBE-* chain made before it started
      # and a process that looks like a containerd shim of namespace k8s.io.
      before=$(iptables-save | grep '^:KUBE-' | cut -d' ' -f1 || true)
      iptables -N KUBE-E2E-FOREIGN
      setsid bash -c 'exec -a "containerd-shim-runc-v2 -namespace k8s.io -id e2e-foreign" sleep 600' </dev/null >/dev/null 2>&1 &
      foreign_pid=$!
      hack/cluster.sh up
      # A running Pod, so that there are shims of this cluster to stop.
      "$KRS_BIN_DIR/kubectl" run e2e-shim --image "$KRS_REGISTRY/kruise-rs/testapp:v1" >/dev/null
      "$KRS_BIN_DIR/kubectl" wait --for condition=Ready pod/e2e-shim --timeout 60s >/dev/null
      hack/cluster.sh down
      if pgrep -f -- "containerd-shim.* -address $KRS_CONTAINERD_SOCK" >/dev/null; then
        warn "cluster down left shims of its containerd: $(pgrep -af -- "containerd-shim.* -address $KRS_CONTAINERD_SOCK")"
        exit 1
      fi
      alive=true; kill -0 "$foreign_pid" 2>/dev/null || alive=false
      chain=true; iptables -S KUBE-E2E-FOREIGN >/dev/null 2>&1 || chain=false
      kill "$foreign_pid" 2>/dev/null || true
      iptables -X KUBE-E2E-FOREIGN 2>/dev/null || true
      $alive || { warn "cluster down killed a shim-like process it did not start"; exit 1; }
      $chain || { warn "cluster down removed a KUBE-* chain it did not make"; exit 1; }
      after=$(iptables-save | grep '^:KUBE-' | cut -d' ' -f1 || true)
      [ "$after" = "$before" ] || { warn "cluster down left KUBE-* chains: $(echo "$after" | tr '\n' ' ')"; exit 1; }
      # The provisioner's volumes are the cluster's state too.
      [ ! -e "$KRS_DIR/local-path" ] || { warn "cluster down left the volumes in .cluster/local-path"; exit 1; }
      log "cluster down removed only what the cluster made"
    fi
    hack/cluster.sh up
    cargo test -p kruise-e2e --test cluster -- node_is_ready pod_runs_from_local_registry
  done
fi
