# Shared helpers of the hack/ scripts: paths of the local cluster, logging, background processes
# tracked by PID file, and waits that name the component and show its log when they fail.
# shellcheck shell=bash

KRS_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=hack/versions.sh
source "$KRS_ROOT/hack/versions.sh"
KRS_DIR="$KRS_ROOT/.cluster"
KRS_LOGS="$KRS_DIR/logs"
KRS_PIDS="$KRS_DIR/pids"
KRS_PKI="$KRS_DIR/pki"
# Runtime state of containerd lives at the standard paths so that tools (and kruise-daemon's socket
# discovery) find the socket where they expect it.
KRS_CONTAINERD_SOCK=/run/containerd/containerd.sock
KRS_CONTAINERD_STATE=/run/containerd
KRS_REGISTRY=${KRS_REGISTRY:-127.0.0.1:5000}
KRS_NODE=${KRS_NODE:-kruise-node}
KRS_POD_CIDR=10.88.0.0/16
KRS_SERVICE_CIDR=10.96.0.0/16
# Cluster DNS: the kube-dns Service at the conventional 10th address of the Service range.
KRS_DNS_IP=10.96.0.10
KRS_CLUSTER_DOMAIN=cluster.local
export KRS_ROOT KRS_DIR KRS_LOGS KRS_PIDS KRS_PKI KRS_REGISTRY KRS_NODE KRS_CONTAINERD_SOCK KRS_CONTAINERD_STATE KRS_POD_CIDR KRS_SERVICE_CIDR
export KRS_DNS_IP KRS_CLUSTER_DOMAIN

_t0=$(date +%s)
log() { printf '\033[1m==> [%4ss] %s\033[0m\n' "$(($(date +%s) - _t0))" "$*" >&2; }
warn() { printf '!!  %s\n' "$*" >&2; }

# The address Pods use to reach the API server: the host's address on its default route.
host_ip() {
  ip -4 route get 1.1.1.1 2>/dev/null | awk '{for (i = 1; i < NF; i++) if ($i == "src") {print $(i + 1); exit}}'
}

# die COMPONENT MESSAGE: says which component failed and shows the end of its log.
die() {
  local comp=$1
  shift
  printf '\n!!  %s: %s\n' "$comp" "$*" >&2
  if [ -f "$KRS_LOGS/$comp.log" ]; then
    printf '!!  last lines of %s:\n' ".cluster/logs/$comp.log" >&2
    tail -n 30 "$KRS_LOGS/$comp.log" | sed 's/^/    /' >&2
  fi
  exit 1
}

pid_alive() { # name
  local f="$KRS_PIDS/$1.pid"
  [ -f "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null
}

# start NAME CMD...: runs CMD in the background in its own session, logging to .cluster/logs/NAME.log.
start() {
  local name=$1
  shift
  mkdir -p "$KRS_LOGS" "$KRS_PIDS"
  if pid_alive "$name"; then
    return 0
  fi
  # Descriptors 3-9 are closed: a daemon must not inherit, say, the lock of a script that ran
  # `flock LOCK hack/cluster.sh up`, or that lock would be held for the cluster's whole life.
  setsid "$@" >>"$KRS_LOGS/$name.log" 2>&1 </dev/null 3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&- &
  echo $! >"$KRS_PIDS/$name.pid"
}

# stop NAME [SECONDS]: SIGTERM, then SIGKILL after SECONDS (default 10).
stop() {
  local name=$1 grace=${2:-10} f="$KRS_PIDS/$1.pid" pid
  [ -f "$f" ] || return 0
  pid=$(cat "$f")
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq "$((grace * 10))"); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$f"
}

# wait_for NAME SECONDS CMD...: polls CMD until it succeeds; on timeout (or if NAME's process
# died) fails naming NAME and showing its log.
wait_for() {
  local name=$1 timeout=$2
  shift 2
  local deadline=$(($(date +%s) + timeout))
  until "$@" >/dev/null 2>&1; do
    if [ -f "$KRS_PIDS/$name.pid" ] && ! pid_alive "$name"; then
      die "$name" "the process exited before becoming healthy"
    fi
    if [ "$(date +%s)" -ge "$deadline" ]; then
      die "$name" "not healthy after ${timeout}s (check: $*)"
    fi
    sleep 0.5
  done
}

