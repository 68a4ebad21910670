#!/usr/bin/env bash
# Builds kwok (simulated nodes and pods: the scale cluster of `make bench-scale` and of the
# multi-node e2e tests that `make test` runs) from its Go module (tools/kwok) into the versioned
# binary cache next to the Kubernetes binaries. The local cluster itself never needs it.
#   KWOK_PREBUILT=/path/to/kwok   take a binary already built from tools/kwok (its embedded module
#                                 version must be $KWOK_VERSION)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=hack/versions.sh
source "$here/hack/versions.sh"

bin="$KRS_BIN_DIR"
mkdir -p "$bin"

# The version is read from the module information Go embeds in the binary.
is_pinned() { go version -m "$1" 2>/dev/null | grep -qE "^[[:space:]]+mod[[:space:]]+sigs.k8s.io/kwok[[:space:]]+${KWOK_VERSION}[[:space:]]"; }

if [ -x "$bin/kwok" ] && is_pinned "$bin/kwok"; then
  echo "==> kwok ${KWOK_VERSION} ready in $bin"
  exit 0
fi
tmp=$(mktemp -d "$bin/.build.XXXXXX")
if [ -n "${KWOK_PREBUILT:-}" ] && is_pinned "$KWOK_PREBUILT"; then
  echo "==> taking kwok ${KWOK_VERSION} from $KWOK_PREBUILT"
  cp "$KWOK_PREBUILT" "$tmp/kwok"
else
  echo "==> building kwok ${KWOK_VERSION} from its Go module; a cold build takes about 10 minutes on 2 cores"
  (cd "$here/tools/kwok" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$tmp/kwok" sigs.k8s.io/kwok/cmd/kwok)
fi
mv "$tmp/kwok" "$bin/kwok"
rmdir "$tmp"
echo "==> kwok ${KWOK_VERSION} ready in $bin"
