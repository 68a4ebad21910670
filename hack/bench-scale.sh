#!/usr/bin/env bash
# The controller-at-scale benchmark: brings up the scale cluster (hack/scale-cluster.sh: control
# plane + kwok, its own ports and state, never the local cluster), builds kruise-manager and the
# benchmark in release mode, runs kruise-scale-bench (which starts and stops the manager), and
# tears the scale cluster down whatever happens. Arguments go to kruise-scale-bench:
#   hack/bench-scale.sh                              1,000 and 5,000 Pods, 3 runs each
#   hack/bench-scale.sh --sizes 1000 --runs 1        a quick look
#   hack/bench-scale.sh --append BENCHMARKS.md       what `make bench-scale` runs
#   hack/bench-scale.sh --sizes 10000 --workloads 2000 --runs 1
#                                                    the many-small-workloads shape: 2,000
#                                                    CloneSets of 5 Pods, all rolled out at once
#   hack/bench-scale.sh --systems kruise-rs,openkruise --sizes 10000 --workloads 2000 --runs 2 \
#     --openkruise-manager "$(hack/build-openkruise.sh --dir)/bin/manager"
#                                                    the same beside OpenKruise (issue 62)
# SCALE_KEEP=1 leaves the scale cluster up afterwards (hack/scale-cluster.sh down stops it).
set -euo pipefail
# shellcheck source=hack/lib.sh
source "$(dirname "$0")/lib.sh"
cd "$KRS_ROOT"

teardown() { [ "${SCALE_KEEP:-}" = 1 ] || hack/scale-cluster.sh down; }
trap teardown EXIT

hack/scale-cluster.sh up
# Release builds for both: the manager is what is measured, and a debug build of the benchmark
# would spend seconds of the machine's 2 cores decoding watch events during the measurement.
log "building kruise-manager and kruise-scale-bench (release; slow the first time)"
cargo build --release -p kruise-manager -p kruise-e2e --bin kruise-manager --bin kruise-scale-bench
target=${CARGO_TARGET_DIR:-$KRS_ROOT/target}
"$target/release/kruise-scale-bench" --manager "$target/release/kruise-manager" \
  --kubeconfig "$KRS_ROOT/.cluster/scale/kubeconfig" "$@"
