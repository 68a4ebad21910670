#!/usr/bin/env bash
# Side by side on the local cluster: OpenKruise (the Go original, built by
# hack/build-openkruise.sh) and Kruise-rs (release builds), taking turns, because they share CRD
# names, webhook configuration names and the webhook port. Each turn runs the same rollout
# benchmark (kruise-bench: a fresh CloneSet per timing, in place and recreate, v1 -> v2) with the
# system's manager and daemon as host processes, and times Pod creates (server-side dry run) with
# that system's webhook. Between turns, with no webhook configured at all, the same Pod creates
# give the "without webhook" baseline.
#
# Turns are ordered ABBA (K O O K K O ... for Kruise-rs K, OpenKruise O), so linear drift of the
# machine falls on both alike. Every turn is one run of each variant; --turns 6 (default) gives
# 3 runs per variant per system.
#
#   hack/bench-openkruise.sh                       6 turns, prints the table
#   hack/bench-openkruise.sh --append BENCHMARKS.md
#   hack/bench-openkruise.sh --turns 2 --pods 5    a quick look
#
# It holds /tmp/kruise-cluster.lock while it uses the cluster (the cluster is shared), brings the
# cluster up if it was down (and down again at the end), stops a running dev-mode Kruise-rs and
# starts it again afterwards, and restores the Kruise-rs CRDs. OpenKruise's daemon finds the CRI
# socket under /hostvarrun: a symlink to /run made for the run and removed after it.
set -euo pipefail
# shellcheck source=hack/lib.sh
source "$(dirname "$0")/lib.sh"
cd "$KRS_ROOT"

turns=6
pods=10
append=
samples=200
while [ $# -gt 0 ]; do
  case $1 in
    --turns) turns=$2; shift 2 ;;
    --pods) pods=$2; shift 2 ;;
    --append) append=$2; shift 2 ;;
    --admission-samples) samples=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done

LOCK=/tmp/kruise-cluster.lock
if [ -z "${KRS_BENCH_LOCKED:-}" ]; then
  hack/build-openkruise.sh
  log "building Kruise-rs release binaries and kruise-bench"
  cargo build --release -p kruise-manager -p kruise-daemon -p kruise-e2e \
    --bin kruise-manager --bin kruise-daemon --bin kruise-bench
  log "waiting for $LOCK"
  KRS_BENCH_LOCKED=1 exec flock "$LOCK" "$0" --turns "$turns" --pods "$pods" \
    --admission-samples "$samples" ${append:+--append "$append"}
fi

export KUBECONFIG=${KUBECONFIG:-$KRS_DIR/kubeconfig}
target=${CARGO_TARGET_DIR:-$KRS_ROOT/target}
OK_VERSION=${OPENKRUISE_VERSION:-v1.9.0}
OK_DIR="$KRS_CACHE/openkruise-$OK_VERSION"
out=$(mktemp -d "${TMPDIR:-/tmp}/bench-openkruise.XXXXXX")
k() { "$KRS_BIN_DIR/kubectl" "$@"; }

# --- leave the cluster as found -------------------------------------------------------------
# `status` names each component and exits 0 either way.
cluster_was_up=1
hack/cluster.sh status | grep -q stopped && cluster_was_up=0
dev_was_up=0
pid_alive kruise-manager && dev_was_up=1
made_hostvarrun=0
openkruise_only=()

remove_webhooks() {
  k delete mutatingwebhookconfiguration kruise-mutating-webhook-configuration --ignore-not-found >/dev/null
  k delete validatingwebhookconfiguration kruise-validating-webhook-configuration --ignore-not-found >/dev/null
}

# shellcheck disable=SC2317 # run by the EXIT trap
cleanup() {
  set +e
  stop openkruise-manager 15
  stop openkruise-daemon 15
  hack/dev-up.sh down
  remove_webhooks
  log "restoring the Kruise-rs CRDs"
  install_crds all
  for n in "${openkruise_only[@]}"; do k delete crd "$n" --ignore-not-found >/dev/null; done
  k delete namespace bench-webhook-probe --ignore-not-found --wait=false >/dev/null
  [ "$made_hostvarrun" = 1 ] && rm -f /hostvarrun
  if [ "$dev_was_up" = 1 ]; then
    KRUISE_SKIP_BUILD=1 hack/dev-up.sh
  fi
  [ "$cluster_was_up" = 0 ] && hack/cluster.sh down
  rm -rf "$out"
}
trap cleanup EXIT

if [ "$cluster_was_up" = 0 ]; then
  log "the local cluster is down: bringing it up for the benchmark (and down after)"
  hack/cluster.sh up
fi
hack/dev-up.sh down

# OpenKruise's CRI discovery looks under /hostvarrun; containerd's socket is under /run.
if [ ! -e /hostvarrun ]; then
  ln -s /run /hostvarrun
  made_hostvarrun=1
fi

