#!/usr/bin/env bash
# Time from process start to the first line of `rollout status --watch=false`:
# kubectl-kruise (release build) on a finished CloneSet against kubectl on a finished Deployment,
# and against `kubectl get` of the same CloneSet (kubectl's start-up plus one GET: the floor a
# kubectl plugin pays), same cluster, same run, interleaved so all see the same load. Prints a
# markdown table of min/median/max in milliseconds and the ratios of the medians.
#
# Usage: hack/bench-cli.sh [--runs N] [--append FILE] [RUNS]   (default 20 runs)
# Env:   KUBECONFIG (default .cluster/kubeconfig), KUBECTL (default .cluster/bin/kubectl, then
#        kubectl on PATH), KUBECTL_KRUISE (default: target/release/kubectl-kruise, built here
#        unless KRUISE_SKIP_BUILD=1), REGISTRY (default 127.0.0.1:5000).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
runs=20
append=
while (($#)); do
  case $1 in
    --runs) runs=${2:?--runs needs a value}; shift 2 ;;
    --append) append=${2:?--append needs a file}; shift 2 ;;
    -h | --help) sed -n '2,11p' "$0"; exit 0 ;;
    [0-9]*) runs=$1; shift ;;
    *) echo "error: unknown argument $1 (try --help)" >&2; exit 2 ;;
  esac
done
export KUBECONFIG=${KUBECONFIG:-$root/.cluster/kubeconfig}
kubectl=${KUBECTL:-$root/.cluster/bin/kubectl}
[[ -x $kubectl ]] || kubectl=$(command -v kubectl)
target_dir=${CARGO_TARGET_DIR:-$root/target}
registry=${REGISTRY:-127.0.0.1:5000}
if [[ -n ${KUBECTL_KRUISE:-} ]]; then
  kruise=$KUBECTL_KRUISE
else
  kruise=$target_dir/release/kubectl-kruise
  if [[ ${KRUISE_SKIP_BUILD:-} != 1 ]]; then
    (cd "$root" && cargo build --release -p kubectl-kruise)
  fi
fi

if [[ ! -x $kruise ]]; then
  echo "error: $kruise not found: run \`cargo build --release -p kubectl-kruise\` first" >&2
  exit 1
fi

ns="bench-cli-$(printf '%06x' $((RANDOM * RANDOM % 16777216)))"
cleanup() { "$kubectl" delete namespace "$ns" --wait=false >/dev/null 2>&1 || true; }
trap cleanup EXIT

"$kubectl" create namespace "$ns" >/dev/null
"$kubectl" -n "$ns" apply -f - >/dev/null <<EOF
apiVersion: apps.kruise.io/v1beta1
kind: CloneSet
metadata: {name: web}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: app, image: $registry/kruise-rs/testapp:v1}]
  updateStrategy: {type: RollingUpdate, rollingUpdate: {podUpdatePolicy: InPlaceIfPossible}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 1
  selector: {matchLabels: {app: web-deploy}}
  template:
    metadata: {labels: {app: web-deploy}}
    spec:
      containers: [{name: app, image: $registry/kruise-rs/testapp:v1}]
EOF
"$kubectl" -n "$ns" rollout status deployment/web --timeout 180s >/dev/null
"$kruise" --kubeconfig "$KUBECONFIG" -n "$ns" rollout status clone/web --timeout 3m >/dev/null

now_ns() { date +%s%N; }

# Milliseconds from start to the first stdout line; the rest of the output is drained.
first_line_ms() {
  local start end
  start=$(now_ns)
  end=$("$@" 2>/dev/null | { IFS= read -r _ || true; now_ns; cat >/dev/null; })
  echo $(((end - start) / 1000000))
}

# "min median max" of the numbers on stdin.
stats() {
  sort -n | awk '{v[NR] = $1} END {
    m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
    printf "%d %d %d\n", v[1], m, v[NR]
  }'
}

kruise_cmd=("$kruise" --kubeconfig "$KUBECONFIG" -n "$ns" rollout status clone/web --watch=false)
kubectl_cmd=("$kubectl" --kubeconfig "$KUBECONFIG" -n "$ns" rollout status deployment/web --watch=false)
get_cmd=("$kubectl" --kubeconfig "$KUBECONFIG" -n "$ns" get clonesets.apps.kruise.io web)
echo "kubectl-kruise: ${kruise_cmd[*]}" >&2
echo "kubectl:        ${kubectl_cmd[*]}" >&2
echo "kubectl get:    ${get_cmd[*]}" >&2
# One unmeasured run each warms the page cache.
first_line_ms "${kruise_cmd[@]}" >/dev/null
first_line_ms "${kubectl_cmd[@]}" >/dev/null
first_line_ms "${get_cmd[@]}" >/dev/null

k_times=() b_times=() g_times=()
for _ in $(seq "$runs"); do
  k_times+=("$(first_line_ms "${kruise_cmd[@]}")")
  b_times+=("$(first_line_ms "${kubectl_cmd[@]}")")
  g_times+=("$(first_line_ms "${get_cmd[@]}")")
done
read -r k_min k_med k_max < <(printf '%s\n' "${k_times[@]}" | stats)
read -r b_min b_med b_max < <(printf '%s\n' "${b_times[@]}" | stats)
read -r g_min g_med g_max < <(printf '%s\n' "${g_times[@]}" | stats)
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b > 0) ? a / b : 0 }'; }

table="
## CLI: time to the first \`rollout status\` line ($runs runs each, interleaved)

Machine: $(nproc) cores, Linux $(uname -r), local cluster. \`hack/bench-cli.sh\`: process start
to the first stdout line, release build of kubectl-kruise, on a finished 1-replica workload.

| command | min ms | median ms | max ms |
|---|---|---|---|
| kubectl-kruise rollout status clone/web --watch=false | $k_min | $k_med | $k_max |
| kubectl rollout status deployment/web --watch=false | $b_min | $b_med | $b_max |
| kubectl get clonesets.apps.kruise.io web (baseline) | $g_min | $g_med | $g_max |

| ratio of medians | value |
|---|---|
| kubectl-kruise rollout status / kubectl get | $(ratio "$k_med" "$g_med") |
| kubectl-kruise rollout status / kubectl rollout status | $(ratio "$k_med" "$b_med") |"
printf '%s\n' "$table"
if [[ -n $append ]]; then
  printf '%s\n' "$table" >>"$append"
fi
