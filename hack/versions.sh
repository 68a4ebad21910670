# shellcheck shell=bash
# Pinned versions of the local cluster, sourced by the hack/ scripts. Keep in step with tools/*/go.mod.
K8S_VERSION=v1.34.4
ETCD_VERSION=v3.6.16
# Simulated nodes of the scale benchmark only (hack/build-kwok.sh); tools/kwok/go.mod pins it too.
KWOK_VERSION=v0.8.0
# kind/up.sh only (hack/build-kind.sh); tools/kind/go.mod pins it too.
KIND_VERSION=v0.33.0
# The local cluster's add-ons (hack/build-addons.sh); tools/coredns,
# tools/local-path-provisioner and tools/metrics-server pin them too.
COREDNS_VERSION=v1.14.1
LOCAL_PATH_PROVISIONER_VERSION=v0.0.30
METRICS_SERVER_VERSION=v0.8.0
# The CSI sidecars of the local cluster's expandable storage (hack/build-addons.sh); tools/csi
# pins them too.
CSI_PROVISIONER_VERSION=v5.3.0
CSI_RESIZER_VERSION=v1.14.0
# The behaviour suite's runner (hack/build-nextest.sh).
NEXTEST_VERSION=0.9.128
KRS_CACHE=${KRS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kruise-rs}
KRS_BIN_DIR="$KRS_CACHE/k8s-${K8S_VERSION}-etcd-${ETCD_VERSION}/bin"
export K8S_VERSION ETCD_VERSION KWOK_VERSION KIND_VERSION COREDNS_VERSION LOCAL_PATH_PROVISIONER_VERSION METRICS_SERVER_VERSION CSI_PROVISIONER_VERSION CSI_RESIZER_VERSION NEXTEST_VERSION KRS_CACHE KRS_BIN_DIR
