#!/usr/bin/env bash
# A Docker engine of Kruise-rs's own for kind, for machines that have none running: Debian's
# dockerd with a containerd of its own, each with its own socket, state and data directories, so
# that it never touches the containerd of the local cluster (hack/cluster.sh) or another engine.
# It leaves the host's firewall alone (--iptables=false): kind's nodes reach each other and the
# host over the bridge of their network, and nothing needs NAT.
#
#   kind/engine.sh up       idempotent: starts containerd and dockerd unless they run, waits
#   kind/engine.sh down     stops both (by PID), removes the containers, networks and the state
#   kind/engine.sh status   prints what runs
#   kind/engine.sh env      prints the DOCKER_HOST line to eval
#
# Data (images, the node image's layers) lives in $KRS_CACHE/kind/docker so that a node image
# built once is kept across `down`; `down --purge` removes that too.
set -euo pipefail
# shellcheck source=hack/lib.sh
source "$(dirname "$0")/../hack/lib.sh"

ENGINE_RUN=/run/kruise-kind
ENGINE_DATA="$KRS_CACHE/kind/docker"
KRS_LOGS="$KRS_DIR/kind/logs"
KRS_PIDS="$KRS_DIR/kind/pids"
DOCKER_SOCK="$ENGINE_RUN/docker.sock"
CONTAINERD_SOCK="$ENGINE_RUN/containerd.sock"

engine_ready() { DOCKER_HOST="unix://$DOCKER_SOCK" docker version >/dev/null 2>&1; }

cmd_up() {
  [ "$(id -u)" = 0 ] || { echo "kind/engine.sh starts dockerd and needs root" >&2; exit 1; }
  if pid_alive kind-dockerd && engine_ready; then
    return 0
  fi
  for tool in dockerd containerd docker; do
    command -v "$tool" >/dev/null || { echo "kind/engine.sh needs $tool (Debian: apt-get install docker.io)" >&2; exit 1; }
  done
  mkdir -p "$ENGINE_RUN" "$ENGINE_DATA" "$KRS_LOGS" "$KRS_PIDS"
  # Only the services dockerd uses: no CRI plugin, which would look for CNI and a kubelet.
  cat >"$ENGINE_RUN/containerd.toml" <<TOML
version = 2
root = "$ENGINE_DATA/containerd"
state = "$ENGINE_RUN/containerd"
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = "$CONTAINERD_SOCK"
TOML
  log "kind engine: starting containerd ($CONTAINERD_SOCK)"
  start kind-containerd containerd --config "$ENGINE_RUN/containerd.toml"
  wait_for kind-containerd 30 ctr --address "$CONTAINERD_SOCK" version
  log "kind engine: starting dockerd ($DOCKER_SOCK)"
  start kind-dockerd dockerd --host "unix://$DOCKER_SOCK" --containerd "$CONTAINERD_SOCK" \
    --data-root "$ENGINE_DATA/data" --exec-root "$ENGINE_RUN/exec" --pidfile "$ENGINE_RUN/dockerd.pid" \
    --iptables=false --ip-masq=false --bridge=none
  wait_for kind-dockerd 60 engine_ready
}

cmd_down() {
  if pid_alive kind-dockerd && engine_ready; then
    local ids
    ids=$(DOCKER_HOST="unix://$DOCKER_SOCK" docker ps -aq)
    # shellcheck disable=SC2086
    [ -z "$ids" ] || DOCKER_HOST="unix://$DOCKER_SOCK" docker rm -f $ids >/dev/null
    DOCKER_HOST="unix://$DOCKER_SOCK" docker network prune -f >/dev/null
  fi
  stop kind-dockerd 20
  # Shims of this containerd (its socket in their command line) outlive it: stop them too.
  local p cmd
  for p in /proc/[0-9]*; do
    cmd=$({ tr '\0' ' ' <"$p/cmdline"; } 2>/dev/null) || continue
    case $cmd in *containerd-shim*" -address $CONTAINERD_SOCK "*) kill -KILL "${p#/proc/}" 2>/dev/null || true ;; esac
  done
  stop kind-containerd 10
  local m
  for m in $(mounts_under "$ENGINE_RUN"); do
    umount -l "$m" 2>/dev/null || true
  done
  rm -rf "$ENGINE_RUN"
  if [ "${1:-}" = --purge ]; then
    for m in $(mounts_under "$ENGINE_DATA"); do
      umount -l "$m" 2>/dev/null || true
    done
    rm -rf "$ENGINE_DATA"
  fi
}

case ${1:-} in
  up) cmd_up ;;
  down) shift; cmd_down "$@" ;;
  status) print_status kind-containerd kind-dockerd ;;
  env) echo "export DOCKER_HOST=unix://$DOCKER_SOCK" ;;
  *) echo "usage: $0 up|down [--purge]|status|env" >&2; exit 2 ;;
esac
