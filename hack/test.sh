#!/usr/bin/env bash
# The test system: runs its stages in order, each to the end even when an earlier one failed,
# and prints a table of stage, tests passed / failed / ignored and seconds; exits non-zero when
# any stage failed. Every log is also kept in .cluster/test-logs/<stage>.log.
#
#   hack/test.sh                 every stage (what `make test` and CI run)
#   hack/test.sh STAGE…          only those stages, in the order below (e.g. `unit`, `e2e`)
#   hack/test.sh --list          the stages and what each does
#
# Stages:
#   unit      unit, table, property and snapshot tests of every crate, the e2e crate's own, and the
#             CRI test that needs no runtime (no cluster)
#   build     the binaries, the behaviour suite's test binary, cargo-nextest, OpenKruise v1.9's
#             source (its CRDs, for the CRD version tests; cached, one module download)
#   cluster   the local cluster (hack/cluster.sh up), brought down again at the end
#   install   Kruise-rs from deploy/ (shipped RBAC, webhook behind its Service) with images built
#             here (PROFILE=dev unless set: unoptimised, cheap to build; `make install` ships
#             release ones) and a server-side dry run of deploy/
#   smoke     the smoke gate: a Ready node, Kruise-rs serving, one CloneSet rolled out in place;
#             when it (or install) fails, the run stops here with the components' logs and Events
#   suite     the behaviour suite against the install, tests of every file in parallel
#   serial    the tests that disturb the others (a killed manager or daemon, rotated
#             certificates, a reconfigured manager), one at a time; then the gated phase: the
#             tests of gates that are off by default, in parallel, against a manager restarted
#             once with those gates on (kruise-e2e-gates on/off)
#   chaos     a short seeded fault campaign (kruise-e2e-chaos, RELIABILITY.md): rollouts of every
#             workload kind while the manager replicas, the daemon, the API server, etcd and the
#             kubelet are killed, the webhook Secret deleted and every watch cut, then invariants
#             over the recorded history; alone (it restarts the API server), on the install
#             (before plugin uninstalls it). CHAOS_SEED, CHAOS_KILLS override its seed and size
#   plugin    Kruise-rs uninstalled: `kubectl kruise install/check/uninstall`, the Helm chart,
#             `kubectl kruise dev` (the embedded manager)
#   dev       dev mode (hack/dev-up.sh: host processes) and its smoke rollout, then dev-up down
#   kwok      the multi-node rules on the kwok scale cluster
#   cri       the daemon's CRI client against the cluster's containerd
#   cycle     cluster down/up, twice; the second down (a Pod running) also checks that it removes
#             only the cluster's own state
#
# With KUBECONFIG set, the e2e stages (smoke, suite, serial) run against that cluster, which must
# already run Kruise-rs (make install; kind/up.sh); the stages that need the local cluster are
# skipped and the table says so. KEEP_CLUSTER=1 leaves the local cluster up at the end.
#
# In CI (CI set, as .ci/run and CI services set it) nothing may be skipped: a skipped stage is a
# failed one, named in the table and the warning. Every nextest phase runs exactly the tests
# `nextest list` gives for its profile and filter, and fails when that is none or the run's
# count differs (see nextest() below).
set -uo pipefail
# shellcheck source=hack/lib.sh
source "$(dirname "$0")/lib.sh"
cd "$KRS_ROOT"

ALL_STAGES=(unit build cluster install smoke suite serial chaos plugin dev kwok cri cycle)
E2E_STAGES=(build cluster install smoke suite serial chaos plugin dev kwok cri cycle)
LOGS="$KRS_DIR/test-logs"

stage_doc() {
  sed -n '/^# Stages:/,/^# With KUBECONFIG/p' "$0" | sed '1d;$d;s/^# \{0,3\}//'
}

want=()
for a in "$@"; do
  case $a in
    --list) stage_doc; exit 0 ;;
    e2e) want+=("${E2E_STAGES[@]}") ;;
    -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *)
      [[ " ${ALL_STAGES[*]} " == *" $a "* ]] || { echo "unknown stage $a; hack/test.sh --list" >&2; exit 2; }
      want+=("$a") ;;
  esac
