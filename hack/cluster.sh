#!/usr/bin/env bash
# The local single-node Kubernetes cluster: upstream components built from their Go modules
# (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kube-proxy), containerd
# and runc and the CNI plugins from Debian, and a registry on 127.0.0.1:5000 with images built here.
# Add-ons, also host processes built from their Go modules: CoreDNS behind the kube-dns Service
# (cluster DNS), rancher's local-path-provisioner behind the default StorageClass `local-path`, and
# metrics-server behind the APIService v1beta1.metrics.k8s.io (`kubectl top`, `kubectl kruise top`).
#
#   hack/cluster.sh up      idempotent: builds what is missing, starts what is not running, waits
#   hack/cluster.sh down    stops everything it started (by PID), removes mounts, netns and state
#   hack/cluster.sh status  prints what runs
#   hack/cluster.sh restart etcd|kube-apiserver|kubelet [SIGNAL]
#                           kills one (SIGKILL unless SIGNAL) and starts it again as `up` does
#
# State lives in .cluster/ (git-ignored): kubeconfig, bin/kubectl, logs/, pids/, pki/, data dirs.
# KRS_KUBELET_V (default 1): the kubelet's log verbosity, e.g. 4 to see its pod syncs in
# .cluster/logs/kubelet.log when timing what the kubelet does with a Pod.
set -euo pipefail
# shellcheck source=hack/lib.sh
source "$(dirname "$0")/lib.sh"

# Order matters: started left to right, stopped right to left.
CORE=(registry containerd etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy)
ADDONS=(coredns local-path-provisioner metrics-server csi-hostpath csi-provisioner csi-resizer)
COMPONENTS=("${CORE[@]}" "${ADDONS[@]}")
# CoreDNS's health and readiness endpoints (its DNS port is 53 on the node's address).
KRS_DNS_HEALTH=127.0.0.1:10054
KRS_DNS_READY=127.0.0.1:10055
# metrics-server's HTTPS port on the node's address (the kubelet has 10250).
KRS_METRICS_PORT=4443
# The provisioner's volumes: removed with the cluster. The real path, since volumes record it and
# a work tree's .cluster may be a symlink to another's.
KRS_VOLUMES="$(readlink -f "$KRS_DIR" || echo "$KRS_DIR")/local-path"
# Its helper Pods create and remove the volume directories with a shell: our busybox image.
KRS_HELPER_IMAGE="$KRS_REGISTRY/kruise-rs/sidecar:v1"
# The expandable CSI storage (StorageClass allow-volume-expansion): its volumes' directories,
# removed with the cluster, and its socket (short and fixed: a unix socket path has at most 107
# bytes, and the kubelet is told this one).
KRS_CSI_VOLUMES="$(readlink -f "$KRS_DIR" || echo "$KRS_DIR")/csi-volumes"
KRS_CSI_SOCK=/run/kruise-rs-csi/csi.sock
KRS_CSI_DRIVER=hostpath.csi.kruise-rs

need_root() {
  [ "$(id -u)" = 0 ] || { echo "the local cluster runs a kubelet and containerd and needs root (try: sudo make cluster-up)" >&2; exit 1; }
}

# ---------------------------------------------------------------------------------------------
# Certificates: one CA signs every serving and client certificate of the cluster (make_ca, cert
# and kubeconfigs live in lib.sh, shared with hack/scale-cluster.sh), but for the aggregation
# layer's: a front-proxy CA signs the client certificate the API server presents to an aggregated
# API server (metrics-server), which trusts only that CA and that name for the user it forwards.

