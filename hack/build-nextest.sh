#!/usr/bin/env bash
# Builds cargo-nextest, the runner of the behaviour suite (.config/nextest.toml), from its crate
# at a pinned version into ~/.cache/kruise-rs/nextest (once per machine) and prints the path of
# the binary. cargo finds it as `cargo nextest` when that directory's bin/ is on PATH.
set -euo pipefail
# shellcheck source=hack/lib.sh
source "$(dirname "$0")/lib.sh"
root="$KRS_CACHE/nextest-$NEXTEST_VERSION"
if [ ! -x "$root/bin/cargo-nextest" ]; then
  log "building cargo-nextest $NEXTEST_VERSION (once per machine)"
  cargo install --locked --quiet cargo-nextest --version "$NEXTEST_VERSION" --root "$root"
fi
echo "$root/bin/cargo-nextest"
