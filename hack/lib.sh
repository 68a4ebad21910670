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
export KRS_ROOT KRS_DIR KRS_LOGS KRS_PIDS KRS_PKI KRS_REGISTRY KRS_NODE KRS_CONTAINERD_SOCK KRS_CONTAINERD_STATE KRS_POD_CIDR KRS_SERVICE_CIDR

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

# Certificates of a cluster: one CA in $KRS_PKI signs every serving and client certificate.
# cert NAME CN O SANS KIND: creates $KRS_PKI/NAME.{crt,key} unless it exists.

cert() { # name CN O SANs(comma list or "") kind(server|client|both)
  local name=$1 cn=$2 org=$3 sans=$4 kind=$5 ext="$KRS_PKI/$1.ext"
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
  openssl x509 -req -in "$KRS_PKI/$name.csr" -CA "$KRS_PKI/ca.crt" -CAkey "$KRS_PKI/ca.key" \
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