make_pki() {
  local ip=$1
  make_ca kruise-local-ca
  cert apiserver kube-apiserver "" \
    "DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,IP:127.0.0.1,IP:10.96.0.1,IP:$ip" server
  cert apiserver-kubelet-client kube-apiserver-kubelet-client system:masters "" client
  cert admin kubernetes-admin system:masters "" client
  cert controller-manager system:kube-controller-manager "" "" client
  cert scheduler system:kube-scheduler "" "" client
  cert kube-proxy system:kube-proxy "" "" client
  cert kubelet-client "system:node:$KRS_NODE" system:nodes "" client
  cert kubelet "$KRS_NODE" "" "DNS:$KRS_NODE,DNS:localhost,IP:127.0.0.1,IP:$ip" server
  # The add-ons' identities; hack/manifests grants them their roles.
  cert coredns system:coredns "" "" client
  cert local-path-provisioner system:local-path-provisioner "" "" client
  cert metrics-server system:metrics-server "" "" client
  # The CSI sidecars act as cluster administrators of this throwaway cluster.
  cert csi system:csi-hostpath system:masters "" client
  # The name the API server checks on the aggregated API's certificate is the Service's DNS name.
  cert metrics-server-serving metrics-server.kube-system.svc "" \
    "DNS:metrics-server.kube-system.svc,DNS:metrics-server.kube-system.svc.$KRS_CLUSTER_DOMAIN,IP:$ip" server
  new_ca front-proxy-ca kruise-local-front-proxy-ca
  cert front-proxy-client front-proxy-client "" "" client front-proxy-ca
  kubeconfigs admin controller-manager scheduler kube-proxy kubelet-client coredns local-path-provisioner \
    metrics-server csi
}

# ---------------------------------------------------------------------------------------------
# Configuration files.

write_configs() {
  local ip=$1
  mkdir -p "$KRS_DIR/cni/net.d" "$KRS_DIR/containerd/certs.d/$KRS_REGISTRY" "$KRS_DIR/registry"
  registry_config "$KRS_DIR/registry/config.yml"
  # Plain HTTP for the local registry only.
  cat >"$KRS_DIR/containerd/certs.d/$KRS_REGISTRY/hosts.toml" <<EOF
server = "http://$KRS_REGISTRY"

[host."http://$KRS_REGISTRY"]
  capabilities = ["pull", "resolve", "push"]
EOF
  cat >"$KRS_DIR/containerd/config.toml" <<EOF
version = 2
root = "$KRS_DIR/containerd/root"
state = "$KRS_CONTAINERD_STATE"

[grpc]
  address = "$KRS_CONTAINERD_SOCK"

[plugins."io.containerd.grpc.v1.cri"]
  # Sandboxes like this one withhold CAP_SYS_RESOURCE, so lowering a process's OOM score is
  # refused; clamp the kubelet's scores to containerd's own instead of failing every Pod.
  restrict_oom_score_adj = true
  sandbox_image = "$KRS_REGISTRY/kruise-rs/pause:3.10"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$KRS_DIR/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "$KRS_DIR/containerd/certs.d"
EOF
  # Pods get addresses on a host-local bridge. No masquerading: Pods have no way out of this
  # machine, and a FORWARD rule below drops anything that tries.
  cat >"$KRS_DIR/cni/net.d/10-kruise.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "kruise-local",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "$KRS_POD_CIDR"}]],
        "routes": [{"dst": "0.0.0.0/0"}],
        "dataDir": "$KRS_DIR/cni/ipam"
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
  cat >"$KRS_DIR/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: $KRS_PKI/ca.crt
authorization:
  mode: Webhook
tlsCertFile: $KRS_PKI/kubelet.crt
tlsPrivateKeyFile: $KRS_PKI/kubelet.key
containerRuntimeEndpoint: unix://$KRS_CONTAINERD_SOCK
cgroupDriver: cgroupfs
# These machines run cgroup v1; Kubernetes 1.34 still supports it when told to.
failCgroupV1: false
failSwapOn: false
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
serializeImagePulls: false
resolvConf: /etc/resolv.conf
clusterDNS: [$KRS_DNS_IP]
clusterDomain: $KRS_CLUSTER_DOMAIN
# A dev machine's disk is shared with builds: do not evict test Pods over disk usage.
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%
  nodefs.inodesFree: 1%
  imagefs.available: 1%
imageGCHighThresholdPercent: 99
imageGCLowThresholdPercent: 98
nodeStatusUpdateFrequency: 5s
maxPods: 250
EOF
  cat >"$KRS_DIR/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: $KRS_DIR/kube-proxy.kubeconfig
mode: iptables
clusterCIDR: $KRS_POD_CIDR
hostnameOverride: $KRS_NODE
bindAddress: 0.0.0.0
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
conntrack:
  maxPerCore: 0
EOF
}