# OpenKruise's manifests from its own module: CRDs and webhook configurations (kustomize names
# them kruise-*). The manager fills in their CA bundle and, with WEBHOOK_HOST, a host URL.
log "rendering OpenKruise $OK_VERSION manifests from its config/"
k kustomize "$OK_DIR/src/config/default" >"$out/openkruise.yaml"
python3 - "$out" <<'EOF'
import sys, yaml
out = sys.argv[1]
docs = [d for d in yaml.safe_load_all(open(f"{out}/openkruise.yaml")) if d]
import os
os.makedirs(f"{out}/crds", exist_ok=True)
crds = [d for d in docs if d["kind"] == "CustomResourceDefinition"]
for d in crds:
    with open(f"{out}/crds/{d['metadata']['name']}.yaml", "w") as f:
        yaml.safe_dump(d, f)
hooks = [d for d in docs if d["kind"] in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")]
with open(f"{out}/webhooks.yaml", "w") as f:
    yaml.safe_dump_all(hooks, f)
print(f"{len(crds)} CRDs, {len(hooks)} webhook configurations", file=sys.stderr)
EOF
# CRDs only OpenKruise has: deleted at the end, so the cluster keeps only what it had.
ours=$(cat deploy/crds/*.yaml | sed -n 's/^  name: \(.*\)$/\1/p')
for f in "$out"/crds/*.yaml; do
  n=$(basename "$f" .yaml)
  grep -qx "$n" <<<"$ours" || k get crd "$n" >/dev/null 2>&1 || openkruise_only+=("$n")
done

# Waits until the API server admits a Pod create through the webhook (dry run).
# shellcheck disable=SC2317 # run through wait_for
webhook_serves() {
  k create namespace bench-webhook-probe --dry-run=client -o yaml | k apply -f - >/dev/null
  k -n bench-webhook-probe run probe --image=busybox --restart=Never --dry-run=server >/dev/null 2>&1
}

start_openkruise() {
  log "OpenKruise turn: its CRDs and webhook configurations"
  local crd
  # Replaced whole, as install_crds does ours: a merge would keep the other system's fields.
  for crd in "$out"/crds/*.yaml; do
    if k get -f "$crd" >/dev/null 2>&1; then
      k replace -f "$crd" >/dev/null
    else
      k create -f "$crd" >/dev/null
    fi
  done
  k wait --for condition=established --timeout 60s -f "$out/crds/" >/dev/null
  kruise_namespaces
  k apply -f "$out/webhooks.yaml" >/dev/null
  POD_NAMESPACE=kruise-system WEBHOOK_HOST=127.0.0.1 WEBHOOK_PORT=9876 \
    WEBHOOK_CERT_DIR="$out/openkruise-certs" \
    start openkruise-manager "$OK_DIR/bin/manager" --enable-leader-election=false \
    --metrics-addr=127.0.0.1:8080 --health-probe-addr=127.0.0.1:8000 --enable-pprof=false \
    --kubeconfig="$KUBECONFIG"
  wait_for openkruise-manager 180 curl -sf http://127.0.0.1:8000/readyz
  wait_for openkruise-manager 120 webhook_serves
  NODE_NAME=$KRS_NODE start openkruise-daemon "$OK_DIR/bin/daemon" --addr=127.0.0.1:10221 \
    --enable-pprof=false --kubeconfig="$KUBECONFIG"
  wait_for openkruise-daemon 60 curl -sf http://127.0.0.1:10221/healthz
  manager_pid=$(cat "$KRS_PIDS/openkruise-manager.pid")
  daemon_pid=$(cat "$KRS_PIDS/openkruise-daemon.pid")
}

stop_openkruise() {
  stop openkruise-manager 15
  stop openkruise-daemon 15
  remove_webhooks
}

start_kruise_rs() {
  log "Kruise-rs turn"
  KRUISE_PROFILE=release KRUISE_SKIP_BUILD=1 hack/dev-up.sh
  wait_for kruise-manager 120 webhook_serves
  manager_pid=$(cat "$KRS_PIDS/kruise-manager.pid")
  daemon_pid=$(cat "$KRS_PIDS/kruise-daemon.pid")
}

stop_kruise_rs() {
  hack/dev-up.sh down
  remove_webhooks
}

# Pod creates with no webhook configured: the baseline of the admission latency.
baseline() {
  remove_webhooks
  "$target/release/kruise-bench" --admission-only --admission-samples "$samples" \
    --json "$out/baseline-$1.json" >/dev/null
}

order=()
for ((t = 0; t < turns; t++)); do
  # ABBA: K O O K K O O K ...
  case $((t % 4)) in 0 | 3) order+=(K) ;; *) order+=(O) ;; esac
done
log "turn order: ${order[*]}"
remove_webhooks
baseline 0
for ((t = 0; t < turns; t++)); do
  sys=${order[$t]}
  if [ "$sys" = K ]; then start_kruise_rs; else start_openkruise; fi
  "$target/release/kruise-bench" --variants in-place,recreate --pod-kinds bare --runs 1 \
    --pods "$pods" --manager-pid "$manager_pid" --daemon-pid "$daemon_pid" \
    --admission-samples "$samples" --json "$out/turn-$t-$sys.json"
  if [ "$sys" = K ]; then stop_kruise_rs; else stop_openkruise; fi
  [ $((t % 2)) = 1 ] && baseline "$((t + 1))"
done

python3 - "$out" "$turns" "$pods" "$(uname -r)" "$(nproc)" "${order[*]}" >"$out/table.md" <<'EOF'
import glob, json, statistics, sys
out, turns, pods, kernel, cores, order = sys.argv[1:7]
import math
def q(v, p):
    """The nearest-rank quantile, as kruise-bench's stats::quantile."""
    v = sorted(v)
    if not v:
        return 0.0
    return v[max(1, min(len(v), math.ceil(len(v) * p))) - 1]
sys_name = {"K": "Kruise-rs", "O": "OpenKruise"}
res = {s: {"InPlace": [], "Recreate": [], "procs": [], "adm": []} for s in "KO"}
for f in sorted(glob.glob(f"{out}/turn-*.json")):
    s = f.rsplit("-", 1)[1][0]
    d = json.load(open(f))
    for r in d["rollouts"]:
        res[s][r["variant"]] += r["seconds"]
    res[s]["procs"] += d["processes"]
    res[s]["adm"] += d["admission_seconds"]
base = []
for f in glob.glob(f"{out}/baseline-*.json"):
    base += json.load(open(f))["admission_seconds"]
med = lambda v: statistics.median(v) if v else 0.0
def proc(s, key, agg=max, variant="InPlace"):
    v = [p[key] for p in res[s]["procs"] if p["variant"] == variant]
    return agg(v) if v else 0
runs = len(res["K"]["InPlace"])
print(f"\n## Side by side with OpenKruise v1.9.0: rollout of {pods} Pods ({runs} runs each, interleaved {order}, medians)\n")
print(f"Machine: {cores} cores, Linux {kernel}, local cluster (Kubernetes v1.34.4, containerd). "
      "Both systems as host processes from release builds (OpenKruise built from its Go module by hack/build-openkruise.sh; "
      "its CRDs and webhook configurations from its module's config/). A fresh CloneSet per timing (v1alpha1 CloneSet, "
      "maxUnavailable 100%), one image change v1 -> v2. Manager RSS and CPU are sampled during each in-place rollout "
      "(steady: just before the image change; CPU: seconds used from the change to the last Pod ready).\n")
print("| measure | OpenKruise | Kruise-rs | Kruise-rs / OpenKruise | target |")
print("|---|---|---|---|---|")
def row(name, o, k, unit, target="", fmt="{:.2f}"):
    r = (k / o) if o else float("nan")
    print(f"| {name} | {fmt.format(o)}{unit} | {fmt.format(k)}{unit} | {r:.2f} | {target} |")
row("rollout in place, median", med(res["O"]["InPlace"]), med(res["K"]["InPlace"]), " s", "≤ 0.8")
row("rollout recreate, median", med(res["O"]["Recreate"]), med(res["K"]["Recreate"]), " s")
mib = lambda kib: kib / 1024
row("manager RSS steady (max over runs)", mib(proc("O", "manager_rss_steady_kib")), mib(proc("K", "manager_rss_steady_kib")), " MiB", "≤ 0.33", "{:.1f}")
row("manager RSS peak", mib(proc("O", "manager_rss_peak_kib")), mib(proc("K", "manager_rss_peak_kib")), " MiB", "", "{:.1f}")
row("manager CPU per in-place rollout, median", proc("O", "manager_cpu_s", med), proc("K", "manager_cpu_s", med), " s", "≤ 0.5")
row("daemon RSS steady", mib(proc("O", "daemon_rss_steady_kib")), mib(proc("K", "daemon_rss_steady_kib")), " MiB", "", "{:.1f}")
row("daemon RSS peak", mib(proc("O", "daemon_rss_peak_kib")), mib(proc("K", "daemon_rss_peak_kib")), " MiB", "", "{:.1f}")
ms = lambda v, p: q(v, p) * 1000
row("Pod create (dry run) p50 with the webhook", ms(res["O"]["adm"], .5), ms(res["K"]["adm"], .5), " ms", "", "{:.1f}")
row("Pod create (dry run) p99 with the webhook", ms(res["O"]["adm"], .99), ms(res["K"]["adm"], .99), " ms", "", "{:.1f}")
print(f"\nPod create (dry run) without any webhook, same runs: p50 {ms(base, .5):.1f} ms, p99 {ms(base, .99):.1f} ms over {len(base)} creates.\n")
fmt = lambda v: ", ".join(f"{x:.2f}" for x in v)
print(f"Runs (s): OpenKruise in place {fmt(res['O']['InPlace'])}; Kruise-rs in place {fmt(res['K']['InPlace'])}; "
      f"OpenKruise recreate {fmt(res['O']['Recreate'])}; Kruise-rs recreate {fmt(res['K']['Recreate'])}.")
print(f"\nRun with `hack/bench-openkruise.sh --turns {turns} --pods {pods}` (`make bench-openkruise`).")
EOF
cat "$out/table.md"
[ -n "$append" ] && cat "$out/table.md" >>"$append"
exit 0
