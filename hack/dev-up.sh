#!/usr/bin/env bash
# Dev mode: installs the CRDs on the cluster in $KUBECONFIG (default: the local cluster) and runs
# kruise-manager (with its webhook) and kruise-daemon as host processes built from this tree.
#   hack/dev-up.sh         build, install CRDs, start both, wait until they answer; a component
#                          that runs already is left running (a running manager keeps the CRDs)
#   hack/dev-up.sh down    stop both, and remove the webhook configurations that point at them
#   KRUISE_PROFILE=release hack/dev-up.sh   optimized binaries (what the benchmarks measure)
# Logs: .cluster/logs/kruise-{manager,daemon}.log. The webhook is reached by the API server at
# https://127.0.0.1:9876, so dev mode needs an API server on this host (the local cluster).
set -euo pipefail
# shellcheck source=hack/lib.sh
source "$(dirname "$0")/lib.sh"
cd "$KRS_ROOT"

if [ "${1:-}" = down ]; then
  started=false
  [ -f "$KRS_PIDS/kruise-manager.pid" ] && started=true
  stop kruise-manager 15
  stop kruise-daemon 15
  # The webhook configurations the dev manager wrote point at its host URL, and the Pod hooks
  # fail closed: left behind, they would refuse every Pod create ("connection refused") until
  # the manager runs again. Removed only when this script started the manager and they still
  # point at it (an installed Kruise-rs points them at its Service).
  if $started; then
    for kind in mutating validating; do
      cfg=${kind}webhookconfiguration/kruise-${kind}-webhook-configuration
      url=$(_kruise_kubectl --request-timeout=10s get "$cfg" \
        -o jsonpath='{.webhooks[0].clientConfig.url}' 2>/dev/null) || continue
      case $url in
        https://127.0.0.1:9876/*)
          _kruise_kubectl --request-timeout=10s delete "$cfg" --ignore-not-found >/dev/null || true ;;
      esac
    done
  fi
  exit 0
fi

export KUBECONFIG=${KUBECONFIG:-$KRS_DIR/kubeconfig}
target=${CARGO_TARGET_DIR:-$KRS_ROOT/target}
# KRUISE_PROFILE=release: optimized binaries (what benchmarks measure); the default is debug.
profile=${KRUISE_PROFILE:-dev}
bindir=$target/debug
[ "$profile" = release ] && bindir=$target/release
# KRUISE_SKIP_BUILD=1: start what is built (a test restarting the manager runs inside cargo,
# which holds the build lock).
if [ "${KRUISE_SKIP_BUILD:-}" != 1 ]; then
  log "building kruise-manager and kruise-daemon ($profile profile)"
  build_components "$profile"
fi

# Only before the manager starts: a running manager has pointed CRD conversion at itself, and
# replacing the CRDs under it (say, when only a killed daemon is being brought back) would point
# conversion at the in-cluster Service until that manager restarts.
if pid_alive kruise-manager; then
  log "kruise-manager runs already: leaving it and the CRDs as they are"
else
  log "installing the CRDs"
  install_crds all
fi
kruise_namespaces

log "starting kruise-manager (dev mode, webhook at https://127.0.0.1:9876)"
POD_NAMESPACE=kruise-system RUST_LOG=${RUST_LOG:-info} \
  start kruise-manager "$bindir/kruise-manager" --kubeconfig "$KUBECONFIG" \
  --webhook-host 127.0.0.1 --metrics-addr 127.0.0.1:8080 --health-addr 127.0.0.1:8000 \
  --feature-gates ResourcesDeletionProtection=true,PodUnavailableBudgetUpdateGate=true,SidecarTerminator=true,ImagePullJobGate=true,ResourceDistributionGate=true,InPlaceWorkloadVerticalScaling=true
wait_for kruise-manager 180 curl -sf http://127.0.0.1:8000/readyz

log "starting kruise-daemon for node $KRS_NODE"
NODE_NAME=$KRS_NODE RUST_LOG=${RUST_LOG:-info} \
  start kruise-daemon "$bindir/kruise-daemon" --kubeconfig "$KUBECONFIG" \
  --runtime-endpoint "unix://$KRS_CONTAINERD_SOCK" --addr 127.0.0.1:10221
wait_for kruise-daemon 60 curl -sf http://127.0.0.1:10221/healthz
log "Kruise-rs runs in dev mode (logs in .cluster/logs/kruise-*.log)"