# ---------------------------------------------------------------------------------------------
# Network plumbing of the host.

# The KUBE-* chains of every table, one `TOOL TABLE CHAIN` a line (iptables and ip6tables).
kube_chains() {
  local tool
  for tool in iptables ip6tables; do
    command -v "$tool-save" >/dev/null || continue
    "$tool-save" 2>/dev/null | awk -v tool="$tool" '/^\*/ {t = substr($0, 2)} /^:KUBE-/ {print tool, t, substr($1, 2)}'
  done
}

# remove_new_kube_chains BEFORE: deletes the KUBE-* chains that are not listed in BEFORE, after
# removing the rules (in any chain) that jump to them. Without BEFORE nothing is removed.
remove_new_kube_chains() {
  local before=$1 tool table chain from num
  [ -f "$before" ] || return 0
  local new
  new=$(kube_chains | grep -vxF -f "$before" || true)
  [ -n "$new" ] || return 0
  while read -r tool table chain; do
    # Rules elsewhere that jump to the chain, deleted by number (highest first, so the others
    # keep theirs); numbers avoid re-parsing the saved rules' quoted comments.
    for from in $("$tool-save" -t "$table" 2>/dev/null | awk -v c="$chain" '$1 == "-A" && / -j / {for (i = 1; i < NF; i++) if ($i == "-j" && $(i + 1) == c) print $2}' | sort -u); do
      "$tool" -t "$table" -L "$from" -n --line-numbers 2>/dev/null | awk -v c="$chain" '$2 == c {print $1}' | sort -rn |
        while read -r num; do "$tool" -t "$table" -D "$from" "$num" 2>/dev/null || true; done
    done
  done <<<"$new"
  while read -r tool table chain; do
    "$tool" -t "$table" -F "$chain" 2>/dev/null || true
  done <<<"$new"
  while read -r tool table chain; do
    "$tool" -t "$table" -X "$chain" 2>/dev/null || true
  done <<<"$new"
}

# PIDs of the shims serving this cluster's containerd: a shim of this socket (`-address`) for a
# task whose bundle lives in this cluster's containerd state dir (`-id`).
our_shim_pids() {
  local ids=" " d p cmd
  for d in "$KRS_CONTAINERD_STATE"/io.containerd.runtime.v2.task/*/*/; do
    [ -d "$d" ] && ids+="$(basename "$d") "
  done
  [ "$ids" != " " ] || return 0
  for p in /proc/[0-9]*; do
    cmd=$({ tr '\0' ' ' <"$p/cmdline"; } 2>/dev/null) || continue
    case $cmd in
      *containerd-shim*" -address $KRS_CONTAINERD_SOCK"*) ;;
      *) continue ;;
    esac
    local id=${cmd##* -id }
    id=${id%% *}
    case $ids in *" $id "*) echo "${p#/proc/}" ;; esac
  done
}

