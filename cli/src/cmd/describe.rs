//! `describe TYPE/NAME`: reads the workload, its Pods, revisions, the budgets its Pods name and
//! the Events about it and its Pods, once, and prints [`Description`].

use k8s_openapi::api::core::v1::{Event as K8sEvent, Pod};
use kube::api::{Api, ListParams};

use crate::cli::Output;
use crate::ctx::{Ctx, Workload};
use crate::error::{CliError, Result, kube_err};
use crate::target::Target;
use crate::view::describe::{
    ConditionRow, Description, EventLine, Image, Replicas, RevisionRow, Strategy, pod_groups,
    render,
};
use crate::view::{PodView, RolloutView};
use crate::watch::{self, Cache};

/// Events shown, newest first.
const EVENTS: usize = 15;

pub async fn run(ctx: &Ctx, target: &Target, output: Output) -> Result<i32> {
    let wl = Workload::locate(ctx, target).await?;
    let view = wl.view().await?;
    let pods_api: Api<Pod> = wl.pods_api(&ctx.client);
    let mut cache: Cache<Pod> = Cache::default();
    let list = pods_api
        .list(&ListParams::default().labels(view.list_selector()?))
        .await
        .map_err(kube_err)?;
    for p in list.items {
        cache
            .items
            .insert(p.metadata.name.clone().unwrap_or_default(), p);
    }
    let owner = (view.kind.owns_pods() && !view.uid.is_empty()).then_some(view.uid.as_str());
    let pods: Vec<PodView> = watch::owned(&cache, owner)
        .map(|p| PodView::from_pod(p).for_kind(view.kind))
        .collect();
    // A kind without revisions this plugin reads (or none yet) shows an empty history.
    let revisions = match super::history::revisions(ctx, &wl, &view).await {
        Ok(revs) => revs,
        Err(CliError::Usage(_)) => Vec::new(),
        Err(e) => return Err(e),
    };
    let reads = super::status::reads(ctx, &cache).await;
    let held = if view.update_revision.is_empty() {
        Vec::new()
    } else {
        crate::status::held::held(&view, &pods, crate::status::HELD_LIMIT, &reads)
    };
    let events = events(ctx, &view, &pods).await;
    let d = describe(&view, &revisions, &pods, held, events);
    match output {
        Output::Text => print!("{}", render(&d)),
        other => super::status::print_doc(other, &d),
    }
    Ok(crate::error::exit::OK)
}

/// Events about the workload or its Pods, newest first. Events are best-effort: a namespace
/// the caller cannot list Events in still gets the rest of the description.
async fn events(ctx: &Ctx, view: &RolloutView, pods: &[PodView]) -> Vec<EventLine> {
    let namespaces: std::collections::BTreeSet<&str> = std::iter::once(view.namespace.as_str())
        .chain(pods.iter().map(|p| p.namespace.as_str()))
        .filter(|n| !n.is_empty())
        .collect();
    let mut cache: Cache<K8sEvent> = Cache::default();
    for ns in namespaces {
        let api: Api<K8sEvent> = Api::namespaced(ctx.client.clone(), ns);
        match api.list(&ListParams::default()).await {
            Ok(list) => {
                for e in list.items {
                    let key = format!("{ns}/{}", e.metadata.name.clone().unwrap_or_default());
                    cache.items.insert(key, e);
                }
            }
            Err(e) => tracing::debug!(error = %e, namespace = ns, "cannot list Events"),
        }
    }
    crate::view::events::relevant_events(cache.items.values(), &view.name, pods)
        .into_iter()
        .take(EVENTS)
        .map(|r| EventLine {
            time: r.time.map(|t| t.to_string()),
            type_: r.type_,
            reason: r.reason,
            object: r.object,
            message: r.message,
        })
        .collect()
}

pub(crate) fn describe(
    view: &RolloutView,
    revisions: &[super::history::Revision],
    pods: &[PodView],
    held: Vec<crate::view::verdict::Held>,
    events: Vec<EventLine>,
) -> Description {
    Description {
        schema_version: 1,
        kind: view.kind.to_string(),
        api_version: view.api_version.clone(),
        namespace: view.namespace.clone(),
        name: view.name.clone(),
        selector: view.selector.clone(),
        generation: view.generation,
        observed_generation: view.observed_generation,
        replicas: Replicas {
            desired: view.replicas,
            current: view.status_replicas,
            updated: view.updated_replicas,
            updated_ready: view.updated_ready_replicas,
            ready: view.ready_replicas,
            available: view.available_replicas,
        },
        strategy: Strategy {
            pod_update_policy: view.pod_update_policy.clone(),
            partition: view.partition.as_ref().map(ToString::to_string),
            max_unavailable: view.max_unavailable.as_ref().map(ToString::to_string),
            max_surge: view.max_surge.as_ref().map(ToString::to_string),
            paused: view.paused,
            on_delete: view.on_delete,
            grace_period_seconds: view.grace_period_seconds,
        },
        images: view
            .images
            .iter()
            .map(|(c, i)| Image {
                container: c.clone(),
                image: i.clone(),
            })
            .collect(),
        current_revision: view.current_revision.clone(),
        update_revision: view.update_revision.clone(),
        volume_claims: view.volume_claims.clone(),
        revisions: revisions
            .iter()
            .map(|r| RevisionRow {
                revision: r.revision,
                name: r.name.clone(),
                images: r.images.clone(),
                state: match (r.current, r.update) {
                    (true, _) => "current",
                    (false, true) => "update",
                    _ => "",
                }
                .to_owned(),
                change_cause: r.change_cause.clone(),
            })
            .collect(),
        conditions: view
            .conditions
            .iter()
            .map(|c| ConditionRow {
                type_: c.type_.clone(),
                status: c.status.clone(),
                reason: c.reason.clone(),
                message: c.message.clone(),
            })
            .collect(),
        pod_groups: pod_groups(view, pods),
        held,
        events,
    }
}
