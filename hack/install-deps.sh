#!/usr/bin/env bash
# Installs the Debian packages the local cluster and the build need, if any is missing: containerd,
# runc and the CNI plugins, the image registry, protoc (CRI bindings), a static busybox (test
# images), iptables/conntrack (kube-proxy), shellcheck and tmux (script lint, live-view tests).
# `hack/install-deps.sh kind` adds what kind/up.sh needs: a Docker engine and debootstrap (the
# node image's root file system).
set -euo pipefail
pkgs=(containerd runc containernetworking-plugins docker-registry protobuf-compiler busybox-static
  iptables conntrack socat ethtool iproute2 kmod openssl curl gcc libc6-dev shellcheck tmux)
[ "${1:-}" = kind ] && pkgs+=(docker.io debootstrap)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "==> installing Debian packages: ${missing[*]}" >&2
  if [ "$(id -u)" != 0 ]; then
    echo "missing packages and not root: run 'sudo apt-get install ${missing[*]}'" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # The packages' init scripts must not start system-wide copies of containerd or the registry.
  printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
  chmod +x /usr/sbin/policy-rc.d
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  rm -f /usr/sbin/policy-rc.d
fi
command -v go >/dev/null || { echo "Go is required to build Kubernetes (https://go.dev/dl)" >&2; exit 1; }
command -v cargo >/dev/null || { echo "Rust (cargo) is required (https://rustup.rs)" >&2; exit 1; }