host_network() {
  sysctl -qw net.ipv4.ip_forward=1
  modprobe br_netfilter 2>/dev/null || true
  if [ -e /proc/sys/net/bridge/bridge-nf-call-iptables ]; then
    sysctl -qw net.bridge.bridge-nf-call-iptables=1
  fi
  # Pods talk to each other, to the host and to Services, and to nothing beyond this machine.
  iptables -C FORWARD -i cni0 ! -o cni0 -j DROP 2>/dev/null || iptables -I FORWARD -i cni0 ! -o cni0 -j DROP
  # Service addresses are only ever rewritten by kube-proxy; never send them out of the machine.
  # A REJECT in OUTPUT (it sees addresses after kube-proxy's DNAT) rather than an unreachable
  # route: the route lookup for a host-network Pod (kruise-daemon) happens before the DNAT, so an
  # unreachable route would keep it from ever reaching the API server at its Service address.
  ip route del unreachable "$KRS_SERVICE_CIDR" 2>/dev/null || true
  iptables -C OUTPUT -d "$KRS_SERVICE_CIDR" -j REJECT 2>/dev/null ||
    iptables -I OUTPUT -d "$KRS_SERVICE_CIDR" -j REJECT
}

# ---------------------------------------------------------------------------------------------
# Add-ons: cluster DNS and the default StorageClass.

# manifest FILE IP: hack/manifests/FILE with its @NAME@ placeholders filled in.
manifest() {
  sed -e "s|@DNS_IP@|$KRS_DNS_IP|g" -e "s|@NODE_IP@|$2|g" -e "s|@NODE@|$KRS_NODE|g" \
    -e "s|@DATA_DIR@|$KRS_VOLUMES|g" -e "s|@HELPER_IMAGE@|$KRS_HELPER_IMAGE|g" \
    -e "s|@METRICS_PORT@|$KRS_METRICS_PORT|g" -e "s|@CA_BUNDLE@|$(base64 -w0 <"$KRS_PKI/ca.crt")|g" \
    "$KRS_ROOT/hack/manifests/$1"
}

# The Corefile: the cluster's zone (and reverse lookups of its addresses) from the API server,
# anything else forwarded to this machine's resolver when it has one.
write_corefile() {
  local ip=$1 forward=""
  if grep -qE '^[[:space:]]*nameserver[[:space:]]' /etc/resolv.conf 2>/dev/null; then
    forward="forward . /etc/resolv.conf"
  fi
  mkdir -p "$KRS_DIR/coredns"
  cat >"$KRS_DIR/coredns/Corefile" <<EOF
.:53 {
    bind $ip
    errors
    health $KRS_DNS_HEALTH
    ready $KRS_DNS_READY
    kubernetes $KRS_CLUSTER_DOMAIN in-addr.arpa ip6.arpa {
        kubeconfig $KRS_DIR/coredns.kubeconfig
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 30
    }
    $forward
    cache 30
    loop
    loadbalance
}
EOF
}

# The API server's own name answers through the kube-dns Service (kube-proxy's rules included).
dns_answers() {
  busybox nslookup "kubernetes.default.svc.$KRS_CLUSTER_DOMAIN" "$KRS_DNS_IP" | grep -q "Address.*10\.96\.0\.1\b"
}

# The provisioner's controller logged that it runs, after the log's first LINES lines (logs are
# appended across runs).
provisioner_started() {
  tail -n "+$(($1 + 1))" "$KRS_LOGS/local-path-provisioner.log" | grep -q "Started provisioner controller"
}

# The kubelet registered the CSI driver (its CSINode lists it).
csi_registered() {
  kctl get csinode "$KRS_NODE" -o jsonpath='{.spec.drivers[*].name}' | grep -qw "$KRS_CSI_DRIVER"
}

metrics_api_available() {
  [ "$(kctl get apiservice v1beta1.metrics.k8s.io -o jsonpath='{.status.conditions[?(@.type=="Available")].status}')" = True ]
}

