#!/usr/bin/env bash
# Conversion webhook calls per in-place rollout of a CloneSet, and per ContainerRecreateRequest,
# on the cluster of KUBECONFIG (default: the local one) with Kruise-rs installed.
#
#   hack/conversion-calls.sh [--replicas N] [--runs N] [--crr]
#
# For each run: a v1alpha1 CloneSet of N testapp:v1 Pods (in place, all at once), Ready; the API
# server's apiserver_crd_conversion_webhook_duration_seconds_count for clonesets.apps.kruise.io
# (summed over its series) read; the image set to testapp:v2 at v1alpha1; read again once every
# Pod is updated and Ready at the new generation. The difference is what the rollout cost (the
# script itself reads and writes only v1alpha1, the storage version, so it converts nothing).
# With --crr, one v1alpha1 ContainerRecreateRequest of the first Pod, from its creation until it
# is Completed, counted the same way for containerrecreaterequests.apps.kruise.io.
set -euo pipefail
# shellcheck source=hack/lib.sh
source "$(dirname "$0")/lib.sh"
cd "$KRS_ROOT"

replicas=5
runs=2
crr=false
while [ $# -gt 0 ]; do
  case $1 in
    --replicas) replicas=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --crr) crr=true; shift ;;
    *) echo "usage: $0 [--replicas N] [--runs N] [--crr]" >&2; exit 2 ;;
  esac
done

export KUBECONFIG=${KUBECONFIG:-$KRS_DIR/kubeconfig}
k() { "$KRS_BIN_DIR/kubectl" "$@"; }
ns=conversion-calls
image() { echo "$KRS_REGISTRY/kruise-rs/testapp:$1"; }

# calls CRD: the API server's conversion webhook calls for CRD so far (sum over its series).
calls() {
  k get --raw /metrics | awk -v crd="crd_name=\"$1\"" '
    /^apiserver_crd_conversion_webhook_duration_seconds_count\{/ && index($0, crd) {s += $NF}
    END {printf "%d\n", s}'
}

# rolled_out NAME TAG: the CloneSet has observed its generation and every Pod is on it and Ready.
rolled_out() {
  k -n "$ns" get clonesets.v1alpha1.apps.kruise.io "$1" -o json | python3 -c '
import json, sys
cs = json.load(sys.stdin); s = cs.get("status", {}); n = cs["spec"]["replicas"]
ok = s.get("observedGeneration") == cs["metadata"]["generation"] and all(
    s.get(f, 0) == n for f in ("replicas", "readyReplicas", "updatedReplicas", "updatedReadyReplicas"))
sys.exit(0 if ok else 1)'
}

wait_until() { # WHAT SECONDS COMMAND...
  local what=$1 deadline=$((SECONDS + $2))
  shift 2
  until "$@"; do
    [ $SECONDS -lt $deadline ] || { warn "timed out waiting for $what"; return 1; }
    sleep 1
  done
}

crr_done() {
  [ "$(k -n "$ns" get containerrecreaterequests.v1alpha1.apps.kruise.io "$1" -o jsonpath='{.status.phase}')" = Completed ]
}

k create namespace "$ns" --dry-run=client -o yaml | k apply -f - >/dev/null
trap 'k delete namespace "$ns" --wait=false >/dev/null 2>&1 || true' EXIT
for run in $(seq 1 "$runs"); do
  name=cs-$run
  k -n "$ns" apply -f - >/dev/null <<YAML
apiVersion: apps.kruise.io/v1alpha1
kind: CloneSet
metadata: {name: $name}
spec:
  replicas: $replicas
  selector: {matchLabels: {app: $name}}
  updateStrategy: {type: InPlaceIfPossible, maxUnavailable: "100%"}
  template:
    metadata: {labels: {app: $name}}
    spec:
      terminationGracePeriodSeconds: 5
      containers:
        - name: app
          image: $(image v1)
          readinessProbe: {httpGet: {path: /, port: 8080}, periodSeconds: 1}
YAML
  wait_until "$name: $replicas Pods Ready" 180 rolled_out "$name"
  before=$(calls clonesets.apps.kruise.io)
  k -n "$ns" patch clonesets.v1alpha1.apps.kruise.io "$name" --type=json \
    -p "[{\"op\":\"replace\",\"path\":\"/spec/template/spec/containers/0/image\",\"value\":\"$(image v2)\"}]" >/dev/null
  sleep 2 # the new generation's first status write
  wait_until "$name: rolled out to v2" 180 rolled_out "$name"
  after=$(calls clonesets.apps.kruise.io)
  echo "run $run: $((after - before)) conversion calls for clonesets.apps.kruise.io ($replicas-Pod in-place rollout)"
  if $crr; then
    pod=$(k -n "$ns" get pods -l app="$name" -o jsonpath='{.items[0].metadata.name}')
    before=$(calls containerrecreaterequests.apps.kruise.io)
    k -n "$ns" create -f - >/dev/null <<YAML
apiVersion: apps.kruise.io/v1alpha1
kind: ContainerRecreateRequest
metadata: {name: crr-$run}
spec:
  podName: $pod
  containers: [{name: app}]
  strategy: {failurePolicy: Fail}
YAML
    wait_until "crr-$run: Completed" 120 crr_done "crr-$run"
    sleep 2 # the manager's last writes of a completed request (active label)
    after=$(calls containerrecreaterequests.apps.kruise.io)
    echo "run $run: $((after - before)) conversion calls for containerrecreaterequests.apps.kruise.io (one request)"
  fi
  k -n "$ns" delete clonesets.v1alpha1.apps.kruise.io "$name" --wait=false >/dev/null
done
