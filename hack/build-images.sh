#!/usr/bin/env bash
# Builds the kruise-manager and kruise-daemon images without a Docker engine and pushes them to a
# registry (default: the local cluster's, 127.0.0.1:5000) as kruise-rs/kruise-{manager,daemon}:dev,
# and writes their digests to .cluster/images.env (KRUISE_MANAGER_IMAGE=…@sha256:…) for install.
# Each image is two layers: the glibc runtime the binary links against (found with ldd) and the
# stripped binary. Release (optimised) binaries by default, as users get them; PROFILE=dev builds
# unoptimised ones (faster to build, for iterating on the in-cluster install).
# Users with Docker can use the Dockerfiles in the repository root instead.
set -euo pipefail
# shellcheck source=hack/lib.sh
source "$(dirname "$0")/lib.sh"
cd "$KRS_ROOT"

registry=${KRS_REGISTRY:-127.0.0.1:5000}
tag=${TAG:-dev}
profile=${PROFILE:-release}
target=${CARGO_TARGET_DIR:-$KRS_ROOT/target}
outdir=$target/release
[ "$profile" = dev ] && outdir=$target/debug

log "building kruise-manager and kruise-daemon ($profile profile)"
build_components "$profile"

work="$KRS_DIR/image-build"
rm -rf "$work"
for bin in kruise-manager kruise-daemon; do
  libs="$work/$bin-libs"
  app="$work/$bin-app"
  mkdir -p "$libs/etc" "$libs/tmp" "$app/usr/local/bin"
  chmod 1777 "$libs/tmp"
  # The shared libraries the binary needs, at the paths the loader looks them up.
  for lib in $(ldd "$outdir/$bin" | awk '/=>/ {print $3} /^\s*\/lib/ {print $1}'); do
    mkdir -p "$libs$(dirname "$lib")"
    cp -L "$lib" "$libs$lib"
  done
  if [ -e /lib64/ld-linux-x86-64.so.2 ]; then
    mkdir -p "$libs/lib64"
    cp -L /lib64/ld-linux-x86-64.so.2 "$libs/lib64/"
  fi
  printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$libs/etc/passwd"
  printf 'root:x:0:\nnonroot:x:65532:\n' >"$libs/etc/group"
  install -m 0755 "$outdir/$bin" "$app/usr/local/bin/$bin"
  strip "$app/usr/local/bin/$bin"
  log "pushing $registry/kruise-rs/$bin:$tag"
  out=$(python3 hack/oci_image.py --registry "$registry" --name "kruise-rs/$bin" --tag "$tag" \
    --layer "$libs" --layer "$app" --entrypoint "[\"/usr/local/bin/$bin\"]" \
    --label "org.opencontainers.image.title=$bin")
  echo "$out"
  digest=$(awk '{for (i = 1; i < NF; i++) if ($i == "manifest") print $(i + 1)}' <<<"$out")
  var=$(tr 'a-z-' 'A-Z_' <<<"$bin")_IMAGE
  echo "$var=$registry/kruise-rs/$bin@$digest" >>"$work/images.env"
done
mv "$work/images.env" "$KRS_DIR/images.env"
