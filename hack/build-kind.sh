#!/usr/bin/env bash
# Builds kind from its Go module (tools/kind) into the versioned binary cache next to the
# Kubernetes binaries. Only kind/up.sh calls this, so the local cluster and the test suite never
# pay for the build.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=hack/versions.sh
source "$here/hack/versions.sh"

bin="$KRS_BIN_DIR"
mkdir -p "$bin"
# The version is read from the module information Go embeds in the binary.
is_pinned() { go version -m "$1" 2>/dev/null | grep -qE "^[[:space:]]+(mod|dep)[[:space:]]+sigs.k8s.io/kind[[:space:]]+${KIND_VERSION}[[:space:]]"; }
if [ -x "$bin/kind" ] && is_pinned "$bin/kind"; then
  echo "==> kind ${KIND_VERSION} ready in $bin"
  exit 0
fi
echo "==> building kind ${KIND_VERSION} from its Go module (a minute or two)"
tmp=$(mktemp -d "$bin/.build.XXXXXX")
(cd "$here/tools/kind" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$tmp/kind" sigs.k8s.io/kind)
mv "$tmp/kind" "$bin/kind"
rmdir "$tmp"
echo "==> kind ${KIND_VERSION} ready in $bin"