start_addons() {
  local ip=$1 bin="$KRS_BIN_DIR"
  log "starting CoreDNS on $ip:53 (Service kube-dns, $KRS_DNS_IP)"
  write_corefile "$ip"
  manifest dns.yaml "$ip" | kctl apply -f - >/dev/null
  start coredns "$bin/coredns" -conf "$KRS_DIR/coredns/Corefile"
  wait_for coredns 60 curl -sf "http://$KRS_DNS_READY/ready"
  wait_for coredns 60 dns_answers

  log "starting local-path-provisioner (default StorageClass local-path, volumes in .cluster/local-path)"
  mkdir -p "$KRS_VOLUMES"
  manifest storage.yaml "$ip" | kctl apply -f - >/dev/null
  if ! pid_alive local-path-provisioner; then
    local lines=0
    [ -f "$KRS_LOGS/local-path-provisioner.log" ] && lines=$(wc -l <"$KRS_LOGS/local-path-provisioner.log")
    start local-path-provisioner "$bin/local-path-provisioner" start \
      --kubeconfig "$KRS_DIR/local-path-provisioner.kubeconfig" \
      --namespace kube-system --service-account-name local-path-provisioner \
      --configmap-name local-path-config --helper-image "$KRS_HELPER_IMAGE"
    wait_for local-path-provisioner 60 provisioner_started "$lines"
  fi

  log "starting metrics-server on $ip:$KRS_METRICS_PORT (APIService v1beta1.metrics.k8s.io; kubectl top works after its first scrape, about 15 s)"
  manifest metrics-server.yaml "$ip" | kctl apply -f - >/dev/null
  # Its kubeconfig serves for the API, delegated authentication and authorization alike; it
  # checks the kubelet's serving certificate against the cluster CA.
  start metrics-server "$bin/metrics-server" \
    --kubeconfig "$KRS_DIR/metrics-server.kubeconfig" \
    --authentication-kubeconfig "$KRS_DIR/metrics-server.kubeconfig" \
    --authorization-kubeconfig "$KRS_DIR/metrics-server.kubeconfig" \
    --bind-address "$ip" --secure-port "$KRS_METRICS_PORT" \
    --tls-cert-file "$KRS_PKI/metrics-server-serving.crt" \
    --tls-private-key-file "$KRS_PKI/metrics-server-serving.key" \
    --requestheader-client-ca-file "$KRS_PKI/front-proxy-ca.crt" \
    --requestheader-allowed-names front-proxy-client \
    --kubelet-certificate-authority "$KRS_PKI/ca.crt" \
    --kubelet-preferred-address-types InternalIP \
    --metric-resolution 15s
  # Serving and registered, not scraped yet: the first scrape is not waited for. Available
  # matters to what follows: kubectl warns about, and the namespace controller stalls on, a
  # registered API that does not answer.
  wait_for metrics-server 60 curl -skf "https://$ip:$KRS_METRICS_PORT/livez"
  wait_for metrics-server 60 metrics_api_available

  log "starting the expandable CSI storage (StorageClass allow-volume-expansion, volumes in .cluster/csi-volumes)"
  mkdir -p "$KRS_CSI_VOLUMES"
  manifest csi.yaml "$ip" | kctl apply -f - >/dev/null
  start csi-hostpath "$bin/csi-hostpath" --driver-name "$KRS_CSI_DRIVER" --endpoint "$KRS_CSI_SOCK" \
    --node-id "$KRS_NODE" --data-dir "$KRS_CSI_VOLUMES" \
    --registration-dir "$(readlink -f "$KRS_DIR")/kubelet/plugins_registry"
  wait_for csi-hostpath 30 test -S "$KRS_CSI_SOCK"
  start csi-provisioner "$bin/csi-provisioner" --csi-address "$KRS_CSI_SOCK" \
    --kubeconfig "$KRS_DIR/csi.kubeconfig"
  start csi-resizer "$bin/csi-resizer" --csi-address "$KRS_CSI_SOCK" \
    --kubeconfig "$KRS_DIR/csi.kubeconfig"
  wait_for csi-hostpath 60 csi_registered
}

# ---------------------------------------------------------------------------------------------

# The components `restart` can bring back, started here and by cmd_up alike.
start_local_etcd() {
  start_etcd kruise-local 2379 2380 2381 4294967296
}

