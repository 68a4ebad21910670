#!/usr/bin/env bash
# Packs the krew archive of kubectl-kruise for this host, the layout cli/krew/kruise.yaml names:
#   kubectl-kruise, kubectl_complete-kruise, LICENSE at the archive's root.
#   hack/release-archive.sh [OUT_DIR]     release build, then OUT_DIR/kubectl-kruise-OS-ARCH.tar.gz
#                                         (default OUT_DIR: dist/); prints the path and its sha256
#   KRUISE_ARCHIVE_BIN=PATH ...           pack that binary instead of building (the krew test)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/dist}
os=$(uname -s | tr '[:upper:]' '[:lower:]')
case $(uname -m) in
  x86_64 | amd64) arch=amd64 ;;
  aarch64 | arm64) arch=arm64 ;;
  *) echo "unsupported architecture $(uname -m)" >&2; exit 1 ;;
esac
bin=${KRUISE_ARCHIVE_BIN:-}
if [ -z "$bin" ]; then
  (cd "$root" && cargo build --release -p kubectl-kruise --bin kubectl-kruise >&2)
  bin=${CARGO_TARGET_DIR:-$root/target}/release/kubectl-kruise
fi
mkdir -p "$out"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
install -m 0755 "$bin" "$stage/kubectl-kruise"
install -m 0755 "$root/cli/kubectl_complete-kruise" "$stage/kubectl_complete-kruise"
install -m 0644 "$root/LICENSE" "$stage/LICENSE"
archive="$out/kubectl-kruise-$os-$arch.tar.gz"
# Fixed owner and order, so the same binary gives the same archive (and sha256).
tar -C "$stage" --owner=0 --group=0 --numeric-owner --sort=name -czf "$archive" \
  kubectl-kruise kubectl_complete-kruise LICENSE
echo "$archive"
sha256sum "$archive" | cut -d' ' -f1
