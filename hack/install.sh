#!/usr/bin/env bash
# Installs Kruise-rs from deploy/ on the cluster in $KUBECONFIG (default: the local cluster), with
# the images hack/build-images.sh pushed (pinned by digest), and waits until every component is
# ready (each rollout within KRUISE_INSTALL_TIMEOUT, default 300s).  hack/install.sh uninstall
# removes it all and leaves the cluster as it was.
set -euo pipefail
# shellcheck source=hack/lib.sh
source "$(dirname "$0")/lib.sh"
cd "$KRS_ROOT"
export KUBECONFIG=${KUBECONFIG:-$KRS_DIR/kubeconfig}
k() { "$KRS_BIN_DIR/kubectl" "$@"; }

if [ "${1:-}" = uninstall ]; then
  log "removing Kruise-rs"
  # Objects of the Kruise kinds go first, while the manager can still finalize them.
  # Each CRD file is named GROUP_PLURAL.yaml, so a new kind is covered without a list to update.
  for crd in deploy/crds/*.yaml; do
    f=$(basename "$crd" .yaml)
    k delete "${f#*_}.${f%%_*}" --all -A --ignore-not-found --wait=true --timeout=120s >/dev/null 2>&1 || true
  done
  k delete mutatingwebhookconfiguration kruise-mutating-webhook-configuration --ignore-not-found
  k delete validatingwebhookconfiguration kruise-validating-webhook-configuration --ignore-not-found
  k delete -k deploy/ --ignore-not-found --wait=true --timeout=180s
  log "Kruise-rs removed"
  exit 0
fi

# Cargo and the registry skip what has not changed, so this is quick when nothing did.
hack/build-images.sh
# shellcheck disable=SC1091
source "$KRS_DIR/images.env"
# The overlay lives in the work tree (target/ is ignored), not in .cluster: kustomize resolves
# symlinks, and a worktree whose .cluster links to another tree's would apply that tree's deploy/.
install_dir="$KRS_ROOT/target/install"
mkdir -p "$install_dir"
cat >"$install_dir/kustomization.yaml" <<YAML
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - ../../deploy
images:
  - name: kruise-rs/kruise-manager
    newName: ${KRUISE_MANAGER_IMAGE%@*}
    digest: ${KRUISE_MANAGER_IMAGE#*@}
  - name: kruise-rs/kruise-daemon
    newName: ${KRUISE_DAEMON_IMAGE%@*}
    digest: ${KRUISE_DAEMON_IMAGE#*@}
YAML
# CRDs left by dev mode (hack/dev-up.sh, kubectl kruise dev) point conversion at a URL on the
# host; an apply would merge deploy/'s Service into that and be refused, so existing CRDs are
# replaced whole first; the apply creates the missing ones.
install_crds existing-only
log "applying deploy/ with $KRUISE_MANAGER_IMAGE and $KRUISE_DAEMON_IMAGE"
k apply --server-side --force-conflicts -k "$install_dir" >/dev/null
log "waiting for the manager and the daemon"
k -n kruise-system rollout status deployment/kruise-controller-manager --timeout="${KRUISE_INSTALL_TIMEOUT:-300s}"
k -n kruise-system rollout status daemonset/kruise-daemon --timeout="${KRUISE_INSTALL_TIMEOUT:-300s}"
k wait --for condition=established --timeout=60s -f deploy/crds/ >/dev/null
log "Kruise-rs is installed"
