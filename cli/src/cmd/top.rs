//! `top [workloads | TYPE | TYPE/NAME] [-A]`: the CPU and memory the Pods of Kruise workloads
//! use, from the resource metrics API (`metrics.k8s.io/v1beta1` PodMetrics, served by
//! metrics-server), summed and averaged per revision so a rollout's new revision can be compared
//! with the old one.
//!
//! Everything is read once: the PodMetrics and Pods of the scope (one list each), then each
//! kind's workloads. Grouping reuses `describe`'s (update revision first, then the current one);
//! the sums and the table are pure functions below, unit-tested.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Pod;
use kruise_api::keys::k8s as k8s_keys;
use kruise_manager::inplace::quantity::nano_value;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};
use serde::Serialize;
use serde_json::Value;

use crate::cli::{Output, Scope, TopArgs};
use crate::ctx::{Ctx, Workload, typed_json};
use crate::error::{CliError, Result, exit, kube_err};
use crate::view::describe::pod_groups;
use crate::view::workload::{Kind, PodSource};
use crate::view::{PodView, RolloutView};

/// The kinds `top` reports by default: the Kruise workloads that own Pods, and SidecarSets (whose
/// rows count only their sidecar containers).
pub const DEFAULT_KINDS: [Kind; 4] = [
    Kind::CloneSet,
    Kind::AdvancedStatefulSet,
    Kind::AdvancedDaemonSet,
    Kind::SidecarSet,
];

pub async fn run(ctx: &Ctx, args: &TopArgs) -> Result<i32> {
    let ns = (!args.all_namespaces).then_some(ctx.namespace.as_str());
    // First, so a cluster without the Metrics API fails before anything else is read.
    let usage = pod_metrics(ctx, ns).await?;
    let pods_api: Api<Pod> = match ns {
        Some(n) => Api::namespaced(ctx.client.clone(), n),
        None => Api::all(ctx.client.clone()),
    };
    let pods: Vec<Pod> = pods_api
        .list(&ListParams::default())
        .await
        .map_err(kube_err)?
        .items;
    let scope = args.target.as_ref().unwrap_or(&Scope::Workloads);
    let views = workloads(ctx, scope, ns).await?;
    let mut report = TopReport {
        schema_version: 1,
        workloads: Vec::new(),
    };
    for view in &views {
        let mine: Vec<PodView> = match view.kind.spec().pods {
            PodSource::Owned => pods
                .iter()
                .filter(|p| owned_by(p, &view.uid))
                .map(|p| PodView::from_pod(p).for_kind(view.kind))
                .collect(),
            PodSource::SelectedClusterWide => pods.iter().map(PodView::from_pod).collect(),
            PodSource::Selected => selected_pods(ctx, view).await?,
        };
        let row = workload_usage(view, &mine, &usage);
        // A SidecarSet is cluster-wide: only those that injected Pods in the scope are shown,
        // unless it was asked for by name.
        let named = matches!(scope, Scope::One(_));
        if view.kind == Kind::SidecarSet && row.revisions.is_empty() && !named {
            continue;
        }
        report.workloads.push(row);
    }
    match args.output {
        Output::Text => print!("{}", render(&report, args.all_namespaces)),
        other => super::status::print_doc(other, &report),
    }
    Ok(exit::OK)
}

/// The resource metrics API's PodMetrics.
fn pod_metrics_resource() -> ApiResource {
    let (group, version) = k8s_keys::METRICS_API_VERSION
        .split_once('/')
        .unwrap_or((k8s_keys::METRICS_GROUP, ""));
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(group, version, k8s_keys::POD_METRICS_KIND),
        k8s_keys::POD_METRICS_PLURAL,
    )
}

/// Every Pod's usage in the scope, by (namespace, name). A Metrics API that is not registered
/// (404) or whose server does not answer (503) is `kubectl top`'s "Metrics API not available".
async fn pod_metrics(ctx: &Ctx, ns: Option<&str>) -> Result<Metrics> {
    let ar = pod_metrics_resource();
    let api: Api<DynamicObject> = match ns {
        Some(n) => Api::namespaced_with(ctx.client.clone(), n, &ar),
        None => Api::all_with(ctx.client.clone(), &ar),
    };
    let list = match api.list(&ListParams::default()).await {
        Ok(l) => l,
        Err(kube::Error::Api(s)) if matches!(s.code, 404 | 503) => {
            return Err(metrics_unavailable(&s.message));
        }
        Err(e) => return Err(kube_err(e)),
    };
    Ok(list
        .items
        .iter()
        .map(|m| {
            let key = (
                m.metadata.namespace.clone().unwrap_or_default(),
                m.metadata.name.clone().unwrap_or_default(),
            );
            (key, PodUsage::from_pod_metrics(&m.data))
        })
        .collect())
}

