//! Rollout benchmark on a real cluster: the same image change on N Pods rolled out by
//! (a) a CloneSet with InPlaceIfPossible, (b) a CloneSet with ReCreate, (c) a Deployment, and
//! (d) the floor: N bare Pods whose image is patched directly, all at once. Runs are interleaved
//! and the table reports medians and ratios measured in this one run, so machine drift cancels.
//!
//! Two kinds of Pod: `bare` (one HTTP container with a readiness probe, the cheapest Pod) and
//! `typical` (as real workloads are: an init container that runs 2 s, a ConfigMap volume and an
//! emptyDir, a readiness probe with a 1 s initial delay), so that the table shows what an
//! in-place update saves where a recreate re-runs init containers and re-mounts volumes.
//!
//! Usage: kruise-bench [--pods N] [--runs R] [--pod-kinds bare,typical] [--append FILE]
//!        (`--help` for more)

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use clap::Parser;
use futures::future::try_join_all;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use kruise_api::keys;
use kruise_e2e::bench::args::{Common, at_least_one};
use kruise_e2e::bench::stats::{max, median, ratio, secs, secs_list};
use kruise_e2e::bench::{self, admission, machine};
use kruise_e2e::{
    TestNamespace, client, cloneset, container_status, image, pod_condition, pod_ready, wait_for,
};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use serde_json::json;

const TIMEOUT: Duration = Duration::from_secs(300);

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
enum Variant {
    InPlace,
    Recreate,
    Deployment,
    BarePods,
}

