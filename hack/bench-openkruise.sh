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
# machine falls on both alike. Every turn is one run of each variant (in place, recreate) for each
# Pod kind (bare, typical: see kruise-bench); --turns 6 (default) gives 3 runs per variant per
# system. Each run is a fresh CloneSet in a fresh namespace, gone before the next run starts.
#
# After the rollout turns (the local cluster released and left as found), the scale part: the
# same kruise-scale-bench as `make bench-scale` on the scale cluster (hack/scale-cluster.sh: a
# control plane and kwok's fake nodes), run with both systems (`--systems kruise-rs,openkruise`):
# for each size a CloneSet of N Pods rolls out in place with each system's manager, in turns
# Kruise-rs OpenKruise in even runs and OpenKruise Kruise-rs in odd ones (ABBA over two runs),
# a fresh manager process per turn, the floor measured in the same run (in Kruise-rs's turns). Neither system's daemon runs
# there (kwok's nodes have no container runtime). Its table follows the rollout table (on
# stdout, and in the --append file).
#
#   hack/bench-openkruise.sh                       6 turns, bare and typical Pods, then 1,000 Pods
#                                                  at scale, one run; prints the tables
#   hack/bench-openkruise.sh --append BENCHMARKS.md
#   hack/bench-openkruise.sh --turns 2 --pods 5 --pod-kinds bare --variants in-place \
#     --scale-sizes none                           a quick look at the rollout part only
#   hack/bench-openkruise.sh --scale-sizes 1000,5000 --scale-runs 2   more of the scale part
#   hack/bench-openkruise.sh --scale-sizes 10000 --scale-workloads 2000 --scale-runs 2
#                                                  the scale part with 2,000 CloneSets of 5 Pods
#                                                  (issue 62; hack/bench-scale.sh's header runs
#                                                  that part alone)
#   hack/bench-openkruise.sh --turns 6 --variants none --scale-sizes none \
#     --admission-shapes plain,100,500             Pod-create admission only, per shape
#
# --scale-workloads K (default 1): the scale part spreads each size's N Pods over K CloneSets of
# N/K (kruise-scale-bench --workloads; K must divide every size), created and ready, then all
# given the new image at once; rollout complete when every CloneSet counts all its Pods updated
# and ready. 1 is one CloneSet of N Pods, as before.
#
# --admission-shapes (default: none): after each turn's rollouts, time --admission-samples Pod
# creates (dry run) once per shape: `plain` (nothing but the Pods' namespace), or a number N:
# N SidecarSets (2 of them selecting the timed Pods, the rest a label no Pod carries) and a
# PodUnavailableBudget, a WorkloadSpread and a PersistentPodState in the Pods' namespace
# (kruise-bench --admission-sidecarsets N --admission-objects). Its table gives each shape's
# p50 and p99 per system, pooled over the turns and per turn, and the ratio. `--variants none`
# skips the rollouts.
#
# It holds /tmp/kruise-cluster.lock while it uses the cluster (the cluster is shared), brings the
# cluster up if it was down (and down again at the end), stops a running dev-mode Kruise-rs and
# starts it again afterwards. Before the first turn it saves every CRD either system defines, the
# two webhook configurations and the namespaces a turn creates, and at the end it puts them back
# exactly (deleting what was not there, replacing what changed) and checks that they match, so
# the suites that run next see only what was there before. OpenKruise's daemon finds the CRI
# socket under /hostvarrun: a symlink to /run made for the run and removed after it.
#
# The scale part holds /tmp/kruise-scale.lock (not the local cluster's lock, released by then),
# brings the scale cluster up if it was down and down again at the end; if it was up, it is left
# up with Kruise-rs's CRDs installed again (kruise-scale-bench swaps them back after the turns)
# and no webhook configurations (kruise-manager writes its own when it next starts).
set -euo pipefail
# shellcheck source=hack/lib.sh
source "$(dirname "$0")/lib.sh"
cd "$KRS_ROOT"

