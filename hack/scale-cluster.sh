#!/usr/bin/env bash
# The "scale" cluster of the controller-at-scale benchmark: a control plane only (etcd,
# kube-apiserver, kube-scheduler) and kwok playing the kubelet of $SCALE_NODES fake Nodes, so
# thousands of Pods "run" without containers. It shares nothing with the local cluster
# (hack/cluster.sh): other ports, state in .cluster/scale/, no root, no kubelet, containerd, CNI or
# iptables, so it never needs the local cluster's lock.
#
#   hack/scale-cluster.sh up      idempotent: starts what is not running, waits, installs the CRDs
#   hack/scale-cluster.sh down    stops everything it started (by PID) and removes etcd's data
#   hack/scale-cluster.sh status  prints what runs
#   hack/scale-cluster.sh running exits 0 when it is up (what hack/test.sh kwok asks before `up`)
#   hack/scale-cluster.sh use kruise-rs|openkruise
#                                 installs that system's CRDs (replaced whole) and webhook
#                                 configurations, for kruise-scale-bench's turns: the two share
#                                 CRD and webhook configuration names. OpenKruise's come from its
#                                 module's config/ (hack/build-openkruise.sh caches it); Kruise-rs
#                                 writes its webhook configurations itself when its manager starts.
#
# KUBECONFIG=.cluster/scale/kubeconfig (API server https://127.0.0.1:16443). No
# kube-controller-manager: nothing here needs one, and on 2 cores it would compete with what is
# measured. Hence no ServiceAccount admission (no token controller), no TaintNodesByCondition
# (no node lifecycle controller lifts the not-ready taint) and no garbage collector
# (whoever deletes a workload deletes its Pods).
set -euo pipefail
# shellcheck source=hack/lib.sh
source "$(dirname "$0")/lib.sh"

KRS_DIR="$KRS_ROOT/.cluster/scale"
KRS_LOGS="$KRS_DIR/logs"
KRS_PIDS="$KRS_DIR/pids"
KRS_PKI="$KRS_DIR/pki"
KRS_APISERVER_URL=https://127.0.0.1:16443
KRS_CLUSTER_NAME=kruise-scale
export KRS_DIR KRS_LOGS KRS_PIDS KRS_PKI KRS_APISERVER_URL KRS_CLUSTER_NAME
SCALE_NODES=${SCALE_NODES:-50}
ETCD_PORT=12379
SCHEDULER_PORT=10359

# Started left to right, stopped right to left. The managers under test are started by the
# benchmark (kruise-scale-bench writes their PID files here) and are stopped first.
COMPONENTS=(etcd kube-apiserver kube-scheduler kwok)
MANAGERS=(kruise-manager openkruise-manager)
OPENKRUISE_VERSION=${OPENKRUISE_VERSION:-v1.9.0}

make_pki() {
  make_ca kruise-scale-ca
  cert apiserver kube-apiserver "" "DNS:localhost,IP:127.0.0.1" server
  cert admin kubernetes-admin system:masters "" client
  cert scheduler system:kube-scheduler "" "" client
  kubeconfigs admin scheduler
}

write_configs() {
  # The default client limit (50 QPS) would make binding 5,000 Pods take minutes.
  cat >"$KRS_DIR/scheduler.yaml" <<EOF
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: $KRS_DIR/scheduler.kubeconfig
  qps: 2000
  burst: 4000
leaderElection:
  leaderElect: false
EOF
}

nodes_manifest() {
  local i
  for ((i = 0; i < SCALE_NODES; i++)); do
    cat <<EOF
---
apiVersion: v1
kind: Node
metadata:
  name: kwok-node-$i
  annotations:
    kwok.x-k8s.io/node: fake
  labels:
    kubernetes.io/hostname: kwok-node-$i
    type: kwok
EOF
  done
}

nodes_ready() {
  [ "$(kctl get nodes -l type=kwok -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' | grep -c True)" -ge "$SCALE_NODES" ]
}

cmd_up() {
  local bin="$KRS_BIN_DIR"
  if all_alive "${COMPONENTS[@]}" && apiserver_ready >/dev/null 2>&1 && nodes_ready 2>/dev/null; then
    log "the scale cluster is already up (KUBECONFIG=.cluster/scale/kubeconfig)"
    return 0
  fi
  if [ -d "$KRS_PIDS" ]; then
    log "clearing what a previous run of the scale cluster left behind"
    cmd_down quiet
  fi
  "$KRS_ROOT/hack/build-k8s.sh"
  "$KRS_ROOT/hack/build-kwok.sh"
  mkdir -p "$KRS_LOGS" "$KRS_PIDS"
  make_pki
  write_configs

  log "scale cluster: starting etcd on 127.0.0.1:$ETCD_PORT"
  start_etcd kruise-scale "$ETCD_PORT" 12380 12381 8589934592

  log "scale cluster: starting kube-apiserver on ${KRS_APISERVER_URL}"
  start_apiserver "$ETCD_PORT" \
    --advertise-address 127.0.0.1 --bind-address 127.0.0.1 --secure-port 16443 \
    --service-cluster-ip-range 10.97.0.0/16 \
    --authorization-mode RBAC --disable-admission-plugins ServiceAccount,TaintNodesByCondition \
    --event-ttl 1h

  log "scale cluster: starting kube-scheduler and kwok ($SCALE_NODES fake nodes)"
  start kube-scheduler "$bin/kube-scheduler" --config "$KRS_DIR/scheduler.yaml" \
    --authentication-kubeconfig "$KRS_DIR/scheduler.kubeconfig" \
    --authorization-kubeconfig "$KRS_DIR/scheduler.kubeconfig" \
    --bind-address 127.0.0.1 --secure-port "$SCHEDULER_PORT"
  wait_for kube-scheduler 60 curl -skf "https://127.0.0.1:$SCHEDULER_PORT/healthz"
  start kwok "$bin/kwok" --kubeconfig "$KRS_DIR/admin.kubeconfig" --config "$KRS_ROOT/hack/kwok/stages.yaml" \
    -v WARN --cidr 10.128.0.1/16 --node-ip 10.127.0.1 --manage-nodes-with-annotation-selector kwok.x-k8s.io/node=fake
  nodes_manifest | kctl apply -f - >/dev/null
  wait_for kwok 120 nodes_ready

  log "scale cluster: installing the Kruise CRDs"
  KUBECONFIG=$KRS_DIR/kubeconfig install_crds all
  KUBECONFIG=$KRS_DIR/kubeconfig kruise_namespaces
  log "the scale cluster is up: export KUBECONFIG=$KRS_DIR/kubeconfig"
}