start_local_apiserver() { # ip
  local ip=$1
  start_apiserver 2379 \
    --advertise-address "$ip" --bind-address 0.0.0.0 --secure-port 6443 \
    --kubelet-client-certificate "$KRS_PKI/apiserver-kubelet-client.crt" \
    --kubelet-client-key "$KRS_PKI/apiserver-kubelet-client.key" \
    --kubelet-certificate-authority "$KRS_PKI/ca.crt" \
    --service-cluster-ip-range "$KRS_SERVICE_CIDR" \
    --kubelet-preferred-address-types InternalIP,Hostname \
    --authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction \
    --allow-privileged=true --enable-aggregator-routing=true --event-ttl 2h \
    --requestheader-client-ca-file "$KRS_PKI/front-proxy-ca.crt" \
    --requestheader-allowed-names front-proxy-client \
    --requestheader-extra-headers-prefix X-Remote-Extra- \
    --requestheader-group-headers X-Remote-Group \
    --requestheader-username-headers X-Remote-User \
    --proxy-client-cert-file "$KRS_PKI/front-proxy-client.crt" \
    --proxy-client-key-file "$KRS_PKI/front-proxy-client.key"
}

start_local_kubelet() { # ip
  local ip=$1
  start kubelet "$KRS_BIN_DIR/kubelet" --config "$KRS_DIR/kubelet.yaml" \
    --kubeconfig "$KRS_DIR/kubelet-client.kubeconfig" \
    --root-dir "$KRS_DIR/kubelet" --cert-dir "$KRS_DIR/kubelet/pki" \
    --hostname-override "$KRS_NODE" --node-ip "$ip" --v "${KRS_KUBELET_V:-1}"
  wait_for kubelet 60 curl -sf http://127.0.0.1:10248/healthz
}

# restart COMPONENT [SIGNAL]: a fault and its repair (the fault campaign, e2e/src/chaos): sends
# SIGNAL (default KILL) to the component's recorded process, waits for it to exit and starts it
# again as `up` does. Only etcd, kube-apiserver and the kubelet: the others need no campaign.
cmd_restart() {
  need_root
  local name=${1:-} sig=${2:-KILL} f pid
  case $name in
    etcd | kube-apiserver | kubelet) ;;
    *) echo "usage: $0 restart etcd|kube-apiserver|kubelet [SIGNAL]" >&2; exit 2 ;;
  esac
  f="$KRS_PIDS/$name.pid"
  [ -f "$f" ] || die "$name" "not started by this cluster (no $f)"
  pid=$(cat "$f")
  kill -s "$sig" "$pid" 2>/dev/null || true
  # SIGTERM: the API server drains requests for up to a minute first.
  for _ in $(seq 900); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -0 "$pid" 2>/dev/null && die "$name" "still running 90 s after SIG$sig"
  rm -f "$f"
  case $name in
    etcd) start_local_etcd ;;
    kube-apiserver) start_local_apiserver "$(host_ip)" ;;
    kubelet) start_local_kubelet "$(host_ip)" ;;
  esac
}