impl Variant {
    const ALL: [Variant; 4] = [
        Variant::InPlace,
        Variant::Recreate,
        Variant::Deployment,
        Variant::BarePods,
    ];
    fn label(self) -> &'static str {
        match self {
            Variant::InPlace => "(a) CloneSet InPlaceIfPossible",
            Variant::Recreate => "(b) CloneSet ReCreate",
            Variant::Deployment => "(c) Deployment",
            Variant::BarePods => "(d) bare Pods patched directly",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
enum PodKind {
    /// One container, a readiness probe, nothing else.
    Bare,
    /// An init container of 2 s, a ConfigMap volume, an emptyDir, a readiness probe with a
    /// 1 s initial delay.
    Typical,
}

impl PodKind {
    fn label(self) -> &'static str {
        match self {
            PodKind::Bare => "bare Pod",
            PodKind::Typical => "typical Pod",
        }
    }
}

/// The ConfigMap every typical Pod mounts, created in each benchmark namespace.
const CONFIG_MAP: &str = "bench-config";

/// The volume a typical Pod's claim is mounted as (the CloneSet's volumeClaimTemplate's name).
const CLAIM_VOLUME: &str = "data";

/// The claim a typical Pod mounts when the cluster has a default StorageClass: one per Pod from
/// the CloneSet's volumeClaimTemplates (a recreate deletes it with its Pod and provisions a new
/// one), one per bare Pod created beside it, and one shared by all of a Deployment's Pods (a
/// Deployment has no per-Pod claims).
fn claim_spec() -> serde_json::Value {
    json!({"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "16Mi"}}})
}

/// Rollout benchmark on a real cluster: in-place vs recreate vs Deployment vs bare Pods.
#[derive(Debug, Parser)]
#[command(name = "kruise-bench")]
struct Args {
    /// Pods per workload.
    #[arg(long, default_value_t = 10, value_parser = at_least_one)]
    pods: usize,
    /// Kinds of Pod to measure, comma separated; each is measured with all four variants,
    /// interleaved.
    #[arg(long, value_delimiter = ',', default_value = "bare,typical")]
    pod_kinds: Vec<PodKind>,
    /// Variants to run, comma separated (hack/bench-openkruise.sh runs in-place and recreate on
    /// each system in turn).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "in-place,recreate,deployment,bare-pods"
    )]
    variants: Vec<Variant>,
    /// PID of the manager that serves the CloneSets: its RSS (before the update, and the peak
    /// during it) and CPU seconds per CloneSet rollout are reported.
    #[arg(long, value_name = "PID")]
    manager_pid: Option<u32>,
    /// PID of the node daemon: its RSS before and at the peak of each CloneSet rollout.
    #[arg(long, value_name = "PID")]
    daemon_pid: Option<u32>,
    /// Also time this many Pod creates (server-side dry run, so admission runs but nothing is
    /// stored) and report their p50/p99 as the client sees them.
    #[arg(long, default_value_t = 0)]
    admission_samples: usize,
    /// Only time the Pod creates (no rollout): the no-webhook baseline of
    /// hack/bench-openkruise.sh.
    #[arg(long)]
    admission_only: bool,
    /// Before timing the Pod creates, make this many SidecarSets (cluster-wide; deleted after),
    /// of which `--admission-matching-sidecarsets` select the timed Pods and inject a sidecar
    /// into each, the others selecting a label no Pod carries.
    #[arg(long, default_value_t = 0)]
    admission_sidecarsets: usize,
    /// How many of `--admission-sidecarsets` select the timed Pods.
    #[arg(long, default_value_t = 2)]
    admission_matching_sidecarsets: usize,
    /// Before timing the Pod creates, make a PodUnavailableBudget selecting them, a
    /// WorkloadSpread and a PersistentPodState (targets the Pods are not) in their namespace.
    #[arg(long)]
    admission_objects: bool,
    /// Typical Pods without their PersistentVolumeClaim (by default they have one when the
    /// cluster has a default StorageClass).
    #[arg(long)]
    no_claim: bool,
    /// Write the raw results as JSON to this file (hack/bench-openkruise.sh reads them).
    #[arg(long, value_name = "FILE")]
    json: Option<std::path::PathBuf>,
    #[command(flatten)]
    common: Common,
}

/// The Pod template of every variant; `claim`: a typical Pod also mounts volume
/// [`CLAIM_VOLUME`], whose source the variant adds.
fn pod_template(name: &str, tag: &str, kind: PodKind, claim: bool) -> serde_json::Value {
    let mut t = json!({
        "metadata": {"labels": {"app": name}},
        "spec": {
            "terminationGracePeriodSeconds": 5,
            "containers": [{
                "name": "app",
                "image": image("testapp", tag),
                "readinessProbe": {"httpGet": {"path": "/", "port": 8080}, "periodSeconds": 1}
            }]
        }
    });
    if kind == PodKind::Typical {
        let spec = &mut t["spec"];
        // The init container's image never changes, so the update stays in-place-able.
        spec["initContainers"] = json!([{
            "name": "init",
            "image": image("testapp", "v1"),
            "command": ["sleep", "2"]
        }]);
        spec["volumes"] = json!([
            {"name": "config", "configMap": {"name": CONFIG_MAP}},
            {"name": "scratch", "emptyDir": {}}
        ]);
        let app = &mut spec["containers"][0];
        app["volumeMounts"] = json!([
            {"name": "config", "mountPath": "/etc/bench"},
            {"name": "scratch", "mountPath": "/scratch"}
        ]);
        app["readinessProbe"]["initialDelaySeconds"] = json!(1);
        if claim && let Some(m) = app["volumeMounts"].as_array_mut() {
            m.push(json!({"name": CLAIM_VOLUME, "mountPath": "/data"}));
        }
    }
    t
}

/// Adds volume [`CLAIM_VOLUME`] from claim `claim_name` to a Pod (template) spec.
fn mount_claim(spec: &mut serde_json::Value, claim_name: &str) {
    if let Some(v) = spec["volumes"].as_array_mut() {
        v.push(json!({"name": CLAIM_VOLUME, "persistentVolumeClaim": {"claimName": claim_name}}));
    }
}

/// Creates claim `name` in `ns`.
async fn create_claim(client: &Client, ns: &str, name: &str) -> kruise_e2e::Result<()> {
    let pvc: PersistentVolumeClaim =
        serde_json::from_value(json!({"metadata": {"name": name}, "spec": claim_spec()}))?;
    Api::<PersistentVolumeClaim>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &pvc)
        .await?;
    Ok(())
}

/// Whether the cluster has a default StorageClass, so that a claim without a class binds.
async fn has_default_storage_class(client: &Client) -> kruise_e2e::Result<bool> {
    let classes = Api::<StorageClass>::all(client.clone())
        .list(&ListParams::default())
        .await?;
    Ok(classes.items.iter().any(|c| {
        c.annotations()
            .get("storageclass.kubernetes.io/is-default-class")
            .is_some_and(|v| v == "true")
    }))
}

/// The ConfigMap typical Pods mount.
async fn create_config_map(client: &Client, ns: &str) -> kruise_e2e::Result<()> {
    let cm: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": CONFIG_MAP},
        "data": {"app.conf": "greeting = hello\n"}
    }))?;
    Api::<ConfigMap>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &cm)
        .await?;
    Ok(())
}

/// All `n` live Pods labelled app=`name` are Ready and run image `tag`.
async fn all_on(pods: &Api<Pod>, name: &str, n: usize, tag: &str) -> kruise_e2e::Result<bool> {
    let want = image("testapp", tag);
    let list = pods
        .list(&ListParams::default().labels(&format!("app={name}")))
        .await?;
    let live: Vec<&Pod> = list
        .items
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect();
    Ok(live.len() == n
        && live.iter().all(|p| {
            pod_ready(p) && container_status(p, "app").is_some_and(|c| c.image == want && c.ready)
        }))
}

