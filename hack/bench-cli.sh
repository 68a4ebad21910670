#!/usr/bin/env bash
# Time from process start to the first line of `rollout status --watch=false`:
# kubectl-kruise on a finished CloneSet against kubectl on a finished Deployment, same cluster,
# same run, interleaved so both see the same load. Prints min/median/max in milliseconds.
#
# Usage: hack/bench-cli.sh [RUNS]   (default 20)
# Env:   KUBECONFIG (default .cluster/kubeconfig), KUBECTL (default .cluster/bin/kubectl, then
#        kubectl on PATH), KUBECTL_KRUISE (default target/debug/kubectl-kruise),
#        REGISTRY (default 127.0.0.1:5000).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
runs=${1:-20}
export KUBECONFIG=${KUBECONFIG:-$root/.cluster/kubeconfig}
kubectl=${KUBECTL:-$root/.cluster/bin/kubectl}
[[ -x $kubectl ]] || kubectl=$(command -v kubectl)
target_dir=${CARGO_TARGET_DIR:-$root/target}
kruise=${KUBECTL_KRUISE:-$target_dir/debug/kubectl-kruise}
registry=${REGISTRY:-127.0.0.1:5000}

if [[ ! -x $kruise ]]; then
  echo "error: $kruise not found: run \`cargo build -p kubectl-kruise\` first" >&2
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

stats() {
  sort -n | awk '{v[NR] = $1} END {
    m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
    printf "min %d ms, median %d ms, max %d ms (%d runs)\n", v[1], m, v[NR], NR
  }'
}

kruise_cmd=("$kruise" --kubeconfig "$KUBECONFIG" -n "$ns" rollout status clone/web --watch=false)
kubectl_cmd=("$kubectl" --kubeconfig "$KUBECONFIG" -n "$ns" rollout status deployment/web --watch=false)
echo "kubectl-kruise: ${kruise_cmd[*]}"
echo "kubectl:        ${kubectl_cmd[*]}"
# One unmeasured run each warms the page cache.
first_line_ms "${kruise_cmd[@]}" >/dev/null
first_line_ms "${kubectl_cmd[@]}" >/dev/null

k_times=() b_times=()
for _ in $(seq "$runs"); do
  k_times+=("$(first_line_ms "${kruise_cmd[@]}")")
  b_times+=("$(first_line_ms "${kubectl_cmd[@]}")")
done
printf 'kubectl-kruise rollout status clone/web --watch=false:      '
printf '%s\n' "${k_times[@]}" | stats
printf 'kubectl rollout status deployment/web --watch=false (base): '
printf '%s\n' "${b_times[@]}" | stats
