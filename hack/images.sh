#!/usr/bin/env bash
# Builds the local cluster's images here (no Docker, nothing pulled from outside) and pushes them to
# the local registry: the sandbox image containerd uses, and the test images of the e2e suite.
#   kruise-rs/pause:3.10             static sandbox process (hack/images/pause.c)
#   kruise-rs/testapp:v1 v2 v3       busybox-static HTTP server on :8080; each tag has its own image ID
#   kruise-rs/testapp:v1-retag       the same image as v1 under another tag (same image ID)
#   kruise-rs/sidecar:v1 v2          busybox-static idler, for multi-container Pods
#   kruise-rs/sidecar:empty          the same idler as a hot-upgrade sidecar's hotUpgradeEmptyImage
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=hack/lib.sh
source "$here/hack/lib.sh"

registry=${KRS_REGISTRY:-127.0.0.1:5000}
work="$KRS_DIR/images"
rm -rf "$work"
mkdir -p "$work"

# The pause binary is built once per machine and cached with the Kubernetes binaries.
pause_bin="$KRS_CACHE/pause-$(sha256sum "$here/hack/images/pause.c" | cut -c1-12)"
if [ ! -x "$pause_bin" ]; then
  gcc -O2 -static -o "$pause_bin.tmp" "$here/hack/images/pause.c"
  mv "$pause_bin.tmp" "$pause_bin"
fi
mkdir -p "$work/pause"
install -m 0755 "$pause_bin" "$work/pause/pause"

# One busybox layer shared by every test image, so a tag change pulls only the small top layer.
busybox=$(command -v busybox)
mkdir -p "$work/busybox/bin" "$work/busybox/tmp" "$work/busybox/etc"
install -m 0755 "$busybox" "$work/busybox/bin/busybox"
for applet in $("$busybox" --list); do
  [ "$applet" = busybox ] || ln -sf busybox "$work/busybox/bin/$applet"
done
chmod 1777 "$work/busybox/tmp"
echo 'root:x:0:0:root:/root:/bin/sh' > "$work/busybox/etc/passwd"
echo 'nobody:x:65534:65534:nobody:/:/bin/false' >> "$work/busybox/etc/passwd"
printf 'root:x:0:\nnobody:x:65534:\n' > "$work/busybox/etc/group"

top_layer() { # name version script
  local dir="$work/$1-$2"
  mkdir -p "$dir/www" "$dir/usr/local/bin"
  echo "$2" > "$dir/VERSION"
  echo "<h1>$1 $2</h1>" > "$dir/www/index.html"
  install -m 0755 "$here/hack/images/$3" "$dir/usr/local/bin/$1"
  echo "$dir"
}

push() { python3 "$here/hack/oci_image.py" --registry "$registry" "$@"; }

push --name kruise-rs/pause --tag 3.10 --layer "$work/pause" --entrypoint '["/pause"]'
push --name kruise-rs/testapp --tag v1 --tag v1-retag --layer "$work/busybox" \
  --layer "$(top_layer testapp v1 serve.sh)" --cmd '["/usr/local/bin/testapp"]'
for v in v2 v3; do
  push --name kruise-rs/testapp --tag "$v" --layer "$work/busybox" \
    --layer "$(top_layer testapp "$v" serve.sh)" --cmd '["/usr/local/bin/testapp"]'
done
for v in v1 v2 empty; do
  push --name kruise-rs/sidecar --tag "$v" --layer "$work/busybox" \
    --layer "$(top_layer sidecar "$v" idle.sh)" --cmd '["/usr/local/bin/sidecar"]'
done