async fn wait_all_on(pods: &Api<Pod>, name: &str, n: usize, tag: &str) -> kruise_e2e::Result<()> {
    wait_for(
        &format!("{n} Pods of {name} ready on {tag}"),
        TIMEOUT,
        || async { Ok(all_on(pods, name, n, tag).await?.then_some(())) },
    )
    .await
}

/// Creates the workload on v1 and waits until it is ready.
async fn create(
    client: &Client,
    ns: &str,
    v: Variant,
    kind: PodKind,
    claim: bool,
    name: &str,
    n: i32,
) -> kruise_e2e::Result<()> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let claim = claim && kind == PodKind::Typical;
    if kind == PodKind::Typical {
        create_config_map(client, ns).await?;
    }
    match v {
        Variant::InPlace | Variant::Recreate => {
            let policy = if v == Variant::InPlace {
                "InPlaceIfPossible"
            } else {
                "ReCreate"
            };
            let mut cs = cloneset::new(
                name,
                n,
                "v1",
                json!({"type": "RollingUpdate", "rollingUpdate": {"podUpdatePolicy": policy, "maxUnavailable": "100%"}}),
            )?;
            cs.data["spec"]["template"] = pod_template(name, "v1", kind, claim);
            if claim {
                cs.data["spec"]["volumeClaimTemplates"] =
                    json!([{"metadata": {"name": CLAIM_VOLUME}, "spec": claim_spec()}]);
            }
            cloneset::api(client, ns)
                .create(&PostParams::default(), &cs)
                .await?;
        }
        Variant::Deployment => {
            let mut template = pod_template(name, "v1", kind, claim);
            if claim {
                let shared = format!("{name}-{CLAIM_VOLUME}");
                create_claim(client, ns, &shared).await?;
                mount_claim(&mut template["spec"], &shared);
            }
            let d: Deployment = serde_json::from_value(json!({
                "metadata": {"name": name},
                "spec": {
                    "replicas": n,
                    "selector": {"matchLabels": {"app": name}},
                    "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "100%", "maxSurge": 0}},
                    "template": template
                }
            }))?;
            Api::<Deployment>::namespaced(client.clone(), ns)
                .create(&PostParams::default(), &d)
                .await?;
        }
        Variant::BarePods => {
            let mut creates = Vec::new();
            for i in 0..n {
                let mut p = pod_template(name, "v1", kind, claim);
                p["metadata"]["name"] = json!(format!("{name}-{i}"));
                if claim {
                    let own = format!("{CLAIM_VOLUME}-{name}-{i}");
                    create_claim(client, ns, &own).await?;
                    mount_claim(&mut p["spec"], &own);
                }
                let pod: Pod = serde_json::from_value(p)?;
                let pods = pods.clone();
                creates.push(async move { pods.create(&PostParams::default(), &pod).await });
            }
            try_join_all(creates).await?;
        }
    }
    wait_all_on(&pods, name, n as usize, "v1").await
}

/// Changes the image to v2 the way the variant does it.
async fn update(client: &Client, ns: &str, v: Variant, name: &str) -> kruise_e2e::Result<()> {
    let spec = json!({"template": {"spec": {"containers": [{"name": "app", "image": image("testapp", "v2")}]}}});
    match v {
        Variant::InPlace | Variant::Recreate => {
            cloneset::set_image(&cloneset::api(client, ns), name, "v2").await?;
        }
        Variant::Deployment => {
            Api::<Deployment>::namespaced(client.clone(), ns)
                .patch(
                    name,
                    &PatchParams::default(),
                    &Patch::Strategic(&json!({"spec": spec})),
                )
                .await?;
        }
        Variant::BarePods => {
            let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
            let list = pods
                .list(&ListParams::default().labels(&format!("app={name}")))
                .await?;
            let patch =
                json!({"spec": {"containers": [{"name": "app", "image": image("testapp", "v2")}]}});
            try_join_all(list.items.iter().map(|p| {
                let pods = pods.clone();
                let patch = patch.clone();
                let n = p.name_any();
                async move {
                    pods.patch(&n, &PatchParams::default(), &Patch::Strategic(&patch))
                        .await
                }
            }))
            .await?;
        }
    }
    Ok(())
}