turns=6
pods=10
append=
samples=200
kinds=bare,typical
variants=in-place,recreate
scale_sizes=1000
scale_runs=1
scale_workloads=1
shapes=
while [ $# -gt 0 ]; do
  case $1 in
    --scale-sizes) scale_sizes=$2; shift 2 ;;
    --scale-runs) scale_runs=$2; shift 2 ;;
    --scale-workloads) scale_workloads=$2; shift 2 ;;
    --turns) turns=$2; shift 2 ;;
    --pods) pods=$2; shift 2 ;;
    --append) append=$2; shift 2 ;;
    --admission-samples) samples=$2; shift 2 ;;
    --pod-kinds) kinds=$2; shift 2 ;;
    --variants) variants=$2; shift 2 ;;
    --admission-shapes) shapes=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done

LOCK=/tmp/kruise-cluster.lock
SCALE_LOCK=/tmp/kruise-scale.lock
target=${CARGO_TARGET_DIR:-$KRS_ROOT/target}
OK_VERSION=${OPENKRUISE_VERSION:-v1.9.0}
# The tag's build when there is one (hack/build-openkruise.sh), else the module's.
OK_DIR=$(hack/build-openkruise.sh --dir)
OK_COMMIT=$(cat "$OK_DIR/commit" 2>/dev/null || echo unknown)

# The scale part, run under $SCALE_LOCK by the outer invocation below.
scale_part() {
  local was_up=0 rc=0
  hack/scale-cluster.sh running && was_up=1
  if [ "$was_up" = 0 ]; then
    log "the scale cluster is down: bringing it up for the scale part (and down after)"
    # shellcheck disable=SC2064 # expanded now: the trap only tears down what this run started
    trap "hack/scale-cluster.sh down" EXIT
    hack/scale-cluster.sh up
  fi
  "$target/release/kruise-scale-bench" --systems kruise-rs,openkruise \
    --sizes "$scale_sizes" --workloads "$scale_workloads" --runs "$scale_runs" \
    --manager "$target/release/kruise-manager" --openkruise-manager "$OK_DIR/bin/manager" \
    --kubeconfig "$KRS_ROOT/.cluster/scale/kubeconfig" ${append:+--append "$append"} || rc=$?
  return "$rc"
}

if [ -n "${KRS_SCALE_LOCKED:-}" ]; then
  scale_part
  exit
fi

if [ -z "${KRS_BENCH_LOCKED:-}" ]; then
  hack/build-openkruise.sh
  bins=(--bin kruise-manager --bin kruise-daemon --bin kruise-bench)
  [ "$scale_sizes" = none ] || bins+=(--bin kruise-scale-bench)
  log "building Kruise-rs release binaries and the benchmarks"
  cargo build --release -p kruise-manager -p kruise-daemon -p kruise-e2e "${bins[@]}"
  log "waiting for $LOCK"
  KRS_BENCH_LOCKED=1 flock "$LOCK" "$0" --turns "$turns" --pods "$pods" \
    --admission-samples "$samples" --pod-kinds "$kinds" --variants "$variants" \
    ${shapes:+--admission-shapes "$shapes"} ${append:+--append "$append"}
  [ "$scale_sizes" = none ] && exit 0
  log "the scale part: waiting for $SCALE_LOCK"
  KRS_SCALE_LOCKED=1 exec flock "$SCALE_LOCK" "$0" --scale-sizes "$scale_sizes" \
    --scale-runs "$scale_runs" --scale-workloads "$scale_workloads" ${append:+--append "$append"}
fi

export KUBECONFIG=${KUBECONFIG:-$KRS_DIR/kubeconfig}
out=$(mktemp -d "${TMPDIR:-/tmp}/bench-openkruise.XXXXXX")
k() { "$KRS_BIN_DIR/kubectl" "$@"; }

# --- leave the cluster as found -------------------------------------------------------------
# `status` names each component and exits 0 either way.
# The status is read whole before it is searched: with pipefail, `grep -q` quitting at its first
# match can fail the pipeline on the writer's SIGPIPE, and a stopped cluster read as up.
cluster_was_up=1
cluster_status=$(hack/cluster.sh status)
grep -q stopped <<<"$cluster_status" && cluster_was_up=0
dev_was_up=0
pid_alive kruise-manager && dev_was_up=1
made_hostvarrun=0

remove_webhooks() {
  k delete mutatingwebhookconfiguration kruise-mutating-webhook-configuration --ignore-not-found >/dev/null
  k delete validatingwebhookconfiguration kruise-validating-webhook-configuration --ignore-not-found >/dev/null
}