node_ready() {
  [ "$(kctl get node "$KRS_NODE" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]
}

default_sa() { kctl get serviceaccount default -n default; }

cmd_up() {
  need_root
  local bin="$KRS_BIN_DIR"
  if all_alive "${CORE[@]}" && apiserver_ready >/dev/null 2>&1 && node_ready; then
    if ! all_alive "${ADDONS[@]}"; then
      # A cluster started before the add-ons existed (or one of them died): start what is missing.
      "$KRS_ROOT/hack/build-addons.sh"
      make_pki "$(host_ip)"
      start_addons "$(host_ip)"
      if ! tr '\0' ' ' <"/proc/$(cat "$KRS_PIDS/kube-apiserver.pid")/cmdline" | grep -q -- --proxy-client-cert-file; then
        warn "this API server was started without the aggregation layer's certificates: metrics.k8s.io stays unavailable until make cluster-down && make cluster-up"
      fi
    fi
    log "the local cluster is already up (KUBECONFIG=.cluster/kubeconfig)"
    return 0
  fi
  # A half-started or killed cluster (a session that was stopped) leaves processes, mounts and
  # network namespaces: clear them before starting afresh.
  if [ -d "$KRS_PIDS" ] || [ -d "$KRS_CONTAINERD_STATE" ]; then
    log "clearing what a previous run left behind"
    cmd_down quiet
  fi
  "$KRS_ROOT/hack/install-deps.sh"
  "$KRS_ROOT/hack/build-k8s.sh"
  "$KRS_ROOT/hack/build-addons.sh"
  mkdir -p "$KRS_DIR/bin" "$KRS_LOGS" "$KRS_PIDS"
  ln -sf "$bin/kubectl" "$KRS_DIR/bin/kubectl"
  local ip
  ip=$(host_ip)
  [ -n "$ip" ] || die cluster "cannot find this machine's address (ip route get)"

  log "certificates and configuration (node $KRS_NODE, address $ip)"
  make_pki "$ip"
  write_configs "$ip"
  # The KUBE-* chains that exist before this cluster starts are not ours: down leaves them alone.
  kube_chains >"$KRS_DIR/iptables-chains-before"
  host_network

  log "starting the image registry on $KRS_REGISTRY"
  mkdir -p "$KRS_CACHE/registry"
  start registry docker-registry serve "$KRS_DIR/registry/config.yml"
  wait_for registry 30 curl -sf "http://$KRS_REGISTRY/v2/"
  log "building and pushing the test images"
  "$KRS_ROOT/hack/images.sh" >"$KRS_LOGS/images.log" 2>&1 || die images "building or pushing the test images failed"

  log "starting containerd"
  start containerd containerd --config "$KRS_DIR/containerd/config.toml"
  wait_for containerd 30 ctr --address "$KRS_CONTAINERD_SOCK" version

  log "starting etcd"
  start_local_etcd

  log "starting kube-apiserver"
  start_local_apiserver "$ip"

  log "starting kube-controller-manager and kube-scheduler"
  start kube-controller-manager "$bin/kube-controller-manager" \
    --kubeconfig "$KRS_DIR/controller-manager.kubeconfig" \
    --authentication-kubeconfig "$KRS_DIR/controller-manager.kubeconfig" \
    --authorization-kubeconfig "$KRS_DIR/controller-manager.kubeconfig" \
    --bind-address 127.0.0.1 --leader-elect=false \
    --service-account-private-key-file "$KRS_PKI/sa.key" --root-ca-file "$KRS_PKI/ca.crt" \
    --cluster-signing-cert-file "$KRS_PKI/ca.crt" --cluster-signing-key-file "$KRS_PKI/ca.key" \
    --use-service-account-credentials=true --service-cluster-ip-range "$KRS_SERVICE_CIDR"
  start kube-scheduler "$bin/kube-scheduler" \
    --kubeconfig "$KRS_DIR/scheduler.kubeconfig" \
    --authentication-kubeconfig "$KRS_DIR/scheduler.kubeconfig" \
    --authorization-kubeconfig "$KRS_DIR/scheduler.kubeconfig" \
    --bind-address 127.0.0.1 --leader-elect=false
  wait_for kube-controller-manager 60 curl -skf https://127.0.0.1:10257/healthz
  wait_for kube-scheduler 60 curl -skf https://127.0.0.1:10259/healthz

  log "starting kubelet"
  mkdir -p "$KRS_DIR/kubelet"
  start_local_kubelet "$ip"

  log "starting kube-proxy"
  start kube-proxy "$bin/kube-proxy" --config "$KRS_DIR/kube-proxy.yaml"
  wait_for kube-proxy 60 curl -sf http://127.0.0.1:10256/healthz

  log "waiting for node $KRS_NODE to be Ready"
  wait_for kubelet 120 node_ready
  wait_for kube-controller-manager 60 default_sa
  start_addons "$ip"
  log "the local cluster is up: export KUBECONFIG=$KRS_DIR/kubeconfig; kubectl is at .cluster/bin/kubectl"
}

cmd_down() {
  need_root
  local quiet=${1:-}
  [ -n "$quiet" ] || log "stopping the local cluster"
  local i
  # Kruise-rs in dev mode (hack/dev-up.sh) runs against this cluster: it goes first.
  stop kruise-manager
  stop kruise-daemon
  # The kubelet first, so it does not restart the containers we are about to stop.
  for ((i = ${#COMPONENTS[@]} - 1; i >= 0; i--)); do
    case ${COMPONENTS[i]} in
      containerd | registry) ;;
      *) stop "${COMPONENTS[i]}" ;;
    esac
  done
  # Shims outlive containerd by design. Ours are the ones whose bundles live in this cluster's
  # containerd state dir: each bundle records its shim's PID. Read them before the tasks are
  # killed: containerd removes a dead task's bundle while its shim may still be alive, and with
  # containerd stopped next that shim would never be told to exit.
  local shims
  shims=$(our_shim_pids)
  # Pods: stop every task in containerd's Kubernetes namespace, then containerd and its shims.
  if pid_alive containerd; then
    local c
    for c in $(ctr --address "$KRS_CONTAINERD_SOCK" -n k8s.io tasks list -q 2>/dev/null); do
      ctr --address "$KRS_CONTAINERD_SOCK" -n k8s.io tasks kill -s KILL "$c" >/dev/null 2>&1 || true
    done
  fi
  shims+=" $(our_shim_pids)"
  stop containerd
  for pid in $shims; do kill -KILL "$pid" 2>/dev/null || true; done
  stop registry
  [ -f "$KRS_DIR/registry/config.yml" ] && registry_prune "$KRS_DIR/registry/config.yml"
  sleep 0.5
  local m
  for dir in "$KRS_CONTAINERD_STATE" "$KRS_DIR" /run/netns; do
    for m in $(mounts_under "$dir"); do
      umount -l "$m" 2>/dev/null || true
    done
  done
  for ns in $(ip netns list 2>/dev/null | awk '/^cni-/{print $1}'); do
    ip netns delete "$ns" 2>/dev/null || true
  done
  ip link delete cni0 2>/dev/null || true
  # kube-proxy's and the kubelet's KUBE-* chains (services, firewall, canaries): only those this
  # cluster made, the ones that were not there before it started (`kube-proxy --cleanup` would
  # remove every kube-proxy chain on the host, ours or not).
  remove_new_kube_chains "$KRS_DIR/iptables-chains-before"
  rm -f "$KRS_DIR/iptables-chains-before"
  iptables -D FORWARD -i cni0 ! -o cni0 -j DROP 2>/dev/null || true
  iptables -D OUTPUT -d "$KRS_SERVICE_CIDR" -j REJECT 2>/dev/null || true
  ip route del unreachable "$KRS_SERVICE_CIDR" 2>/dev/null || true
  rm -rf "$KRS_CONTAINERD_STATE" "$KRS_DIR/etcd" "$KRS_DIR/kubelet" "$KRS_DIR/containerd/root" \
    "$KRS_DIR/cni/ipam" "$KRS_PIDS" "$KRS_VOLUMES" "$KRS_CSI_VOLUMES" "$(dirname "$KRS_CSI_SOCK")"
  [ -n "$quiet" ] || log "the local cluster is down"
}

cmd_status() { print_status "${COMPONENTS[@]}"; }

case ${1:-} in
  up) cmd_up ;;
  down) cmd_down ;;
  status) cmd_status ;;
  restart) shift; cmd_restart "$@" ;;
  *) echo "usage: $0 up|down|status|restart COMPONENT [SIGNAL]" >&2; exit 2 ;;
esac