/// Where the time of an in-place rollout goes, from the same watch: how long until the
/// manager had patched every Pod, and per Pod the kubelet restarting the container (patch →
/// new container running), the manager noticing (running → InPlaceUpdateReady True), and the
/// kubelet folding the readiness gate into Ready (InPlaceUpdateReady True → Ready); and the
/// whole per-Pod latency, patch → Ready on the new image. The last kubelet phase is split in
/// two: the new container passing its readiness probe (running → container ready), and Ready
/// after both the gate and the container are ready (`fold`), which says whether Ready waits for
/// the gate or for the probe.
#[derive(Default)]
struct Phases {
    dispatch: Vec<Duration>,
    patch_to_ready: Vec<Duration>,
    restart: Vec<Duration>,
    notice: Vec<Duration>,
    gate: Vec<Duration>,
    probe: Vec<Duration>,
    fold: Vec<Duration>,
}

impl Phases {
    fn add(&mut self, start: Instant, history: &[(Instant, Pod)]) {
        let want = image("testapp", "v2");
        #[derive(Default)]
        struct Seen {
            patched: Option<Instant>,
            running: Option<Instant>,
            gate_true: Option<Instant>,
            /// The app container ready on the new image (its readiness probe passed).
            container_ready: Option<Instant>,
            ready: Option<Instant>,
            /// Ready with the app container ready on the new image, gate or not.
            done: Option<Instant>,
        }
        let mut pods: BTreeMap<String, Seen> = BTreeMap::new();
        for (at, p) in history {
            let s = pods.entry(p.uid().unwrap_or_default()).or_default();
            let spec_new = p.spec.as_ref().is_some_and(|sp| {
                sp.containers
                    .iter()
                    .any(|c| c.image.as_deref() == Some(want.as_str()))
            });
            if spec_new && s.patched.is_none() {
                s.patched = Some(*at);
            }
            let running = container_status(p, "app").is_some_and(|c| {
                c.image == want && c.state.as_ref().is_some_and(|st| st.running.is_some())
            });
            if s.patched.is_some() && running && s.running.is_none() {
                s.running = Some(*at);
            }
            let gate = pod_condition(p, keys::INPLACE_UPDATE_READY) == Some("True");
            if s.running.is_some() && gate && s.gate_true.is_none() {
                s.gate_true = Some(*at);
            }
            if s.gate_true.is_some() && pod_ready(p) && s.ready.is_none() {
                s.ready = Some(*at);
            }
            let ready_new = container_status(p, "app").is_some_and(|c| c.image == want && c.ready);
            if s.running.is_some() && ready_new && s.container_ready.is_none() {
                s.container_ready = Some(*at);
            }
            if s.patched.is_some() && ready_new && pod_ready(p) && s.done.is_none() {
                s.done = Some(*at);
            }
        }
        let last_patch = pods.values().filter_map(|s| s.patched).max();
        if let Some(t) = last_patch {
            self.dispatch.push(t.duration_since(start));
        }
        for s in pods.values() {
            if let (Some(a), Some(b)) = (s.patched, s.running) {
                self.restart.push(b.duration_since(a));
            }
            if let (Some(a), Some(b)) = (s.running, s.gate_true) {
                self.notice.push(b.duration_since(a));
            }
            if let (Some(a), Some(b)) = (s.gate_true, s.ready) {
                self.gate.push(b.duration_since(a));
            }
            if let (Some(a), Some(b)) = (s.running, s.container_ready) {
                self.probe.push(b.duration_since(a));
            }
            if let (Some(g), Some(c), Some(b)) = (s.gate_true, s.container_ready, s.ready) {
                self.fold.push(b.saturating_duration_since(g.max(c)));
            }
            if let (Some(a), Some(b)) = (s.patched, s.done) {
                self.patch_to_ready.push(b.duration_since(a));
            }
        }
    }

    /// Medians of each phase in seconds, for `--json`.
    fn json(&self) -> serde_json::Value {
        let m = |v: &[Duration]| median(v).as_secs_f64();
        json!({
            "dispatch": m(&self.dispatch),
            "restart": m(&self.restart),
            "notice": m(&self.notice),
            "gate": m(&self.gate),
            "probe": m(&self.probe),
            "fold": m(&self.fold),
            "patch_to_ready": m(&self.patch_to_ready),
        })
    }

    fn table(&self) -> String {
        let row = |what: &str, v: &[Duration]| {
            format!(
                "| {what} | {} | {} | {} |\n",
                secs(median(v)),
                secs(max(v)),
                v.len()
            )
        };
        let mut out = String::from(
            "\nWhere (a)'s time goes (from a watch of its Pods):\n\n| phase | median s | max s | samples |\n|---|---|---|---|\n",
        );
        out.push_str(&row(
            "template change → last Pod patched (manager)",
            &self.dispatch,
        ));
        out.push_str(&row(
            "patch → new container running (kubelet)",
            &self.restart,
        ));
        out.push_str(&row(
            "running → InPlaceUpdateReady True (manager)",
            &self.notice,
        ));
        out.push_str(&row(
            "InPlaceUpdateReady True → Ready (kubelet)",
            &self.gate,
        ));
        out.push_str(&row(
            "running → new container ready (kubelet's readiness probe)",
            &self.probe,
        ));
        out.push_str(&row(
            "gate True and container ready → Ready (kubelet)",
            &self.fold,
        ));
        out
    }
}