/// What `kubectl top` says (`error: Metrics API not available`), with what to check and do.
pub fn metrics_unavailable(detail: &str) -> CliError {
    let detail = detail.trim();
    let detail = if detail.is_empty() {
        String::new()
    } else {
        format!(" ({detail})")
    };
    CliError::Failed(format!(
        "Metrics API not available: the cluster does not serve {api}{detail}. Install \
         metrics-server (its release manifest components.yaml) and check that `kubectl get \
         apiservice {svc}` is Available; on the local cluster `make cluster-up` runs it",
        api = k8s_keys::METRICS_API_VERSION,
        svc = k8s_keys::METRICS_APISERVICE,
    ))
}

/// The workloads of the scope, ordered by namespace, then kind (in [`DEFAULT_KINDS`] order) and
/// name.
async fn workloads(ctx: &Ctx, scope: &Scope, ns: Option<&str>) -> Result<Vec<RolloutView>> {
    let kinds: Vec<Kind> = match scope {
        Scope::One(target) => {
            let wl = Workload::locate(ctx, target).await?;
            return Ok(vec![wl.view().await?]);
        }
        Scope::Kind(k) => vec![*k],
        Scope::Workloads => DEFAULT_KINDS.to_vec(),
    };
    let mut views = Vec::new();
    for kind in kinds {
        let spec = kind.spec();
        let ar = match ctx.resolve(spec.group, spec.plural).await {
            Ok((ar, _)) => ar,
            // By default, a kind whose CRD is not installed has nothing to show.
            Err(CliError::NotInstalled { .. }) if *scope == Scope::Workloads => continue,
            Err(e) => return Err(e),
        };
        let api: Api<DynamicObject> = match ns {
            Some(n) if spec.namespaced => Api::namespaced_with(ctx.client.clone(), n, &ar),
            _ => Api::all_with(ctx.client.clone(), &ar),
        };
        let list = api.list(&ListParams::default()).await.map_err(kube_err)?;
        let mut of_kind: Vec<RolloutView> = list
            .items
            .iter()
            .map(|o| RolloutView::from_json(&typed_json(o, &ar)))
            .collect();
        of_kind.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        views.extend(of_kind);
    }
    // Stable: the kinds keep their order within a namespace.
    views.sort_by(|a, b| a.namespace.cmp(&b.namespace));
    Ok(views)
}

/// Owned by the workload `uid` (an object without a UID owns nothing).
fn owned_by(pod: &Pod, uid: &str) -> bool {
    !uid.is_empty() && super::history::owned_by(pod.metadata.owner_references.as_ref(), uid)
}

/// The Pods of a kind that does not own them (Deployment, UnitedDeployment): its selector's.
async fn selected_pods(ctx: &Ctx, view: &RolloutView) -> Result<Vec<PodView>> {
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &view.namespace);
    let list = api
        .list(&ListParams::default().labels(view.list_selector()?))
        .await
        .map_err(kube_err)?;
    Ok(list
        .items
        .iter()
        .map(|p| PodView::from_pod(p).for_kind(view.kind))
        .collect())
}

// ---------------------------------------------------------------------------------------------
// Pure part: usage parsing, grouping, sums and the table.

/// PodMetrics by (namespace, Pod name).
pub type Metrics = BTreeMap<(String, String), PodUsage>;

/// CPU in nanocores and memory in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub cpu_nanocores: i128,
    pub memory_bytes: i128,
}

impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, o: Usage) {
        self.cpu_nanocores += o.cpu_nanocores;
        self.memory_bytes += o.memory_bytes;
    }
}

/// One Pod's PodMetrics: each container's usage.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodUsage {
    pub containers: BTreeMap<String, Usage>,
}

impl PodUsage {
    /// Reads a PodMetrics' `containers[].usage` (`cpu`, `memory` as quantities); a quantity
    /// that does not parse counts as zero.
    pub fn from_pod_metrics(data: &Value) -> Self {
        let q = |v: &Value| v.as_str().and_then(nano_value).unwrap_or(0);
        let containers = data["containers"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| {
                let usage = Usage {
                    cpu_nanocores: q(&c["usage"]["cpu"]),
                    // Quantities in nano units: memory is a whole number of bytes.
                    memory_bytes: q(&c["usage"]["memory"]) / 1_000_000_000,
                };
                (c["name"].as_str().unwrap_or_default().to_owned(), usage)
            })
            .collect();
        PodUsage { containers }
    }

    /// The sum over the containers, or over those named in `only`.
    pub fn total(&self, only: Option<&BTreeSet<String>>) -> Usage {
        let mut sum = Usage::default();
        for (name, u) in &self.containers {
            if only.is_none_or(|names| names.contains(name)) {
                sum += *u;
            }
        }
        sum
    }
}

