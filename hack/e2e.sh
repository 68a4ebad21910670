#!/usr/bin/env bash
# Runs the end-to-end suite (the kruise-e2e crate) against a real cluster.
#   With KUBECONFIG set: against that cluster, which must already run Kruise-rs or allow dev mode.
#   Without: brings up the local cluster, runs the suite, and brings it down again.
#   --cycle: also proves that cluster-down then cluster-up works twice in a row (make test).
set -euo pipefail
# shellcheck source=hack/lib.sh
source "$(dirname "$0")/lib.sh"
cd "$KRS_ROOT"

cycle=false
[ "${1:-}" = --cycle ] && cycle=true

log "building the Kruise-rs binaries"
cargo build --workspace --bins
cargo test -p kruise-e2e --no-run

run_suite() {
  log "running the e2e suite against $KUBECONFIG"
  # A few tests at a time: they share one small node.
  cargo test -p kruise-e2e -- --test-threads "${E2E_THREADS:-3}"
}

if [ -n "${KUBECONFIG:-}" ]; then
  run_suite
  exit 0
fi

local_up=false
cleanup() {
  if $local_up; then hack/cluster.sh down || true; fi
}
trap cleanup EXIT
hack/cluster.sh up
local_up=true
export KUBECONFIG="$KRS_DIR/kubeconfig"
run_suite

if $cycle; then
  for round in 1 2; do
    log "cluster down/up cycle $round of 2"
    hack/cluster.sh down
    hack/cluster.sh up
    cargo test -p kruise-e2e --test cluster -- node_is_ready pod_runs_from_local_registry
  done
fi