async fn one_run(
    client: &Client,
    v: Variant,
    (kind, claim): (PodKind, bool),
    n: i32,
    run: usize,
    phases: &mut Phases,
    procs: Option<&Procs>,
) -> kruise_e2e::Result<Duration> {
    let ns = TestNamespace::create(client, "bench").await?;
    let name = format!("bench-{run}");
    create(client, &ns.name, v, kind, claim, &name, n).await?;
    let pods: Api<Pod> = ns.api();
    let watch = WatchLog::start(pods.clone(), &format!("app={name}"));
    let cloneset = matches!(v, Variant::InPlace | Variant::Recreate);
    let sampling = procs.filter(|_| cloneset).map(|p| p.begin());
    let start = Instant::now();
    update(client, &ns.name, v, &name).await?;
    wait_all_on(&pods, &name, n as usize, "v2").await?;
    let took = start.elapsed();
    if let (Some(s), Some(p)) = (sampling, procs) {
        p.end(s, kind, v);
    }
    if v == Variant::InPlace {
        phases.add(start, &watch.history());
    }
    drop(watch);
    let ns_name = ns.name.clone();
    ns.delete().await?;
    wait_gone(client, &ns_name).await?;
    Ok(took)
}

/// Waits until namespace `ns` is gone, so that its Pods' teardown does not overlap the next
/// timing, and a system's turn (hack/bench-openkruise.sh) ends with nothing of it left.
async fn wait_gone(client: &Client, ns: &str) -> kruise_e2e::Result<()> {
    let api: Api<Namespace> = Api::all(client.clone());
    wait_for(&format!("namespace {ns} deleted"), TIMEOUT, || async {
        Ok(api.get_opt(ns).await?.is_none().then_some(()))
    })
    .await
}

/// RSS and CPU of the manager and the daemon around each CloneSet rollout.
#[derive(Default)]
struct Procs {
    manager: Option<u32>,
    daemon: Option<u32>,
    samples: std::sync::Mutex<Vec<ProcSample>>,
}

#[derive(Clone, serde::Serialize)]
struct ProcSample {
    kind: String,
    variant: String,
    manager_rss_steady_kib: u64,
    manager_rss_peak_kib: u64,
    manager_cpu_s: f64,
    daemon_rss_steady_kib: u64,
    daemon_rss_peak_kib: u64,
}

struct Sampling {
    manager: Option<(u64, bench::RssPeak, Duration)>,
    daemon: Option<(u64, bench::RssPeak)>,
}

impl Procs {
    fn begin(&self) -> Sampling {
        Sampling {
            manager: self.manager.map(|pid| {
                (
                    bench::rss_kib(pid).unwrap_or(0),
                    bench::RssPeak::start(pid),
                    bench::cpu_time(pid).unwrap_or_default(),
                )
            }),
            daemon: self
                .daemon
                .map(|pid| (bench::rss_kib(pid).unwrap_or(0), bench::RssPeak::start(pid))),
        }
    }

    fn end(&self, s: Sampling, kind: PodKind, v: Variant) {
        let mut out = ProcSample {
            kind: format!("{kind:?}"),
            variant: format!("{v:?}"),
            manager_rss_steady_kib: 0,
            manager_rss_peak_kib: 0,
            manager_cpu_s: 0.0,
            daemon_rss_steady_kib: 0,
            daemon_rss_peak_kib: 0,
        };
        if let (Some((steady, peak, cpu0)), Some(pid)) = (s.manager, self.manager) {
            out.manager_rss_steady_kib = steady;
            out.manager_rss_peak_kib = peak.stop();
            out.manager_cpu_s = bench::cpu_time(pid)
                .unwrap_or_default()
                .saturating_sub(cpu0)
                .as_secs_f64();
        }
        if let Some((steady, peak)) = s.daemon {
            out.daemon_rss_steady_kib = steady;
            out.daemon_rss_peak_kib = peak.stop();
        }
        if let Ok(mut v) = self.samples.lock() {
            v.push(out);
        }
    }
}

