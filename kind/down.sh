#!/usr/bin/env bash
# Removes what kind/up.sh made: the kind cluster, its network, the registry proxy (and the
# registry, if kind/up.sh started it), and our Docker engine unless DOCKER_HOST names another.
# The node image stays in the engine's data for the next kind/up.sh (kind/engine.sh down --purge
# removes it).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=hack/lib.sh
source "$here/hack/lib.sh"
KRS_PIDS="$KRS_DIR/kind/pids"
export KRS_PIDS
own_engine=
engine_env=$("$here/kind/engine.sh" env)
if [ -z "${DOCKER_HOST:-}" ] || [ "export DOCKER_HOST=$DOCKER_HOST" = "$engine_env" ]; then
  own_engine=1
  eval "$engine_env"
fi
export DOCKER_HOST
if docker version >/dev/null 2>&1; then
  if [ -x "$KRS_BIN_DIR/kind" ]; then
    "$KRS_BIN_DIR/kind" delete cluster --name kruise-rs >/dev/null 2>&1 || true
  fi
  docker network rm kruise-kind >/dev/null 2>&1 || true
fi
stop kind-registry-proxy
if pid_alive kind-registry; then
  stop kind-registry
  registry_prune "$KRS_DIR/kind/registry/config.yml"
fi
rm -f "$KRS_DIR/kind/kubeconfig"
rm -rf "$KRS_DIR/kind/addon-images"
[ -z "$own_engine" ] || "$here/kind/engine.sh" down