# Builds kruise-manager and kruise-daemon. Cargo picks dependency features from the packages a
# build names, so `-p kruise-manager -p kruise-daemon` and the test system's `cargo build
# --workspace --bins` compile kube and everything above it twice; in the dev profile (what the
# test system installs) build the workspace's binaries instead: one compile, shared with the tests.
build_components() { # profile
  if [ "$1" = dev ]; then
    cargo build --workspace --bins
  else
    cargo build --profile "$1" -p kruise-manager -p kruise-daemon --bins
  fi
}

kctl() { "$KRS_BIN_DIR/kubectl" --kubeconfig "$KRS_DIR/kubeconfig" "$@"; }

# go_build_progress LABEL DIR GO-BUILD-ARGS... -- PACKAGES...: `go build` in module DIR, printing
# every 30 s how many of the non-standard packages it needs have been compiled, because a cold
# build of Kubernetes runs for many minutes without a word otherwise. Compiler errors still show.
go_build_progress() {
  local label=$1 dir=$2
  shift 2
  local args=() pkgs=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do args+=("$1"); shift; done
  [ $# -gt 0 ] && shift
  pkgs=("$@")
  log "$label: resolving packages (downloads the Go modules the first time)"
  local total
  total=$(cd "$dir" && go list -deps -f '{{if not .Standard}}{{.ImportPath}}{{end}}' "${pkgs[@]}" | grep -c .)
  log "$label: compiling up to $total packages (cached ones are skipped)"
  local start=$SECONDS last=$SECONDS done=0 line status=0
  # -v names each package as it is compiled (a bare import path); anything else is an error
  # worth showing as it comes.
  (cd "$dir" && go build -v "${args[@]}" "${pkgs[@]}") 2>&1 | while IFS= read -r line; do
    if [[ $line =~ ^[^[:space:]:#]+$ ]]; then
      [[ ${line%%/*} == *.* ]] && done=$((done + 1))
    else
      printf '%s\n' "$line" >&2
    fi
    if [ $((SECONDS - last)) -ge 30 ]; then
      last=$SECONDS
      log "$label: $done/$total packages compiled ($((done * 100 / (total > 0 ? total : 1)))%), $(((SECONDS - start) / 60))m$(((SECONDS - start) % 60))s so far"
    fi
  done || status=$?
  return "$status"
}

# mounts_under PATH: every mount at or below PATH, deepest first.
mounts_under() {
  # mountinfo names real paths: resolve PATH first (a work tree's .cluster may be a symlink).
  local p
  p=$(readlink -f "$1" 2>/dev/null || echo "$1")
  awk -v p="$p" '$5 == p || index($5, p "/") == 1 {print $5}' /proc/self/mountinfo | sort -r
}

# registry_config FILE: the configuration of the local image registry on $KRS_REGISTRY. Its
# storage lives in the cache, so images pushed once (Kruise-rs's own) outlive the cluster.
registry_config() {
  mkdir -p "$(dirname "$1")" "$KRS_CACHE/registry"
  cat >"$1" <<EOF
version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: $KRS_CACHE/registry
  delete:
    enabled: true
http:
  addr: $KRS_REGISTRY
EOF
}

# registry_prune CONFIG: with the registry stopped, drops the tags the e2e suite pushed (unique
# tags, `PREFIX-` and 8 hex digits: e2e/src/cri.rs unique_tag) and collects the blobs nothing
# tagged refers to any more. Without it every run of the suite left its pull-test images (over a
# GiB) in the registry's storage, which outlives the cluster.
registry_prune() {
  local cfg=$1 root tags
  root=$(awk '/rootdirectory:/ {print $2}' "$cfg")
  tags="$root/docker/registry/v2/repositories/kruise-rs/testapp/_manifests/tags"
  if [ -d "$tags" ]; then
    find "$tags" -mindepth 1 -maxdepth 1 -type d -regextype posix-extended \
      -regex '.*/[a-z0-9-]+-[0-9a-f]{8}' -exec rm -rf {} +
  fi
  docker-registry garbage-collect --delete-untagged "$cfg" >/dev/null 2>&1 || true
}

# Certificates of a cluster: one CA in $KRS_PKI signs every serving and client certificate (the
# local cluster adds a front-proxy CA for the aggregation layer: `cert`'s CA argument).

# new_ca NAME CN: a self-signed CA in $KRS_PKI/NAME.{crt,key}, unless it exists.
new_ca() {
  mkdir -p "$KRS_PKI"
  [ -f "$KRS_PKI/$1.crt" ] && return 0
  openssl ecparam -name prime256v1 -genkey -noout -out "$KRS_PKI/$1.key" 2>/dev/null
  openssl req -x509 -new -key "$KRS_PKI/$1.key" -subj "/CN=$2" -days 3650 \
    -out "$KRS_PKI/$1.crt" 2>/dev/null
}

# make_ca CN: the cluster's CA in $KRS_PKI/ca.{crt,key}, and the ServiceAccount token signing key
# pair in $KRS_PKI/sa.{key,pub}, unless they exist.
make_ca() {
  new_ca ca "$1"
  if [ ! -f "$KRS_PKI/sa.key" ]; then
    openssl genrsa -out "$KRS_PKI/sa.key" 2048 2>/dev/null
    openssl rsa -in "$KRS_PKI/sa.key" -pubout -out "$KRS_PKI/sa.pub" 2>/dev/null
  fi
}

# cert NAME CN O SANS KIND [CA]: creates $KRS_PKI/NAME.{crt,key} unless it exists, signed by
# $KRS_PKI/CA.{crt,key} (default: ca, the cluster's CA).
cert() { # name CN O SANs(comma list or "") kind(server|client|both) [ca]
  local name=$1 cn=$2 org=$3 sans=$4 kind=$5 ca=${6:-ca} ext="$KRS_PKI/$1.ext"
  [ -f "$KRS_PKI/$name.crt" ] && return 0
  {
    echo "basicConstraints=CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    case $kind in
      server) echo "extendedKeyUsage=serverAuth" ;;
      client) echo "extendedKeyUsage=clientAuth" ;;
      both) echo "extendedKeyUsage=serverAuth,clientAuth" ;;
    esac
    [ -n "$sans" ] && echo "subjectAltName=$sans"
  } >"$ext"
  local subj="/CN=$cn"
  [ -n "$org" ] && subj="/O=$org$subj"
  openssl ecparam -name prime256v1 -genkey -noout -out "$KRS_PKI/$name.key" 2>/dev/null
  openssl req -new -key "$KRS_PKI/$name.key" -subj "$subj" -out "$KRS_PKI/$name.csr" 2>/dev/null
  openssl x509 -req -in "$KRS_PKI/$name.csr" -CA "$KRS_PKI/$ca.crt" -CAkey "$KRS_PKI/$ca.key" \
    -CAcreateserial -days 365 -extfile "$ext" -out "$KRS_PKI/$name.crt" 2>/dev/null
  rm -f "$KRS_PKI/$name.csr" "$ext"
}

kubeconfig() { # file user-cert-name
  local file=$1 user=$2
  cat >"$file" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: ${KRS_CLUSTER_NAME:-kruise-local}
  cluster:
    server: ${KRS_APISERVER_URL:-https://127.0.0.1:6443}
    certificate-authority-data: $(base64 -w0 <"$KRS_PKI/ca.crt")
users:
- name: $user
  user:
    client-certificate-data: $(base64 -w0 <"$KRS_PKI/$user.crt")
    client-key-data: $(base64 -w0 <"$KRS_PKI/$user.key")
contexts:
- name: ${KRS_CLUSTER_NAME:-kruise-local}
  context:
    cluster: ${KRS_CLUSTER_NAME:-kruise-local}
    user: $user
current-context: ${KRS_CLUSTER_NAME:-kruise-local}
EOF
  chmod 600 "$file"
}

# kubeconfigs USER...: $KRS_DIR/USER.kubeconfig for each client certificate USER (unless it
# exists); the first one, the admin, is also $KRS_DIR/kubeconfig.
kubeconfigs() {
  local u
  for u in "$@"; do
    [ -f "$KRS_DIR/$u.kubeconfig" ] || kubeconfig "$KRS_DIR/$u.kubeconfig" "$u"
  done
  cp "$KRS_DIR/$1.kubeconfig" "$KRS_DIR/kubeconfig"
}

# ---------------------------------------------------------------------------------------------
# Control-plane start-up shared by the local cluster (hack/cluster.sh) and the scale cluster
# (hack/scale-cluster.sh); each passes its own ports and the flags only it needs.

# start_etcd NAME CLIENT-PORT PEER-PORT METRICS-PORT QUOTA-BYTES: etcd with its data in
# $KRS_DIR/etcd, on 127.0.0.1 only; waits until it is healthy.
start_etcd() {
  local name=$1 client=$2 peer=$3 metrics=$4 quota=$5
  start etcd "$KRS_BIN_DIR/etcd" --name "$name" --data-dir "$KRS_DIR/etcd" \
    --listen-client-urls "http://127.0.0.1:$client" --advertise-client-urls "http://127.0.0.1:$client" \
    --listen-peer-urls "http://127.0.0.1:$peer" --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
    --initial-cluster "$name=http://127.0.0.1:$peer" --listen-metrics-urls "http://127.0.0.1:$metrics" \
    --quota-backend-bytes "$quota" --log-level warn
  wait_for etcd 60 curl -sf "http://127.0.0.1:$metrics/health"
}

# apiserver_ready: the API server at $KRS_APISERVER_URL answers /readyz to the admin.
apiserver_ready() {
  curl --silent --fail --max-time 3 --cacert "$KRS_PKI/ca.crt" \
    --cert "$KRS_PKI/admin.crt" --key "$KRS_PKI/admin.key" "${KRS_APISERVER_URL:-https://127.0.0.1:6443}/readyz"
}

# start_apiserver ETCD-PORT FLAGS...: kube-apiserver serving with $KRS_PKI's certificates and
# ServiceAccount keys, storing in the etcd on ETCD-PORT, plus the caller's FLAGS (address, port,
# Service range, admission and authorization); waits until it is ready.
start_apiserver() {
  local etcd_port=$1
  shift
  start kube-apiserver "$KRS_BIN_DIR/kube-apiserver" \
    --etcd-servers "http://127.0.0.1:$etcd_port" \
    --client-ca-file "$KRS_PKI/ca.crt" \
    --tls-cert-file "$KRS_PKI/apiserver.crt" --tls-private-key-file "$KRS_PKI/apiserver.key" \
    --service-account-key-file "$KRS_PKI/sa.pub" \
    --service-account-signing-key-file "$KRS_PKI/sa.key" \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --profiling=false "$@"
  wait_for kube-apiserver 120 apiserver_ready
}

# all_alive NAME...: every named component's recorded process runs.
all_alive() {
  local c
  for c in "$@"; do pid_alive "$c" || return 1; done
}

# print_status NAME...: one line a component: running (with its PID) or stopped.
print_status() {
  local c
  for c in "$@"; do
    if pid_alive "$c"; then echo "$c running (pid $(cat "$KRS_PIDS/$c.pid"))"; else echo "$c stopped"; fi
  done
}

# ---------------------------------------------------------------------------------------------
# Kruise-rs on a cluster: its CRDs and namespaces, on the cluster of $KUBECONFIG (default: the
# local cluster).

_kruise_kubectl() { "$KRS_BIN_DIR/kubectl" --kubeconfig "${KUBECONFIG:-$KRS_DIR/kubeconfig}" "$@"; }

# install_crds MODE [DIR]: every CRD of DIR (default deploy/crds) replaced whole if it exists.
# Replaced, not merged: a manager in dev mode points CRD conversion at a URL on this host, which an
# apply that sets the in-cluster Service would merge into an invalid config ("exactly one of url or
# service"); and OpenKruise's CRDs (the benchmarks' DIR) share names with ours, whose fields a
# merge would keep.
# MODE all: missing CRDs are created, then all are waited for until established.
# MODE existing-only: missing CRDs are left to the caller (hack/install.sh applies them with the
# rest of deploy/).
install_crds() {
  local mode=$1 dir=${2:-$KRS_ROOT/deploy/crds} crd
  for crd in "$dir"/*.yaml; do
    if _kruise_kubectl get -f "$crd" >/dev/null 2>&1; then
      _kruise_kubectl replace -f "$crd" >/dev/null
    elif [ "$mode" = all ]; then
      _kruise_kubectl create -f "$crd" >/dev/null
    fi
  done
  if [ "$mode" = all ]; then
    _kruise_kubectl wait --for condition=established --timeout 60s -f "$dir/" >/dev/null
  fi
}

# kruise_namespaces: the namespaces dev mode needs (the manager's, and the daemon's config).
kruise_namespaces() {
  local ns
  for ns in kruise-system kruise-daemon-config; do
    _kruise_kubectl create namespace "$ns" --dry-run=client -o yaml | _kruise_kubectl apply -f - >/dev/null
  done
}