/// Client-side latency of `n` Pod creates with `dryRun=All`: the API server runs admission
/// (every mutating and validating webhook) but stores nothing. With a `shape`, its objects are
/// made first (and the SidecarSets deleted after), then a few creates go unmeasured.
async fn admission_latency(
    client: &Client,
    n: usize,
    shape: admission::Shape,
) -> kruise_e2e::Result<Vec<Duration>> {
    let ns = TestNamespace::create(client, "bench-admission").await?;
    let pods: Api<Pod> = ns.api();
    let pp = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let template = pod_template("admission", "v1", PodKind::Bare, false);
    let shaped = shape.sidecar_sets > 0 || shape.objects;
    let mut warm_up = 0;
    if shaped {
        admission::remove_sidecar_sets(client).await?;
        admission::make(client, &ns.name, &template["metadata"]["labels"], shape).await?;
        // Past the moments after a SidecarSet create in which a webhook may distrust its cache.
        tokio::time::sleep(Duration::from_secs(6)).await;
        warm_up = 20;
    }
    let mut took = Vec::with_capacity(n);
    for i in 0..n + warm_up {
        let mut p = template.clone();
        p["metadata"]["name"] = json!(format!("admission-{i}"));
        let pod: Pod = serde_json::from_value(p)?;
        let t = Instant::now();
        pods.create(&pp, &pod).await?;
        if i >= warm_up {
            took.push(t.elapsed());
        }
    }
    if shaped {
        admission::remove_sidecar_sets(client).await?;
    }
    let ns_name = ns.name.clone();
    ns.delete().await?;
    wait_gone(client, &ns_name).await?;
    Ok(took)
}

/// A watch that keeps every Pod it sees with the moment it saw it.
struct WatchLog {
    seen: std::sync::Arc<std::sync::Mutex<Vec<(Instant, Pod)>>>,
    task: tokio::task::JoinHandle<()>,
}

impl WatchLog {
    fn start(api: Api<Pod>, selector: &str) -> Self {
        use futures::StreamExt;
        use kube::runtime::watcher::{self, Event};
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = seen.clone();
        let cfg = watcher::Config::default().labels(selector);
        let task = tokio::spawn(async move {
            let mut s = watcher::watcher(api, cfg).boxed();
            while let Some(ev) = s.next().await {
                if let Ok(Event::Apply(p) | Event::InitApply(p)) = ev
                    && let Ok(mut v) = sink.lock()
                {
                    v.push((Instant::now(), p));
                }
            }
        });
        Self { seen, task }
    }
    fn history(&self) -> Vec<(Instant, Pod)> {
        self.seen.lock().map(|v| v.clone()).unwrap_or_default()
    }
}

impl Drop for WatchLog {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Makes sure both images are on the node, so the registry is not what gets measured.
async fn prepull(client: &Client) -> kruise_e2e::Result<()> {
    let ns = TestNamespace::create(client, "bench-prepull").await?;
    let pods: Api<Pod> = ns.api();
    let containers: Vec<serde_json::Value> = ["v1", "v2"]
        .iter()
        .map(|t| json!({"name": format!("img-{t}"), "image": image("testapp", t), "command": ["sleep", "3600"]}))
        .collect();
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "prepull"},
        "spec": {"terminationGracePeriodSeconds": 1, "containers": containers}
    }))?;
    pods.create(&PostParams::default(), &pod).await?;
    wait_for("pre-pull Pod running", TIMEOUT, || async {
        let p = pods.get("prepull").await?;
        Ok(p.status
            .and_then(|s| s.container_statuses)
            .is_some_and(|cs| cs.len() == 2 && cs.iter().all(|c| c.ready))
            .then_some(()))
    })
    .await?;
    pods.delete("prepull", &DeleteParams::default()).await?;
    let ns_name = ns.name.clone();
    ns.delete().await?;
    wait_gone(client, &ns_name).await
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    if let Err(e) = run(args).await {
        eprintln!("kruise-bench: {e}");
        std::process::exit(1);
    }
}

/// Every run's time, the processes' samples, the admission latencies and the phases, as JSON.
fn write_json(
    path: &std::path::Path,
    times: &BTreeMap<(PodKind, Variant), Vec<Duration>>,
    procs: &Procs,
    phases: &BTreeMap<PodKind, Phases>,
    admission: &[Duration],
) -> kruise_e2e::Result<()> {
    let rows: Vec<serde_json::Value> = times
        .iter()
        .map(|((k, v), t)| {
            json!({"kind": format!("{k:?}"), "variant": format!("{v:?}"),
                   "seconds": t.iter().map(Duration::as_secs_f64).collect::<Vec<_>>()})
        })
        .collect();
    let procs = procs.samples.lock().map(|v| v.clone()).unwrap_or_default();
    let phases: BTreeMap<String, serde_json::Value> = phases
        .iter()
        .map(|(k, p)| (format!("{k:?}"), p.json()))
        .collect();
    let doc = json!({
        "rollouts": rows,
        "processes": procs,
        "admission_seconds": admission.iter().map(Duration::as_secs_f64).collect::<Vec<_>>(),
        "phases": phases,
    });
    std::fs::write(path, serde_json::to_string_pretty(&doc)?)?;
    Ok(())
}