# What a run may touch, saved before the first turn and put back after the last: every CRD
# either system defines, the two webhook configurations, and the namespaces the turns create
# (kruise-system, kruise-daemon-config, bench-*). `save` keeps them whole (as JSON); `restore`
# deletes what was not there and replaces what differs; `digest` prints one line per object
# (kind, name, a hash of its spec and labels) so that before and after can be compared.
cat >"$out/state.py" <<'PY'
import hashlib, json, subprocess, sys
kubectl, cmd, out = sys.argv[1], sys.argv[2], sys.argv[3]
names = set(open(f"{out}/crd-names").read().split())
HOOKS = ("kruise-mutating-webhook-configuration", "kruise-validating-webhook-configuration")
def k(*a, data=None):
    return subprocess.run([kubectl, *a], input=data, capture_output=True, text=True, check=True).stdout
def touched_ns(n):
    return n in ("kruise-system", "kruise-daemon-config") or n.startswith("bench-")
def current():
    objs = {}
    for o in json.loads(k("get", "crd", "-o", "json"))["items"]:
        if o["metadata"]["name"] in names:
            objs[("customresourcedefinition", o["metadata"]["name"])] = o
    for kind in ("mutatingwebhookconfiguration", "validatingwebhookconfiguration"):
        for o in json.loads(k("get", kind, "-o", "json"))["items"]:
            if o["metadata"]["name"] in HOOKS:
                objs[(kind, o["metadata"]["name"])] = o
    for o in json.loads(k("get", "namespace", "-o", "json"))["items"]:
        if touched_ns(o["metadata"]["name"]):
            objs[("namespace", o["metadata"]["name"])] = o
    return objs
def clean(o):
    """What a create or replace may set: no server-owned metadata, no status."""
    o = json.loads(json.dumps(o))
    for f in ("resourceVersion", "uid", "creationTimestamp", "generation", "managedFields"):
        o["metadata"].pop(f, None)
    o.pop("status", None)
    return o
def digest(o):
    body = {x: o[x] for x in ("spec", "webhooks") if x in o}
    body["labels"] = o["metadata"].get("labels", {})
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]
if cmd == "save":
    json.dump([clean(o) for o in current().values()], open(f"{out}/saved.json", "w"))
elif cmd == "digest":
    for (kind, name), o in sorted(current().items()):
        print(kind, name, "-" if kind == "namespace" else digest(o))
elif cmd == "restore":
    saved = {(o["kind"].lower(), o["metadata"]["name"]): o for o in json.load(open(f"{out}/saved.json"))}
    now = current()
    # Webhooks first (a dead webhook would refuse the deletes), namespaces last (their custom
    # objects go with the CRDs).
    order = {"mutatingwebhookconfiguration": 0, "validatingwebhookconfiguration": 0,
             "customresourcedefinition": 1, "namespace": 2}
    for key in sorted(now, key=lambda key: order[key[0]]):
        if key not in saved:
            print(f"deleting {key[0]}/{key[1]} (not there before the run)", file=sys.stderr)
            k("delete", key[0], key[1], "--ignore-not-found", "--wait=true", "--timeout=180s")
    for key, o in saved.items():
        if key in now and digest(now[key]) == digest(o):
            continue
        print(f"restoring {key[0]}/{key[1]} as it was", file=sys.stderr)
        k("replace" if key in now else "create", "-f", "-", data=json.dumps(o))
PY
state() { python3 "$out/state.py" "$KRS_BIN_DIR/kubectl" "$1" "$out"; }

