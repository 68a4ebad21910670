#!/usr/bin/env bash
# Removes the kind cluster and the registry container kind/up.sh created.
set -euo pipefail
kind delete cluster --name kruise-rs
docker rm -f kind-registry >/dev/null 2>&1 || true