/// The containers a SidecarSet's rows count: its sidecars, and both containers of a hot-upgrade
/// pair. None (the whole Pod) for other kinds.
pub fn counted_containers(view: &RolloutView) -> Option<BTreeSet<String>> {
    (view.kind == Kind::SidecarSet).then(|| {
        view.images
            .iter()
            .flat_map(|(name, _)| {
                let (a, b) = kruise_api::sidecarset::hot_upgrade_container_names(name);
                [name.clone(), a, b]
            })
            .collect()
    })
}

/// `top -o json|yaml`.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TopReport {
    pub schema_version: u32,
    pub workloads: Vec<WorkloadUsage>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadUsage {
    pub kind: String,
    /// `TYPE/NAME`, as the other commands take it.
    pub target: String,
    /// Empty for a SidecarSet (cluster-scoped).
    pub namespace: String,
    pub name: String,
    pub update_revision: String,
    pub current_revision: String,
    /// The update revision first, then the current one, then any other.
    pub revisions: Vec<RevisionUsage>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RevisionUsage {
    pub revision: String,
    /// `update`, `current` or empty.
    pub role: String,
    pub pods: usize,
    /// Pods metrics-server reports (a new Pod appears after its first scrape).
    pub pods_with_metrics: usize,
    /// Sums over the Pods with metrics.
    pub cpu_millicores: f64,
    #[serde(rename = "memoryMiB")]
    pub memory_mib: f64,
    /// Per Pod with metrics; None when none has any yet.
    pub avg_cpu_millicores: Option<f64>,
    #[serde(rename = "avgMemoryMiB")]
    pub avg_memory_mib: Option<f64>,
    pub pod_usage: Vec<PodUsageRow>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PodUsageRow {
    pub namespace: String,
    pub name: String,
    pub cpu_millicores: Option<f64>,
    #[serde(rename = "memoryMiB")]
    pub memory_mib: Option<f64>,
}

const NANOS_PER_MILLI: f64 = 1_000_000.0;
const BYTES_PER_MIB: f64 = 1_048_576.0;

/// Converts for output; the values fit a double's integer range long before they matter.
#[allow(clippy::cast_precision_loss)]
fn millicores(u: &Usage) -> f64 {
    u.cpu_nanocores as f64 / NANOS_PER_MILLI
}

#[allow(clippy::cast_precision_loss)]
fn mib(u: &Usage) -> f64 {
    u.memory_bytes as f64 / BYTES_PER_MIB
}

/// The workload's Pods grouped by revision (as `describe` groups them, namespace by namespace
/// for a SidecarSet's), with their usage summed and averaged.
pub fn workload_usage(view: &RolloutView, pods: &[PodView], metrics: &Metrics) -> WorkloadUsage {
    let only = counted_containers(view);
    let mut by_ns: BTreeMap<&str, Vec<PodView>> = BTreeMap::new();
    for p in pods {
        by_ns
            .entry(p.namespace.as_str())
            .or_default()
            .push(p.clone());
    }
    let mut revisions: Vec<RevisionUsage> = Vec::new();
    for (ns, ns_pods) in by_ns {
        for g in pod_groups(view, &ns_pods) {
            let i = match revisions.iter().position(|r| r.revision == g.revision) {
                Some(i) => i,
                None => {
                    revisions.push(RevisionUsage {
                        revision: g.revision.clone(),
                        role: g.role.clone(),
                        pods: 0,
                        pods_with_metrics: 0,
                        cpu_millicores: 0.0,
                        memory_mib: 0.0,
                        avg_cpu_millicores: None,
                        avg_memory_mib: None,
                        pod_usage: Vec::new(),
                    });
                    revisions.len() - 1
                }
            };
            let r = &mut revisions[i];
            for p in g.pods {
                let u = metrics
                    .get(&(ns.to_owned(), p.name.clone()))
                    .map(|m| m.total(only.as_ref()));
                r.pod_usage.push(PodUsageRow {
                    namespace: ns.to_owned(),
                    name: p.name,
                    cpu_millicores: u.as_ref().map(millicores),
                    memory_mib: u.as_ref().map(mib),
                });
            }
        }
    }
    for r in &mut revisions {
        summarize(r);
    }
    let rank = |r: &RevisionUsage| match r.role.as_str() {
        "update" => 0,
        "current" => 1,
        _ => 2,
    };
    revisions.sort_by(|a, b| rank(a).cmp(&rank(b)).then(a.revision.cmp(&b.revision)));
    WorkloadUsage {
        kind: view.kind.as_str().to_owned(),
        target: format!("{}/{}", view.kind.type_name(), view.name),
        namespace: view.namespace.clone(),
        name: view.name.clone(),
        update_revision: view.update_revision.clone(),
        current_revision: view.current_revision.clone(),
        revisions,
    }
}

/// Fills in the revision's counts, sums and averages from its Pods.
#[allow(clippy::cast_precision_loss)]
fn summarize(r: &mut RevisionUsage) {
    r.pods = r.pod_usage.len();
    let measured: Vec<(f64, f64)> = r
        .pod_usage
        .iter()
        .filter_map(|p| Some((p.cpu_millicores?, p.memory_mib?)))
        .collect();
    r.pods_with_metrics = measured.len();
    r.cpu_millicores = measured.iter().map(|m| m.0).sum();
    r.memory_mib = measured.iter().map(|m| m.1).sum();
    let n = measured.len() as f64;
    r.avg_cpu_millicores = (!measured.is_empty()).then(|| r.cpu_millicores / n);
    r.avg_memory_mib = (!measured.is_empty()).then(|| r.memory_mib / n);
}

/// CPU as kubectl prints it: whole millicores, rounded up so that a Pod that used any CPU does
/// not read 0.
fn fmt_cpu(m: Option<f64>) -> String {
    m.map_or_else(|| "-".to_owned(), |v| format!("{:.0}", v.ceil()))
}

fn fmt_mem(m: Option<f64>) -> String {
    m.map_or_else(|| "-".to_owned(), |v| format!("{v:.1}"))
}

/// The text table: one row per workload and revision (a workload without Pods gets one row of
/// dashes); NAMESPACE only with `-A`, as in `kubectl top`.
pub fn render(report: &TopReport, all_namespaces: bool) -> String {
    if report.workloads.is_empty() {
        return format!(
            "No Kruise workloads found{}.\n",
            if all_namespaces {
                ""
            } else {
                " in this namespace"
            }
        );
    }
    let header = [
        "NAMESPACE",
        "WORKLOAD",
        "REVISION",
        "ROLE",
        "PODS",
        "CPU(m)",
        "CPU/POD(m)",
        "MEMORY(MiB)",
        "MEMORY/POD(MiB)",
    ];
    let mut rows: Vec<[String; 9]> = Vec::new();
    let mut partial = false;
    for w in &report.workloads {
        let ns = if w.namespace.is_empty() {
            "-".to_owned()
        } else {
            w.namespace.clone()
        };
        if w.revisions.is_empty() {
            let dash = || "-".to_owned();
            rows.push([
                ns.clone(),
                w.target.clone(),
                dash(),
                dash(),
                "0".to_owned(),
                dash(),
                dash(),
                dash(),
                dash(),
            ]);
        }
        for r in &w.revisions {
            let pods = if r.pods_with_metrics == r.pods {
                r.pods.to_string()
            } else {
                partial = true;
                format!("{}/{}", r.pods_with_metrics, r.pods)
            };
            let measured = r.pods_with_metrics > 0;
            rows.push([
                ns.clone(),
                w.target.clone(),
                if r.revision.is_empty() {
                    "-"
                } else {
                    &r.revision
                }
                .to_owned(),
                if r.role.is_empty() { "-" } else { &r.role }.to_owned(),
                pods,
                fmt_cpu(measured.then_some(r.cpu_millicores)),
                fmt_cpu(r.avg_cpu_millicores),
                fmt_mem(measured.then_some(r.memory_mib)),
                fmt_mem(r.avg_memory_mib),
            ]);
        }
    }
    let skip = usize::from(!all_namespaces);
    let mut widths = [0usize; 9];
    for (i, h) in header.iter().enumerate() {
        widths[i] = rows
            .iter()
            .map(|r| r[i].chars().count())
            .max()
            .unwrap_or(0)
            .max(h.len());
    }
    let line = |cells: Vec<&str>| -> String {
        let mut out = String::new();
        for (i, c) in cells.iter().enumerate().skip(skip) {
            // Text columns left, numbers right.
            if i < 4 {
                out.push_str(&format!("{c:<w$}", w = widths[i]));
            } else {
                out.push_str(&format!("{c:>w$}", w = widths[i]));
            }
            out.push_str(if i + 1 < cells.len() { "  " } else { "\n" });
        }
        out
    };
    let mut out = line(header.to_vec());
    for r in &rows {
        out.push_str(&line(r.iter().map(String::as_str).collect()));
    }
    if partial {
        out.push_str(
            "PODS N/M: N of the M Pods have metrics yet (metrics-server reports a Pod after its first scrape)\n",
        );
    }
    out
}

#[cfg(test)]
#[path = "top_tests.rs"]
mod tests;