cmd_down() {
  local quiet=${1:-} i
  [ -n "$quiet" ] || log "stopping the scale cluster"
  for i in "${MANAGERS[@]}"; do stop "$i" 15; done
  for ((i = ${#COMPONENTS[@]} - 1; i >= 0; i--)); do stop "${COMPONENTS[i]}"; done
  rm -rf "$KRS_DIR/etcd" "$KRS_PIDS" "$KRS_DIR"/openkruise-*
  [ -n "$quiet" ] || log "the scale cluster is down"
}

cmd_status() { print_status "${MANAGERS[@]}" "${COMPONENTS[@]}"; }

# OpenKruise's CRDs and webhook configurations, rendered once per scale cluster (removed by down)
# from its module's config/ (kustomize names them kruise-*, as ours): crds/ one file a CRD, and
# webhooks.yaml. Its manager fills in their CA bundle and, with WEBHOOK_HOST, a host URL.
render_openkruise() {
  # The tag's build when there is one, else the module's (hack/build-openkruise.sh --dir).
  local src dir="$KRS_DIR/openkruise-$OPENKRUISE_VERSION"
  src="$("$KRS_ROOT/hack/build-openkruise.sh" --dir)/src/config/default"
  [ -f "$dir/webhooks.yaml" ] && return 0
  [ -d "$src" ] || die "$src not found: run hack/build-openkruise.sh"
  rm -rf "$dir"
  mkdir -p "$dir/crds"
  # kustomize warns about the deprecated fields of that config/ on every render: shown only
  # when the render fails.
  if ! kctl kustomize "$src" >"$dir/all.yaml" 2>"$dir/kustomize.err"; then
    cat "$dir/kustomize.err" >&2
    die "rendering $src failed"
  fi
  python3 -c '
import sys, yaml
out = sys.argv[1]
docs = [d for d in yaml.safe_load_all(open(f"{out}/all.yaml")) if d]
for d in docs:
    if d["kind"] == "CustomResourceDefinition":
        name = d["metadata"]["name"]
        with open(f"{out}/crds/{name}.yaml", "w") as f:
            yaml.safe_dump(d, f)
hooks = [d for d in docs if d["kind"].endswith("WebhookConfiguration")]
with open(f"{out}/webhooks.yaml.tmp", "w") as f:
    yaml.safe_dump_all(hooks, f)
' "$dir"
  mv "$dir/webhooks.yaml.tmp" "$dir/webhooks.yaml"
}

cmd_use() {
  local system=${1:-}
  export KUBECONFIG=$KRS_DIR/kubeconfig
  # The previous system's configurations point at a manager that is gone: with failurePolicy
  # Fail they would refuse the writes below and the next turn's Pods.
  kctl delete mutatingwebhookconfiguration kruise-mutating-webhook-configuration --ignore-not-found >/dev/null
  kctl delete validatingwebhookconfiguration kruise-validating-webhook-configuration --ignore-not-found >/dev/null
  # Kruise-rs's "Kruise-rs is down" admission policy (webhook/src/configuration/policy.rs) refuses
  # every workload Pod its webhook did not mark, so OpenKruise's Pods too; with no garbage
  # collector here nothing removes it with its owner. Kruise-rs's manager writes it again.
  kctl delete validatingadmissionpolicybinding kruise-rs-pod-webhook --ignore-not-found >/dev/null
  kctl delete validatingadmissionpolicy kruise-rs-pod-webhook --ignore-not-found >/dev/null
  case $system in
    kruise-rs)
      install_crds all
      ;;
    openkruise)
      render_openkruise
      install_crds all "$KRS_DIR/openkruise-$OPENKRUISE_VERSION/crds"
      kctl apply -f "$KRS_DIR/openkruise-$OPENKRUISE_VERSION/webhooks.yaml" >/dev/null
      ;;
    *) echo "usage: $0 use kruise-rs|openkruise" >&2; exit 2 ;;
  esac
  kruise_namespaces
  log "scale cluster: $system's CRDs and webhook configurations installed"
}

cmd_running() { all_alive "${COMPONENTS[@]}" && apiserver_ready >/dev/null 2>&1 && nodes_ready 2>/dev/null; }

case ${1:-} in
  up) cmd_up ;;
  down) cmd_down ;;
  status) cmd_status ;;
  running) cmd_running ;;
  use) cmd_use "${2:-}" ;;
  *) echo "usage: $0 up|down|status|running|use SYSTEM" >&2; exit 2 ;;
esac