/// The markdown report of a full run: the medians, their ratios and the per-Pod phases.
fn report(
    args: &Args,
    kinds: &[PodKind],
    times: &BTreeMap<(PodKind, Variant), Vec<Duration>>,
    phases: &BTreeMap<PodKind, Phases>,
    claim: bool,
) -> String {
    let med: BTreeMap<(PodKind, Variant), Duration> =
        times.iter().map(|(k, t)| (*k, median(t))).collect();
    let ratio = |k: PodKind, a: Variant, b: Variant| ratio(med[&(k, a)], med[&(k, b)]);
    let mut out = String::new();
    out.push_str(&format!(
        "\n## Rollout of {} Pods, one image change ({} runs each, interleaved, medians)\n\n",
        args.pods, args.common.runs
    ));
    out.push_str(&format!(
        "Machine: {}, local cluster (Kubernetes v1.34.4, containerd). Bare Pod: one HTTP container with a 1 s readiness probe. Typical Pod: the same plus an init container of 2 s, a ConfigMap volume, an emptyDir and a 1 s initial delay on the probe{}.\n\n",
        machine(),
        if claim {
            ", and a 16 MiB claim on the default StorageClass (CloneSets: from a volumeClaimTemplate, one per Pod, a new one per recreated Pod; bare Pods: one per Pod; the Deployment: one shared by its Pods)"
        } else {
            " (no PersistentVolumeClaim: no default StorageClass)"
        }
    ));
    out.push_str("| Pod | variant | median s | runs s |\n|---|---|---|---|\n");
    for &kind in kinds {
        for v in Variant::ALL {
            out.push_str(&format!(
                "| {} | {} | {} | {} |\n",
                kind.label(),
                v.label(),
                secs(med[&(kind, v)]),
                secs_list(&times[&(kind, v)])
            ));
        }
    }
    out.push_str("\n| Pod | (a)/(c) in-place vs Deployment | (b)/(c) recreate vs Deployment | (a)/(d) in-place vs bare-Pod floor |\n|---|---|---|---|\n");
    for &kind in kinds {
        out.push_str(&format!(
            "| {} | {:.2} | {:.2} | {:.2} |\n",
            kind.label(),
            ratio(kind, Variant::InPlace, Variant::Deployment),
            ratio(kind, Variant::Recreate, Variant::Deployment),
            ratio(kind, Variant::InPlace, Variant::BarePods),
        ));
    }
    out.push_str("\nTargets: (a)/(c) ≤ 0.3, (a)/(d) ≤ 1.1.\n");
    for &kind in kinds {
        let Some(ph) = phases.get(&kind) else {
            continue;
        };
        let lat = &ph.patch_to_ready;
        out.push_str(&format!(
            "\n{}: per-Pod latency of (a), spec patched → Ready: median {}s, max {}s over {} Pods.\n",
            kind.label(),
            secs(median(lat)),
            secs(max(lat)),
            lat.len()
        ));
        out.push_str(&ph.table());
    }
    out
}

