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

# Started left to right, stopped right to left. kruise-manager is started by the benchmark
# (kruise-scale-bench writes its PID file here) and is stopped first.
COMPONENTS=(etcd kube-apiserver kube-scheduler kwok)

make_pki() {
  mkdir -p "$KRS_PKI"
  if [ ! -f "$KRS_PKI/ca.crt" ]; then
    openssl ecparam -name prime256v1 -genkey -noout -out "$KRS_PKI/ca.key" 2>/dev/null
    openssl req -x509 -new -key "$KRS_PKI/ca.key" -subj "/CN=kruise-scale-ca" -days 3650 \
      -out "$KRS_PKI/ca.crt" 2>/dev/null
  fi
  cert apiserver kube-apiserver "" "DNS:localhost,IP:127.0.0.1" server
  cert admin kubernetes-admin system:masters "" client
  cert scheduler system:kube-scheduler "" "" client
  if [ ! -f "$KRS_PKI/sa.key" ]; then
    openssl genrsa -out "$KRS_PKI/sa.key" 2048 2>/dev/null
    openssl rsa -in "$KRS_PKI/sa.key" -pubout -out "$KRS_PKI/sa.pub" 2>/dev/null
  fi
  for u in admin scheduler; do
    [ -f "$KRS_DIR/$u.kubeconfig" ] || kubeconfig "$KRS_DIR/$u.kubeconfig" "$u"
  done
  cp "$KRS_DIR/admin.kubeconfig" "$KRS_DIR/kubeconfig"
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
  # kwok ships no stages of its own when run alone (kwokctl adds them): these are its "fast"
  # node and pod stages, changed to do what a kubelet does that the in-place engine relies on:
  #  - pod-start: a scheduled Pod runs; Ready only if it has no readiness gates (the gates are
  #    Kruise's to set), containerStatuses report the spec's images.
  #  - pod-inplace-update: a spec image differs from the running one (an in-place patch): the
  #    container "restarts" on the new image: new image and imageID, restartCount + 1.
  #  - pod-ready / pod-not-ready: Ready follows the readiness gates and the containers' images,
  #    as the kubelet computes it.
  #  - pod-delete: a deleted Pod goes away at once.
  cat >"$KRS_DIR/kwok.yaml" <<'EOF'
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: node-initialize
spec:
  resourceRef:
    apiGroup: v1
    kind: Node
  selector:
    matchExpressions:
    - jq:
        key: '.status.conditions[]? | select(.type == "Ready") | .status'
        operator: NotIn
        values: ['True']
  steps:
  - patch:
      root: status
      subresource: status
      template: |
        {{ $now := Now }}
        conditions:
        {{ range NodeConditions }}
        - lastHeartbeatTime: {{ $now | Quote }}
          lastTransitionTime: {{ $now | Quote }}
          message: {{ .message | Quote }}
          reason: {{ .reason | Quote }}
          status: {{ .status | Quote }}
          type: {{ .type | Quote }}
        {{ end }}
        addresses:
        - address: {{ NodeIP | Quote }}
          type: InternalIP
        - address: {{ .metadata.name | Quote }}
          type: Hostname
        allocatable:
          cpu: 1k
          memory: 1Ti
          pods: 1k
        capacity:
          cpu: 1k
          memory: 1Ti
          pods: 1k
        nodeInfo:
          architecture: amd64
          kubeletVersion: kwok-v0.8.0
          operatingSystem: linux
        phase: Running
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-start
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - jq:
        key: '.metadata.deletionTimestamp'
        operator: DoesNotExist
    - jq:
        key: '.spec.nodeName'
        operator: Exists
    - jq:
        key: '.status.phase'
        operator: In
        values: ['Pending']
  steps:
  - patch:
      root: status
      subresource: status
      template: |
        {{ $now := Now }}
        conditions:
        - lastTransitionTime: {{ $now | Quote }}
          status: "True"
          type: Initialized
        - lastTransitionTime: {{ $now | Quote }}
          status: "True"
          type: ContainersReady
        - lastTransitionTime: {{ $now | Quote }}
          status: {{ if .spec.readinessGates }}"False"{{ else }}"True"{{ end }}
          type: Ready
        containerStatuses:
        {{ range .spec.containers }}
        - image: {{ .image | Quote }}
          imageID: {{ printf "kwok://%s" .image | Quote }}
          name: {{ .name | Quote }}
          ready: true
          started: true
          restartCount: 0
          state:
            running:
              startedAt: {{ $now | Quote }}
        {{ end }}
        {{ $podIPs := PodIPsWith .spec.nodeName ( or .spec.hostNetwork false ) ( or .metadata.uid "" ) ( or .metadata.name "" ) ( or .metadata.namespace "" ) }}
        {{ with $podIPs }}
        podIP: {{ index . 0 | Quote }}
        podIPs:
        {{ range . }}
        - ip: {{ . | Quote }}
        {{ end }}
        {{ end }}
        hostIP: {{ NodeIPWith .spec.nodeName | Quote }}
        phase: Running
        startTime: {{ $now | Quote }}
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-inplace-update
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - jq:
        key: '.metadata.deletionTimestamp'
        operator: DoesNotExist
    - jq:
        key: '.status.phase'
        operator: In
        values: ['Running']
    - jq:
        key: 'if ([.status.containerStatuses[]? | .name + "=" + .image] | sort) == ([.spec.containers[] | .name + "=" + .image] | sort) then "same" else "changed" end'
        operator: In
        values: ['changed']
  steps:
  - patch:
      root: status
      subresource: status
      template: |
        {{ $now := Now }}
        {{ $statuses := .status.containerStatuses }}
        containerStatuses:
        {{ range .spec.containers }}
        {{ $c := . }}
        {{ $restarts := 0 }}
        {{ $same := false }}
        {{ range $statuses }}{{ if eq .name $c.name }}{{ $restarts = .restartCount }}{{ $same = eq .image $c.image }}{{ end }}{{ end }}
        - image: {{ $c.image | Quote }}
          imageID: {{ printf "kwok://%s" $c.image | Quote }}
          name: {{ $c.name | Quote }}
          ready: true
          started: true
          restartCount: {{ if $same }}{{ $restarts }}{{ else }}{{ add $restarts 1 }}{{ end }}
          state:
            running:
              startedAt: {{ $now | Quote }}
        {{ end }}
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-ready
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - jq:
        key: '.metadata.deletionTimestamp'
        operator: DoesNotExist
    - jq:
        key: '.status.phase'
        operator: In
        values: ['Running']
    - jq:
        key: '.status.conditions[]? | select(.type == "Ready") | .status'
        operator: NotIn
        values: ['True']
    - jq:
        key: 'if ([.status.containerStatuses[]? | .name + "=" + .image] | sort) == ([.spec.containers[] | .name + "=" + .image] | sort) then "same" else "changed" end'
        operator: In
        values: ['same']
    - jq:
        key: '. as $p | if all(.spec.readinessGates[]?; .conditionType as $t | any($p.status.conditions[]?; .type == $t and .status == "True")) then "met" else "unmet" end'
        operator: In
        values: ['met']
  steps:
  - patch:
      root: status
      subresource: status
      template: |
        conditions:
        - lastTransitionTime: {{ Now | Quote }}
          status: "True"
          type: Ready
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-not-ready
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - jq:
        key: '.metadata.deletionTimestamp'
        operator: DoesNotExist
    - jq:
        key: '.status.phase'
        operator: In
        values: ['Running']
    - jq:
        key: '.status.conditions[]? | select(.type == "Ready") | .status'
        operator: In
        values: ['True']
    - jq:
        key: '. as $p | if all(.spec.readinessGates[]?; .conditionType as $t | any($p.status.conditions[]?; .type == $t and .status == "True")) then "met" else "unmet" end'
        operator: In
        values: ['unmet']
  steps:
  - patch:
      root: status
      subresource: status
      template: |
        conditions:
        - lastTransitionTime: {{ Now | Quote }}
          reason: ReadinessGatesNotReady
          status: "False"
          type: Ready
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-delete
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - jq:
        key: '.metadata.deletionTimestamp'
        operator: Exists
  steps:
  - finalizers:
      empty: true
  - delete: true
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

healthy_apiserver() {
  curl --silent --fail --max-time 3 --cacert "$KRS_PKI/ca.crt" \
    --cert "$KRS_PKI/admin.crt" --key "$KRS_PKI/admin.key" "$KRS_APISERVER_URL/readyz"
}

nodes_ready() {
  [ "$(kctl get nodes -l type=kwok -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' | grep -c True)" -ge "$SCALE_NODES" ]
}

all_running() {
  local c
  for c in "${COMPONENTS[@]}"; do pid_alive "$c" || return 1; done
}

cmd_up() {
  local bin="$KRS_BIN_DIR"
  if all_running && healthy_apiserver >/dev/null 2>&1 && nodes_ready 2>/dev/null; then
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
  start etcd "$bin/etcd" --name kruise-scale --data-dir "$KRS_DIR/etcd" \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls http://127.0.0.1:12380 --initial-advertise-peer-urls http://127.0.0.1:12380 \
    --initial-cluster kruise-scale=http://127.0.0.1:12380 --listen-metrics-urls http://127.0.0.1:12381 \
    --quota-backend-bytes 8589934592 --log-level warn
  wait_for etcd 60 curl -sf http://127.0.0.1:12381/health

  log "scale cluster: starting kube-apiserver on ${KRS_APISERVER_URL}"
  start kube-apiserver "$bin/kube-apiserver" \
    --advertise-address 127.0.0.1 --bind-address 127.0.0.1 --secure-port 16443 \
    --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
    --client-ca-file "$KRS_PKI/ca.crt" \
    --tls-cert-file "$KRS_PKI/apiserver.crt" --tls-private-key-file "$KRS_PKI/apiserver.key" \
    --service-account-key-file "$KRS_PKI/sa.pub" \
    --service-account-signing-key-file "$KRS_PKI/sa.key" \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --service-cluster-ip-range 10.97.0.0/16 \
    --authorization-mode RBAC --disable-admission-plugins ServiceAccount,TaintNodesByCondition \
    --profiling=false --event-ttl 1h
  wait_for kube-apiserver 120 healthy_apiserver

  log "scale cluster: starting kube-scheduler and kwok ($SCALE_NODES fake nodes)"
  start kube-scheduler "$bin/kube-scheduler" --config "$KRS_DIR/scheduler.yaml" \
    --authentication-kubeconfig "$KRS_DIR/scheduler.kubeconfig" \
    --authorization-kubeconfig "$KRS_DIR/scheduler.kubeconfig" \
    --bind-address 127.0.0.1 --secure-port "$SCHEDULER_PORT"
  wait_for kube-scheduler 60 curl -skf "https://127.0.0.1:$SCHEDULER_PORT/healthz"
  start kwok "$bin/kwok" --kubeconfig "$KRS_DIR/admin.kubeconfig" --config "$KRS_DIR/kwok.yaml" \
    -v WARN --cidr 10.128.0.1/16 --node-ip 10.127.0.1 --manage-nodes-with-annotation-selector kwok.x-k8s.io/node=fake
  nodes_manifest | kctl apply -f - >/dev/null
  wait_for kwok 120 nodes_ready

  log "scale cluster: installing the Kruise CRDs"
  local crd
  for crd in "$KRS_ROOT"/deploy/crds/*.yaml; do
    kctl create -f "$crd" >/dev/null 2>&1 || kctl replace -f "$crd" >/dev/null
  done
  kctl wait --for condition=established --timeout 60s -f "$KRS_ROOT/deploy/crds/" >/dev/null
  for ns in kruise-system kruise-daemon-config; do
    kctl create namespace "$ns" --dry-run=client -o yaml | kctl apply -f - >/dev/null
  done
  log "the scale cluster is up: export KUBECONFIG=$KRS_DIR/kubeconfig"
}

cmd_down() {
  local quiet=${1:-} i
  [ -n "$quiet" ] || log "stopping the scale cluster"
  stop kruise-manager 15
  for ((i = ${#COMPONENTS[@]} - 1; i >= 0; i--)); do stop "${COMPONENTS[i]}"; done
  rm -rf "$KRS_DIR/etcd" "$KRS_PIDS"
  [ -n "$quiet" ] || log "the scale cluster is down"
}

cmd_status() {
  local c
  for c in kruise-manager "${COMPONENTS[@]}"; do
    if pid_alive "$c"; then echo "$c running (pid $(cat "$KRS_PIDS/$c.pid"))"; else echo "$c stopped"; fi
  done
}

case ${1:-} in
  up) cmd_up ;;
  down) cmd_down ;;
  status) cmd_status ;;
  *) echo "usage: $0 up|down|status" >&2; exit 2 ;;
esac