done
[ ${#want[@]} -gt 0 ] || want=("${ALL_STAGES[@]}")
wanted() { [[ " ${want[*]} " == *" $1 "* ]]; }

external=false
[ -n "${KUBECONFIG:-}" ] && external=true
# CI: any value but empty, 0 or false (CI services set CI=true; .ci/run does too).
ci=false
case ${CI:-} in '' | 0 | false) ;; *) ci=true ;; esac
export CARGO_TERM_COLOR=${CARGO_TERM_COLOR:-never}
mkdir -p "$LOGS"

# The table's rows: stage|passed|failed|ignored|seconds|result
rows=()
failed_stages=()
stopped=""  # set when the smoke gate stops the run: the stages after it do not run

# Sums the test counts a stage's log reports: libtest's `test result:` lines and nextest's
# `Summary` line. Prints "passed failed ignored".
count_tests() { # log
  awk '
    /^test result:/ {
      for (i = 1; i <= NF; i++) {
        if ($(i+1) ~ /^passed/) p += $i
        if ($(i+1) ~ /^failed/) f += $i
        if ($(i+1) ~ /^ignored/) ig += $i
      }
    }
    /^ *Summary \[/ {
      line = $0; sub(/.*tests? run: /, "", line)
      n = split(line, parts, ", ")
      for (i = 1; i <= n; i++) {
        split(parts[i], kv, " ")
        if (kv[2] ~ /^passed/) p += kv[1]
        if (kv[2] ~ /^(failed|timed)/) f += kv[1]
      }
    }
    /^ignored-tests: / { ig += $2 }
    END { printf "%d %d %d\n", p, f, ig }
  ' "$1"
}

# Runs one stage: its output goes to the terminal and to its log; the row records counts,
# seconds and the result. A stage is a shell function named stage_<name>.
run_stage() { # name
  local name=$1 log="$LOGS/$1.log" t0 rc counts
  if [ -n "$stopped" ]; then
    rows+=("$name|-|-|-|0|not run ($stopped)")
    return
  fi
  log "stage $name"
  t0=$(date +%s)
  # The stage runs in a subshell of its own with errexit on, so a failing command ends the stage,
  # not the run. (run_stage is never called in a condition: there bash would ignore errexit.)
  ( set -e; "stage_$name" ) 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  counts=$(count_tests "$log")
  read -r p f ig <<<"$counts"
  local secs=$(($(date +%s) - t0)) result=ok
  if [ "$rc" != 0 ]; then
    result="FAILED (exit $rc; log: .cluster/test-logs/$name.log)"
    failed_stages+=("$name")
  fi
  rows+=("$name|$p|$f|$ig|$secs|$result")
  last_rc=$rc
}

# A stage that runs beside another (kwok beside serial: the scale cluster has its own control plane
# and ports, and serial's one test at a time leaves the cores mostly idle). Its output goes to its
# log while it runs and to the terminal when it is joined; its row says what it overlapped.
bg_stage="" bg_pid="" bg_t0=0
start_stage_bg() { # name beside
  [ -z "$stopped" ] || return 0
  log "stage $1 (in the background, beside $2; log: .cluster/test-logs/$1.log)"
  bg_stage=$1 bg_beside=$2 bg_t0=$(date +%s)
  # The subshell records its own seconds: it usually ends before it is joined.
  (
    t0=$(date +%s)
    # Not in a condition: there bash would ignore the stage's errexit.
    ( set -e; "stage_$1" )
    rc=$?
    echo $(($(date +%s) - t0)) >"$LOGS/$1.secs"
    exit "$rc"
  ) >"$LOGS/$1.log" 2>&1 &
  bg_pid=$!
}

join_stage_bg() {
  local name=$bg_stage rc=0 p f ig secs result
  wait "$bg_pid" || rc=$?
  secs=$(cat "$LOGS/$name.secs" 2>/dev/null || echo $(($(date +%s) - bg_t0)))
  log "stage $name (joined)"
  cat "$LOGS/$name.log"
  read -r p f ig <<<"$(count_tests "$LOGS/$name.log")"
  result="ok (beside $bg_beside)"
  if [ "$rc" != 0 ]; then
    result="FAILED (exit $rc; log: .cluster/test-logs/$name.log)"
    failed_stages+=("$name")
  fi
  rows+=("$name|$p|$f|$ig|$secs|$result")
  bg_stage=""
}

# A stage not run. By hand that is the developer's choice; in CI a skipped stage is a failure
# (a run that skips the local cluster's stages proves nothing about them).
skipped_in_ci=()
skip_stage() { # name why
  if $ci; then
    rows+=("$1|-|-|-|0|FAILED: skipped in CI ($2)")
    failed_stages+=("$1")
    skipped_in_ci+=("$1")
  else
    rows+=("$1|-|-|-|0|skipped: $2")
  fi
}

print_table() {
  local r total_p=0 total_f=0 total_i=0 total_s=0
  printf '\n%-8s %7s %7s %8s %8s  %s\n' stage passed failed ignored seconds result
  for r in "${rows[@]}"; do
    IFS='|' read -r s p f i secs res <<<"$r"
    printf '%-8s %7s %7s %8s %8s  %s\n' "$s" "$p" "$f" "$i" "$secs" "$res"
    [[ $p =~ ^[0-9]+$ ]] && total_p=$((total_p + p))
    [[ $f =~ ^[0-9]+$ ]] && total_f=$((total_f + f))
    [[ $i =~ ^[0-9]+$ ]] && total_i=$((total_i + i))
    total_s=$((total_s + secs))
  done
  printf '%-8s %7s %7s %8s %8s  (wall: %ss; stages run beside others count in both)\n' total \
    "$total_p" "$total_f" "$total_i" "$total_s" "$(($(date +%s) - run_t0))"
  # The plain closing line CI reads.
  echo "$total_p passed, $total_f failed, $total_i skipped"
}

NEXTEST=""
# One nextest phase: runs the behaviour suite's tests of `profile` (its default-filter, narrowed
# by any -E in args) and checks that it ran exactly the tests `nextest list` gives for the same
# profile and arguments: a filter that matches nothing, or a run that stops short (cancelled,
# a crashed binary), fails the phase. Listing an already built binary costs about a second.
# The counts go to the stage's log (`phase-tests:`); `ignored-tests:` is read by the table.
# args select tests (-E, --run-ignored): both `list` and `run` take them; run-only options go
# in the profile or the environment (NEXTEST_TEST_THREADS).
nextest() { # profile [args…]
  local profile=$1; shift
  [ -n "$NEXTEST" ] || NEXTEST=$(hack/build-nextest.sh)
  local sel=(-p kruise-e2e --test e2e --profile "$profile" "$@") listing counts want ignored
  local out rc=0 ran all=()
  # One listing gives both numbers: the tests that match (what must run) and the #[ignore]d
  # ones that match too but are left out (the table's "ignored" column). Listed with
  # --run-ignored all, so the ignored ones are matched against the filter as well, unless the
  # phase chose its own --run-ignored.
  [[ " $* " == *" --run-ignored "* ]] || all=(--run-ignored all)
  listing=$("$NEXTEST" nextest list "${sel[@]}" "${all[@]}" --message-format json) || {
    warn "phase $profile: nextest list failed"
    return 1
  }
  counts=$(RUN_IGNORED=${#all[@]} python3 -c '
import json, os, sys
suites = json.load(sys.stdin)["rust-suites"].values()
match = [c for s in suites for c in s["testcases"].values()
         if c["filter-match"]["status"] == "matches"]
ignored = sum(c["ignored"] for c in match) if os.environ["RUN_IGNORED"] != "0" else 0
print(len(match) - ignored, ignored)' <<<"$listing") || {
    warn "phase $profile: cannot read nextest's listing"
    return 1
  }
  read -r want ignored <<<"$counts"
  echo "phase-tests: $profile: $want listed (the profile's filter${*:+, then $*})"
  if [ "$want" -eq 0 ]; then
    warn "phase $profile: no test matches its filter ($*)"
    return 1
  fi
  out=$(mktemp)
  # (pipefail: the pipeline's status is nextest's; `||` keeps the stage's errexit from ending
  # the phase before its count is checked.)
  "$NEXTEST" nextest run "${sel[@]}" --no-tests fail 2>&1 | tee "$out" || rc=$?
  # nextest's closing line: "Summary [ 12.3s] 187 tests run: …" (or "3/187 tests run" when it
  # stopped early).
  ran=$(sed -n 's/^ *Summary \[[^]]*\] *\([0-9]*\)[0-9/]* tests\{0,1\} run:.*/\1/p' "$out" | tail -1)
  rm -f "$out"
  echo "phase-tests: $profile: ${ran:-no} run of $want listed"
  if [ "${ran:-}" != "$want" ]; then
    warn "phase $profile ran ${ran:-no} tests, not the $want nextest lists for it"
    [ "$rc" != 0 ] || rc=1
  fi
  # nextest counts tests its filter leaves out as skipped: say how many of this phase's tests are
  # #[ignore]d instead, for the table.
  echo "ignored-tests: $ignored"
  return "$rc"
}

# What the components say when the install or the smoke gate fails.
diagnose() {
  local k=("$KRS_BIN_DIR/kubectl")
  warn "the smoke gate failed: the components' state, logs and the recent Events follow"
  "${k[@]}" get nodes -o wide || true
  "${k[@]}" -n kruise-system get deploy,ds,pods -o wide || true
  "${k[@]}" -n kruise-system describe pods || true
  local p
  for p in $("${k[@]}" -n kruise-system get pods -o name 2>/dev/null); do
    echo "---- logs of $p"
    "${k[@]}" -n kruise-system logs "$p" --all-containers --tail 150 || true
    "${k[@]}" -n kruise-system logs "$p" --all-containers --tail 50 --previous 2>/dev/null || true
  done
  echo "---- Events"
  "${k[@]}" get events -A --sort-by=.lastTimestamp 2>/dev/null | tail -60 || true
}

# ---- the stages

stage_unit() {
  cargo test --workspace --exclude kruise-e2e --no-fail-fast
  # The e2e crate's own unit tests (harness, bench statistics) and its binaries'. Its feature
  # pins (e2e/Cargo.toml) keep this build on the workspace's feature set: nothing but the e2e
  # crate compiles here.
  cargo test -p kruise-e2e --lib --bins --no-fail-fast
}

stage_build() {
  # The suite drives the binaries (kubectl-kruise, and the manager and daemon in dev mode).
  # After the unit stage only kruise-e2e's binaries are left to compile; anything else means the
  # test build and this one resolve dependency features apart (the pins in api/Cargo.toml).
  local out="$LOGS/build-bins.out"
  cargo build --workspace --bins 2>&1 | tee "$out"
  if wanted unit && grep -E '^ *Compiling ' "$out" | grep -qv 'kruise-e2e'; then
    warn "the build recompiled what the unit stage had built (dependency features differ): $(grep -E '^ *Compiling ' "$out" | grep -v kruise-e2e | awk '{print $2}' | tr '\n' ' ')"
  fi
  hack/build-nextest.sh >/dev/null
  NEXTEST=$(hack/build-nextest.sh)
  "$NEXTEST" nextest run -p kruise-e2e --test e2e --no-run
}

stage_cluster() {
  hack/cluster.sh up
}

stage_install() {
  # A dev-mode manager or daemon left running would serve beside the installed ones.
  hack/dev-up.sh down
  PROFILE=${PROFILE:-dev} KRUISE_INSTALL_TIMEOUT=${KRUISE_INSTALL_TIMEOUT:-150s} hack/install.sh
  log "checking that deploy/ applies cleanly on a live cluster (server-side dry run)"
  "$KRS_BIN_DIR/kubectl" apply -k deploy/ --dry-run=server >/dev/null
}

stage_smoke() {
  KRUISE_E2E_INCLUSTER=1 nextest e2e-smoke
}

stage_suite() {
  # E2E_THREADS overrides the profile's number of tests at once.
  if [ -n "${E2E_THREADS:-}" ]; then export NEXTEST_TEST_THREADS=$E2E_THREADS; fi
  KRUISE_E2E_INCLUSTER=1 nextest e2e-suite
}

stage_serial() {
  local before after rc=0
  before=$(manager_template)
  KRUISE_E2E_INCLUSTER=1 nextest e2e-serial || rc=$?
  # One manager rollout with every gate the gated tests need, one back: their bodies then run
  # at once instead of one after another behind rollouts of their own.
  if KRUISE_E2E_INCLUSTER=1 cargo run -q -p kruise-e2e --bin kruise-e2e-gates -- on; then
    KRUISE_E2E_INCLUSTER=1 nextest e2e-gated || rc=$?
  else
    warn "the gated phase's manager did not come up: its tests did not run"
    rc=1
  fi
  KRUISE_E2E_INCLUSTER=1 cargo run -q -p kruise-e2e --bin kruise-e2e-gates -- off || rc=1
  # A test killed at its budget cannot put back a manager it reconfigured: check, and say so.
  after=$(manager_template)
  if [ "$before" != "$after" ]; then
    warn "the serial phase left the manager or daemon reconfigured; reinstalling"
    hack/install.sh
    rc=1
  fi
  return "$rc"
}

manager_template() {
  "$KRS_BIN_DIR/kubectl" -n kruise-system get deployment kruise-controller-manager \
    -o jsonpath='{.spec.template.spec.containers[0].args}{.spec.template.spec.containers[0].env}'
  # The daemon's too: daemon_cri's serial test points it at a missing CRI socket.
  "$KRS_BIN_DIR/kubectl" -n kruise-system get daemonset kruise-daemon \
    -o jsonpath='{.spec.template.spec.containers[0].args}'
}

stage_chaos() {
  # A fixed seed: a failure replays with the same plan. Eight kills in rounds of four, each
  # after a pause under 3 s: each fault kind once, two rounds of rollouts. The whole history
  # is kept in the stage's logs.
  cargo run -q -p kruise-e2e --bin kruise-e2e-chaos -- --seed "${CHAOS_SEED:-20261207}" \
    --kills "${CHAOS_KILLS:-8}" --per-round 4 --max-delay-ms 3000 \
    --history "$LOGS/chaos-history.json"
}

stage_plugin() {
  hack/install.sh uninstall
  # The plugin's install/check/uninstall and the Helm chart need the cluster without Kruise, with
  # the images just built (tag dev); the test uninstalls what it installed. `kubectl kruise dev`
  # runs its embedded manager only on a cluster without Kruise and without a dev-mode manager
  # (the install stage stopped dev mode); its test fails if it finds one. (Its refusal beside a
  # running manager is tested in the suite.)
  KUBECTL="$KRS_BIN_DIR/kubectl" KRUISE_E2E_INCLUSTER=1 nextest e2e-plugin --run-ignored all \
    -E 'test(/^(plugin_install|helm_values)::/)'
  nextest e2e-plugin -E 'test(/^plugin_dev::dev_embeds_/)'
}

stage_dev() {
  # Dev mode: the manager and daemon as host processes; the same smoke rollout against them.
  hack/dev-up.sh
  local rc=0
  nextest e2e-smoke || rc=$?
  hack/dev-up.sh down
  return "$rc"
}

stage_kwok() {
  # Multi-node behaviour on the kwok scale cluster (its own control plane, ports and state;
  # shared, hence its lock). The tests start the manager they need (the debug build) and stop it;
  # the cluster is brought down only if this stage brought it up.
  exec 9>/tmp/kruise-scale.lock
  flock 9
  local up=false rc=0
  if ! hack/scale-cluster.sh running; then
    up=true
    hack/scale-cluster.sh up
  fi
  log "running the kwok tests against .cluster/scale/kubeconfig"
  nextest e2e-kwok || rc=$?
  if $up; then hack/scale-cluster.sh down || rc=1; fi
  flock -u 9
  return "$rc"
}

stage_cri() {
  # --workspace as in the unit stage, so the features resolve alike and nothing is rebuilt.
  KRUISE_CRI_ENDPOINT="unix://$KRS_CONTAINERD_SOCK" \
    cargo test --workspace --exclude kruise-e2e --test cri -- --include-ignored
}

stage_cycle() {
  # Two down/up cycles. Round 1's down stops the cluster the stages before used; round 2's down,
  # with a Pod running, must remove only what the cluster made (foreign state made before round
  # 1's up survives it).
  log "cluster down/up cycle 1 of 2"
  hack/cluster.sh down
  foreign_state_make
  hack/cluster.sh up
  cycle_node_checks
  log "cluster down/up cycle 2 of 2"
  # A running Pod, so that there are shims of this cluster to stop.
  "$KRS_BIN_DIR/kubectl" run e2e-shim --image "$KRS_REGISTRY/kruise-rs/testapp:v1" >/dev/null
  "$KRS_BIN_DIR/kubectl" wait --for condition=Ready pod/e2e-shim --timeout 60s >/dev/null
  hack/cluster.sh down
  foreign_state_check
  hack/cluster.sh up
  cycle_node_checks
}

cycle_node_checks() {
  KRUISE_E2E_INCLUSTER=0 nextest e2e-suite -E 'test(/^cluster::(node_is_ready|pod_runs_from_local_registry)$/)'
}

# What is not the cluster's must survive its teardown: a KUBE-* chain made before it started and a
# process that looks like a containerd shim of namespace k8s.io.
foreign_pid="" chains_before=""
foreign_state_make() {
  chains_before=$(iptables-save | grep '^:KUBE-' | cut -d' ' -f1 || true)
  iptables -N KUBE-E2E-FOREIGN
  setsid bash -c 'exec -a "containerd-shim-runc-v2 -namespace k8s.io -id e2e-foreign" sleep 600' </dev/null >/dev/null 2>&1 &
  foreign_pid=$!
  # Removed by the check; this is for a stage that fails before it (the stage is a subshell).
  trap 'kill "$foreign_pid" 2>/dev/null; iptables -X KUBE-E2E-FOREIGN 2>/dev/null; true' EXIT
}

foreign_state_check() {
  local alive chain after
  if pgrep -f -- "containerd-shim.* -address $KRS_CONTAINERD_SOCK" >/dev/null; then
    warn "cluster down left shims of its containerd: $(pgrep -af -- "containerd-shim.* -address $KRS_CONTAINERD_SOCK")"
    return 1
  fi
  alive=true; kill -0 "$foreign_pid" 2>/dev/null || alive=false
  chain=true; iptables -S KUBE-E2E-FOREIGN >/dev/null 2>&1 || chain=false
  kill "$foreign_pid" 2>/dev/null || true
  iptables -X KUBE-E2E-FOREIGN 2>/dev/null || true
  # Cleaned up: the stage's exit status is its own, not the trap's.
  trap - EXIT
  $alive || { warn "cluster down killed a shim-like process it did not start"; return 1; }
  $chain || { warn "cluster down removed a KUBE-* chain it did not make"; return 1; }
  after=$(iptables-save | grep '^:KUBE-' | cut -d' ' -f1 || true)
  [ "$after" = "$chains_before" ] || { warn "cluster down left KUBE-* chains: $(echo "$after" | tr '\n' ' ')"; return 1; }
  # The provisioner's volumes are the cluster's state too.
  [ ! -e "$KRS_DIR/local-path" ] || { warn "cluster down left the volumes in .cluster/local-path"; return 1; }
  log "cluster down removed only what the cluster made"
}

# ---- the run

run_t0=$(date +%s)

local_up=false
cleanup() {
  if $local_up && [ "${KEEP_CLUSTER:-}" != 1 ]; then hack/cluster.sh down >/dev/null 2>&1 || true; fi
}
trap cleanup EXIT

if $external; then
  log "KUBECONFIG is set ($KUBECONFIG): the e2e stages run against that cluster, which must run Kruise-rs"
  ! $ci || warn "CI is set: the stages this skips fail the run"
else
  export KUBECONFIG="$KRS_DIR/kubeconfig"
fi

for s in "${ALL_STAGES[@]}"; do
  wanted "$s" || continue
  if $external; then
    case $s in
      cluster|install|chaos|plugin|dev|cri|cycle)
        skip_stage "$s" "KUBECONFIG is set: this stage needs the local cluster (unset KUBECONFIG)"
        continue ;;
      kwok)
        skip_stage "$s" "KUBECONFIG is set: the kwok scale cluster is local (unset KUBECONFIG)"
        continue ;;
    esac
  fi
  last_rc=0
  if [ "$s" = serial ] && wanted kwok && ! $external; then
    start_stage_bg kwok serial
  fi
  if [ "$s" = kwok ] && [ "$bg_stage" = kwok ]; then
    join_stage_bg
    continue
  fi
  run_stage "$s"
  case $s in
    # The cluster is this run's to bring down, even if `up` failed half-way.
    cluster) local_up=true ;;
    install|smoke)
      if [ "$last_rc" != 0 ] && [ -z "$stopped" ]; then
        diagnose 2>&1 | tee "$LOGS/diagnose.log"
        stopped="the smoke gate failed at $s; see .cluster/test-logs/diagnose.log"
      fi ;;
  esac
done

[ ${#failed_stages[@]} -eq 0 ] || warn "failed stages: ${failed_stages[*]}"
[ ${#skipped_in_ci[@]} -eq 0 ] ||
  warn "CI must run every stage; skipped: ${skipped_in_ci[*]} (KUBECONFIG is set: unset it)"
[ -z "$stopped" ] || warn "$stopped"
# The table last: its closing line is the count CI reads.
print_table | tee "$LOGS/table.txt"
[ ${#failed_stages[@]} -eq 0 ] && [ -z "$stopped" ]