async fn run(args: Args) -> kruise_e2e::Result<()> {
    let client = client().await?;
    let mut kinds = args.pod_kinds.clone();
    kinds.dedup();
    let mut variants = args.variants.clone();
    variants.sort();
    variants.dedup();
    if args.admission_only {
        variants.clear();
    }
    let procs = Procs {
        manager: args.manager_pid,
        daemon: args.daemon_pid,
        ..Default::default()
    };
    if !variants.is_empty() {
        prepull(&client).await?;
    }
    // Typical Pods get a claim where one can bind.
    let claim = !args.no_claim && has_default_storage_class(&client).await?;
    if kinds.contains(&PodKind::Typical) && !claim {
        eprintln!(
            "kruise-bench: typical Pods without a PersistentVolumeClaim (no default StorageClass, or --no-claim)"
        );
    }
    let mut times: BTreeMap<(PodKind, Variant), Vec<Duration>> = BTreeMap::new();
    let mut phases: BTreeMap<PodKind, Phases> = BTreeMap::new();
    // The API takes replicas as i32; a count past that is not a benchmark this cluster runs.
    let pods = i32::try_from(args.pods)
        .map_err(|_| kruise_e2e::Error::Mode(format!("--pods {} is too many", args.pods)))?;
    // Order per run: every kind, every variant, so that drift spreads over all of them alike.
    for run in 0..args.common.runs {
        for &kind in &kinds {
            for &v in &variants {
                let ph = phases.entry(kind).or_default();
                let took = one_run(&client, v, (kind, claim), pods, run, ph, Some(&procs)).await?;
                eprintln!(
                    "run {} {} {}: {}s",
                    run + 1,
                    kind.label(),
                    v.label(),
                    secs(took)
                );
                times.entry((kind, v)).or_default().push(took);
            }
        }
    }
    let admission = if args.admission_samples > 0 {
        let shape = admission::Shape {
            sidecar_sets: args.admission_sidecarsets,
            matching: args.admission_matching_sidecarsets,
            objects: args.admission_objects,
        };
        admission_latency(&client, args.admission_samples, shape).await?
    } else {
        Vec::new()
    };
    if let Some(path) = &args.json {
        write_json(path, &times, &procs, &phases, &admission)?;
    }
    if variants != Variant::ALL {
        // A partial run (one system's turn in hack/bench-openkruise.sh) has no ratios to print.
        if !admission.is_empty() {
            println!(
                "Pod create (dry run) p50 {}s p99 {}s over {}",
                secs(median(&admission)),
                secs(kruise_e2e::bench::stats::quantile(&admission, 0.99)),
                admission.len()
            );
        }
        for ((k, v), t) in &times {
            println!(
                "{} {}: median {}s, runs {}",
                k.label(),
                v.label(),
                secs(median(t)),
                secs_list(t)
            );
        }
        return Ok(());
    }
    let out = report(&args, &kinds, &times, &phases, claim);
    args.common.emit(&out)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typical_pods_have_init_volumes_and_a_delayed_probe() {
        let t = pod_template("web", "v2", PodKind::Typical, false);
        let spec = &t["spec"];
        assert_eq!(spec["initContainers"][0]["command"], json!(["sleep", "2"]));
        // The init image stays v1 when the app moves to v2: the change stays in place.
        assert_eq!(
            spec["initContainers"][0]["image"],
            json!(image("testapp", "v1"))
        );
        assert_eq!(
            spec["containers"][0]["image"],
            json!(image("testapp", "v2"))
        );
        assert_eq!(spec["volumes"][0]["configMap"]["name"], json!(CONFIG_MAP));
        assert!(spec["volumes"][1]["emptyDir"].is_object());
        assert_eq!(
            spec["containers"][0]["volumeMounts"]
                .as_array()
                .map(Vec::len),
            Some(2)
        );
        assert_eq!(
            spec["containers"][0]["readinessProbe"]["initialDelaySeconds"],
            json!(1)
        );
        // It parses as a Pod spec.
        let _: k8s_openapi::api::core::v1::PodTemplateSpec =
            serde_json::from_value(t.clone()).expect("pod template");
    }

    #[test]
    fn typical_pods_with_a_claim_mount_it_where_each_variant_puts_it() {
        let mut t = pod_template("web", "v1", PodKind::Typical, true);
        let mounts = &t["spec"]["containers"][0]["volumeMounts"];
        assert_eq!(mounts.as_array().map(Vec::len), Some(3));
        assert_eq!(mounts[2]["name"], json!(CLAIM_VOLUME));
        // The CloneSet's volumeClaimTemplate supplies the volume: the template has none.
        assert_eq!(t["spec"]["volumes"].as_array().map(Vec::len), Some(2));
        mount_claim(&mut t["spec"], "data-web-0");
        assert_eq!(
            t["spec"]["volumes"][2]["persistentVolumeClaim"]["claimName"],
            json!("data-web-0")
        );
        let _: Pod = serde_json::from_value(t).expect("a Pod");
    }

    #[test]
    fn bare_pods_have_nothing_but_the_container() {
        let t = pod_template("web", "v1", PodKind::Bare, true);
        assert!(t["spec"].get("initContainers").is_none());
        assert!(t["spec"].get("volumes").is_none());
        assert!(
            t["spec"]["containers"][0]["readinessProbe"]
                .get("initialDelaySeconds")
                .is_none()
        );
    }

    #[test]
    fn arguments_select_kinds_and_variants() {
        let a = Args::try_parse_from(["kruise-bench"]).expect("defaults");
        assert_eq!(a.pod_kinds, vec![PodKind::Bare, PodKind::Typical]);
        assert_eq!(a.variants, Variant::ALL.to_vec());
        let a = Args::try_parse_from([
            "kruise-bench",
            "--variants",
            "in-place,recreate",
            "--pod-kinds",
            "typical",
            "--manager-pid",
            "42",
        ])
        .expect("parse");
        assert_eq!(a.variants, vec![Variant::InPlace, Variant::Recreate]);
        assert_eq!(a.pod_kinds, vec![PodKind::Typical]);
        assert_eq!(a.manager_pid, Some(42));
        assert!(Args::try_parse_from(["kruise-bench", "--variants", "sideways"]).is_err());
    }
}
