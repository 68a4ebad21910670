#!/usr/bin/env bash
# Builds Helm from its Go module into the versioned cache and prints the binary's path. The chart
# tests (hack/helm-chart.sh check, the e2e plugin_install test) call this; the first build takes
# a few minutes, later calls return at once.
set -euo pipefail
HELM_VERSION=${HELM_VERSION:-v3.22.0}
cache=${KRS_CACHE:-$HOME/.cache/kruise-rs}
dir="$cache/helm-$HELM_VERSION"
bin="$dir/helm"
# The version is read from the module information Go embeds in the binary.
is_pinned() { go version -m "$1" 2>/dev/null | grep -qE "^[[:space:]]+mod[[:space:]]+helm.sh/helm/v3[[:space:]]+${HELM_VERSION}[[:space:]]"; }
if [ -x "$bin" ] && is_pinned "$bin"; then
  echo "$bin"
  exit 0
fi
mkdir -p "$dir"
echo "==> building helm ${HELM_VERSION} from its Go module (a few minutes)" >&2
tmp=$(mktemp -d "$dir/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
CGO_ENABLED=0 GOBIN="$tmp" go install -trimpath -ldflags "-s -w" "helm.sh/helm/v3/cmd/helm@${HELM_VERSION}" >&2
mv "$tmp/helm" "$bin"
echo "$bin"