# shellcheck disable=SC2317 # run by the EXIT trap
cleanup() {
  set +e
  stop openkruise-manager 15
  stop openkruise-daemon 15
  hack/dev-up.sh down
  if [ -f "$out/saved.json" ]; then
    log "putting the CRDs, webhook configurations and namespaces back as they were"
    state restore
    state digest >"$out/after.txt"
    if diff -u "$out/before.txt" "$out/after.txt" >&2; then
      log "CRDs, webhook configurations and namespaces are as before the run ($(wc -l <"$out/after.txt") objects)"
    else
      warn "the cluster differs from before the run (diff above)"
      rc=1
    fi
  fi
  [ "$made_hostvarrun" = 1 ] && rm -f /hostvarrun
  if [ "$dev_was_up" = 1 ]; then
    KRUISE_SKIP_BUILD=1 hack/dev-up.sh
  fi
  [ "$cluster_was_up" = 0 ] && hack/cluster.sh down
  rm -rf "$out"
  exit "$rc"
}
trap 'rc=$?; cleanup' EXIT

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
# Every CRD name either system defines: what a turn may replace, saved before the first.
{
  cat deploy/crds/*.yaml | sed -n 's/^  name: \(.*\)$/\1/p'
  for f in "$out"/crds/*.yaml; do basename "$f" .yaml; done
} | sort -u >"$out/crd-names"
state save
state digest >"$out/before.txt"
log "saved the $(wc -l <"$out/before.txt") objects a turn may change (put back at the end)"

# Waits until the API server admits a Pod create through the webhook (dry run).
# shellcheck disable=SC2317 # run through wait_for
webhook_serves() {
  k create namespace bench-webhook-probe --dry-run=client -o yaml | k apply -f - >/dev/null
  k -n bench-webhook-probe run probe --image=busybox --restart=Never --dry-run=server >/dev/null 2>&1
}

start_openkruise() {
  log "OpenKruise turn: its CRDs and webhook configurations"
  install_crds all "$out/crds"
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
  # The machine is shared: the load beside each turn says how far to trust its times.
  echo "$t $sys $(cut -d' ' -f1 /proc/loadavg)" >>"$out/load.txt"
  if [ "$variants" != none ]; then
    "$target/release/kruise-bench" --variants "$variants" --pod-kinds "$kinds" --runs 1 \
      --pods "$pods" --manager-pid "$manager_pid" --daemon-pid "$daemon_pid" \
      --admission-samples "$samples" --json "$out/turn-$t-$sys.json"
  fi
  for shape in ${shapes//,/ }; do
    shape_args=(--admission-only --admission-samples "$samples")
    [ "$shape" = plain ] || shape_args+=(--admission-sidecarsets "$shape" --admission-objects)
    log "turn $t ($sys): Pod creates, shape $shape"
    "$target/release/kruise-bench" "${shape_args[@]}" --json "$out/shape-$t-$sys-$shape.json" >/dev/null
  done
  if [ "$sys" = K ]; then stop_kruise_rs; else stop_openkruise; fi
  [ $((t % 2)) = 1 ] && baseline "$((t + 1))"
done

: >"$out/table.md"
[ -n "$shapes" ] && python3 - "$out" "$turns" "${order[*]}" "$OK_COMMIT" "$shapes" "$samples" >>"$out/table.md" <<'PY'
import glob, json, math, statistics, sys
out, turns, order, commit, shapes, samples = sys.argv[1:7]
def q(v, p):
    v = sorted(v)
    return v[max(1, min(len(v), math.ceil(len(v) * p))) - 1] if v else 0.0
load = [float(l.split()[2]) for l in open(f"{out}/load.txt")]
print(f"\n## Pod create (dry run) admission per shape, side by side with OpenKruise commit {commit[:9]} ({turns} turns {order}, {samples} creates per turn and shape)\n")
print(f"Load average {min(load):.1f} to {max(load):.1f} at the turns' starts. Shape N: N SidecarSets (2 selecting the timed Pods), "
      "a PodUnavailableBudget selecting them, a WorkloadSpread and a PersistentPodState in their namespace; `plain`: none of these. "
      "Pooled: the quantile over every create of the system's turns; per turn: p50/p99 of each turn in turn order.\n")
print("| shape | measure | OpenKruise ms | Kruise-rs ms | Kruise-rs / OpenKruise | per turn, OpenKruise | per turn, Kruise-rs |")
print("|---|---|---|---|---|---|---|")
for shape in shapes.split(","):
    runs = {"K": [], "O": []}
    for f in sorted(glob.glob(f"{out}/shape-*-*-{shape}.json"), key=lambda f: int(f.split("/shape-")[1].split("-")[0])):
        s = f.split("/shape-")[1].split("-")[1]
        runs[s].append(json.load(open(f))["admission_seconds"])
    for name, p in (("p50", .5), ("p99", .99)):
        pooled = {s: q([x for r in runs[s] for x in r], p) * 1000 for s in "KO"}
        per = {s: ", ".join(f"{q(r, p) * 1000:.1f}" for r in runs[s]) for s in "KO"}
        ratio = f"{pooled['K'] / pooled['O']:.2f}" if pooled["O"] else "n/a"
        print(f"| {shape} | {name} | {pooled['O']:.1f} | {pooled['K']:.1f} | {ratio} | {per['O']} | {per['K']} |")
print()
PY
[ "$variants" != none ] && python3 - "$out" "$turns" "$pods" "$(uname -r)" "$(nproc)" "${order[*]}" "$kinds" "$OK_VERSION" "$variants" >>"$out/table.md" <<'PY'
import glob, json, math, statistics, sys
out, turns, pods, kernel, cores, order, kinds, version, variants = sys.argv[1:10]
kinds = [{"bare": "Bare", "typical": "Typical"}[k] for k in kinds.split(",")]
run_variants = [(v, n) for v, n in (("InPlace", "in place"), ("Recreate", "recreate"))
                if {"InPlace": "in-place", "Recreate": "recreate"}[v] in variants.split(",")]
def q(v, p):
    """The nearest-rank quantile, as kruise-bench's stats::quantile."""
    v = sorted(v)
    if not v:
        return 0.0
    return v[max(1, min(len(v), math.ceil(len(v) * p))) - 1]
med = lambda v: statistics.median(v) if v else 0.0
res = {s: {"times": {}, "procs": [], "adm": [], "phases": {}} for s in "KO"}
for f in sorted(glob.glob(f"{out}/turn-*.json")):
    s = f.rsplit("-", 1)[1][0]
    d = json.load(open(f))
    for r in d["rollouts"]:
        res[s]["times"].setdefault((r["kind"], r["variant"]), []).extend(r["seconds"])
    res[s]["procs"] += d["processes"]
    res[s]["adm"] += d["admission_seconds"]
    for kind, ph in d.get("phases", {}).items():
        res[s]["phases"].setdefault(kind, []).append(ph)
base = []
for f in glob.glob(f"{out}/baseline-*.json"):
    base += json.load(open(f))["admission_seconds"]
load = [float(l.split()[2]) for l in open(f"{out}/load.txt")]
def procs(s, kind, variant, key):
    return [p[key] for p in res[s]["procs"] if p["kind"] == kind and p["variant"] == variant]
runs = min(len(v) for s in "KO" for v in res[s]["times"].values())
print(f"\n## Side by side with OpenKruise {version}: rollout of {pods} Pods ({runs} runs per variant and system, turns {order}, medians)\n")
print(f"Machine: {cores} cores, Linux {kernel}, shared with other build sessions (load average {min(load):.1f} to {max(load):.1f} at the turns' starts); "
      "local cluster (Kubernetes v1.34.4, containerd). Both systems as host processes from release builds (OpenKruise built from its Go module by "
      "hack/build-openkruise.sh, its CRDs and webhook configurations from its module's config/, webhook at a host URL via WEBHOOK_HOST; "
      "Kruise-rs by hack/dev-up.sh with KRUISE_PROFILE=release). The systems take turns on the cluster (they share CRD and webhook names) "
      "ordered ABBA so that linear drift falls on both alike. A fresh CloneSet (apps.kruise.io/v1beta1, maxUnavailable 100%) per timing, "
      "one image change v1 -> v2; the namespace is deleted and gone before the next timing. Manager and daemon RSS: steady just before the "
      "image change, peak during the rollout; CPU: manager seconds from the change to the last Pod ready.\n")
print("| Pod | measure | OpenKruise | Kruise-rs | Kruise-rs / OpenKruise | target |")
print("|---|---|---|---|---|---|")
def row(kind, name, o, k, unit, target="", fmt="{:.2f}"):
    r = f"{k / o:.2f}" if o else "n/a"
    print(f"| {kind} | {name} | {fmt.format(o)}{unit} | {fmt.format(k)}{unit} | {r} | {target} |")
mib = lambda kib: kib / 1024
for kind in kinds:
    label = kind.lower() + " Pod"
    t = lambda s, v: med(res[s]["times"].get((kind, v), []))
    for v, vl in run_variants:
        row(label, f"rollout {vl}, median", t("O", v), t("K", v), " s", "≤ 0.8" if v == "InPlace" else "")
    for v, vl in run_variants:
        p = lambda s, key: procs(s, kind, v, key)
        row(label, f"manager RSS steady, {vl} (median)", mib(med(p("O", "manager_rss_steady_kib"))), mib(med(p("K", "manager_rss_steady_kib"))), " MiB", "≤ 0.33", "{:.1f}")
        row(label, f"manager RSS peak, {vl} (max)", mib(max(p("O", "manager_rss_peak_kib"), default=0)), mib(max(p("K", "manager_rss_peak_kib"), default=0)), " MiB", "", "{:.1f}")
        row(label, f"manager CPU per rollout, {vl} (median)", med(p("O", "manager_cpu_s")), med(p("K", "manager_cpu_s")), " s", "≤ 0.5")
    p = lambda s, key: procs(s, kind, "InPlace", key) + procs(s, kind, "Recreate", key)
    row(label, "daemon RSS steady (median)", mib(med(p("O", "daemon_rss_steady_kib"))), mib(med(p("K", "daemon_rss_steady_kib"))), " MiB", "", "{:.1f}")
    row(label, "daemon RSS peak (max)", mib(max(p("O", "daemon_rss_peak_kib"), default=0)), mib(max(p("K", "daemon_rss_peak_kib"), default=0)), " MiB", "", "{:.1f}")
ms = lambda v, p: q(v, p) * 1000
row("any", "Pod create (dry run) p50 with the webhook", ms(res["O"]["adm"], .5), ms(res["K"]["adm"], .5), " ms", "", "{:.1f}")
row("any", "Pod create (dry run) p99 with the webhook", ms(res["O"]["adm"], .99), ms(res["K"]["adm"], .99), " ms", "", "{:.1f}")
print(f"\nPod create (dry run) without any webhook configured, between the turns: p50 {ms(base, .5):.1f} ms, p99 {ms(base, .99):.1f} ms "
      f"over {len(base)} creates (with the webhook: {len(res['O']['adm'])} creates for OpenKruise, {len(res['K']['adm'])} for Kruise-rs).\n")
# Only an in-place rollout has these phases.
if any(v == "InPlace" for v, _ in run_variants):
    print("Where an in-place rollout's time goes (kruise-bench's watch of the Pods; per turn the median over the Pods, then the median over the turns):\n")
    print("| Pod | phase | OpenKruise s | Kruise-rs s |")
    print("|---|---|---|---|")
    phase_names = (("dispatch", "image change → last Pod patched (manager)"),
                   ("restart", "patch → new container running (kubelet)"),
                   ("notice", "running → InPlaceUpdateReady True (manager)"),
                   ("gate", "InPlaceUpdateReady True → Ready (kubelet)"),
                   ("probe", "running → new container ready (kubelet's readiness probe)"),
                   ("fold", "gate True and container ready → Ready (kubelet)"),
                   ("patch_to_ready", "per Pod, patch → Ready on the new image"))
    for kind in kinds:
        for key, name in phase_names:
            v = {s: med([ph[key] for ph in res[s]["phases"].get(kind, []) if key in ph]) for s in "KO"}
            print(f"| {kind.lower()} Pod | {name} | {v['O']:.2f} | {v['K']:.2f} |")
print()
fmt = lambda v: ", ".join(f"{x:.2f}" for x in v)
print("Runs (s), in turn order:")
for kind in kinds:
    for v, _ in run_variants:
        print(f"- {kind.lower()} Pod, {v}: OpenKruise {fmt(res['O']['times'].get((kind, v), []))}; Kruise-rs {fmt(res['K']['times'].get((kind, v), []))}")
        cpu = lambda s: fmt(procs(s, kind, v, "manager_cpu_s"))
        print(f"- {kind.lower()} Pod, {v}, manager CPU: OpenKruise {cpu('O')}; Kruise-rs {cpu('K')}")
print(f"\nRun with `hack/bench-openkruise.sh --turns {turns} --pods {pods} --pod-kinds {sys.argv[7]} --variants {variants}` (`make bench-openkruise`); its scale part's table follows when it ran.")
PY
echo "OpenKruise: $OK_DIR, commit $OK_COMMIT" >>"$out/table.md"
cat "$out/table.md"
[ -n "$append" ] && cat "$out/table.md" >>"$append"
exit 0
