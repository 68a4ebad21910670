//! One reconcile of a distribution (upstream `doReconcile`): read the namespaces and the
//! same-named objects → plan → apply each namespace's step → status → a Warning Event for each
//! failure kind that newly appeared. Failures that only a user can fix (a foreign object, a
//! missing namespace) are reported and not retried; write failures are retried with backoff.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kruise_api::apps::v1alpha1::{
    DistributedResource, ResourceDistribution, ResourceDistributionConditionType as ConditionType,
    resource_hash,
};
use kruise_api::keys;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, PostParams, Preconditions};
use kube::discovery::ApiResource;
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::{Resource, ResourceExt};
use serde_json::Value;

use super::context::Context;
use super::error::Error;
use super::plan::{Distributor, NamespaceInfo, NamespaceStep, Step, plan};
use super::status::{self, Failure};

/// Namespaces written at once (upstream writes in slow-start batches of 1, 2, 4, …).
const PARALLEL_WRITES: usize = 8;

/// One reconcile of `rd` (the runner adds its span, timing and metrics).
pub async fn reconcile(rd: Arc<ResourceDistribution>, ctx: Arc<Context>) -> Result<Action, Error> {
    if rd.metadata.deletion_timestamp.is_some() {
        // The garbage collector removes the copies through their owner references.
        return Ok(Action::await_change());
    }
    let resource = DistributedResource::parse(&rd.spec.resource)?;
    if ctx.namespaces.wait_until_ready().await.is_err() {
        return Ok(Action::await_change());
    }
    let namespaces = namespace_infos(&ctx);
    let ar = api_resource(&resource.kind);
    let existing = same_named(&ctx, &ar, &resource.name).await?;
    let hash = resource_hash(&rd.spec.resource);
    let name = rd.name_any();
    let uid = rd.metadata.uid.clone().unwrap_or_default();
    let d = Distributor {
        name: &name,
        uid: &uid,
        resource: &rd.spec.resource,
        hash: &hash,
    };
    let steps = plan(&d, &rd.spec.targets, &namespaces, &existing);
    let desired = steps.iter().filter(|s| s.targeted).count();
    let failures = apply(&ctx, &ar, &resource.name, steps, &existing).await;
    let new_status = status::compute(
        rd.status.as_ref(),
        rd.metadata.generation.unwrap_or_default(),
        desired,
        &failures,
        jiff::Timestamp::now(),
    );
    let about = rd.object_ref(&());
    for c in status::newly_true(rd.status.as_ref(), &new_status) {
        let note = format!(
            "{} {} in namespaces {}: {}",
            resource.kind,
            resource.name,
            c.failed_namespaces.join(", "),
            c.reason
        );
        ctx.event(&about, EventType::Warning, &c.type_, note).await;
    }
    status::write(&ctx, &rd, &new_status).await?;
    let retried: Vec<&Failure> = failures.iter().filter(|f| f.condition.retried()).collect();
    match retried.first() {
        Some(first) => Err(Error::Namespaces {
            count: retried.len(),
            first: format!("{}: {}", first.namespace, first.message),
        }),
        None => Ok(Action::await_change()),
    }
}

fn namespace_infos(ctx: &Context) -> Vec<NamespaceInfo> {
    ctx.namespaces
        .state()
        .iter()
        .map(|n| NamespaceInfo {
            name: n.name_any(),
            labels: n.labels().clone(),
            terminating: n.metadata.deletion_timestamp.is_some(),
        })
        .collect()
}

/// The API of the distributed kind (only Secret and ConfigMap pass the parse).
fn api_resource(kind: &str) -> ApiResource {
    if kind == keys::k8s::CONFIGMAP_KIND {
        ApiResource::erase::<ConfigMap>(&())
    } else {
        ApiResource::erase::<Secret>(&())
    }
}

/// Every object of the kind named `name`, by namespace: one list across namespaces.
async fn same_named(
    ctx: &Context,
    ar: &ApiResource,
    name: &str,
) -> Result<BTreeMap<String, Value>, Error> {
    let api: Api<DynamicObject> = Api::all_with(ctx.client.clone(), ar);
    let list = api
        .list(&ListParams::default().fields(&format!("metadata.name={name}")))
        .await?;
    Ok(list
        .items
        .into_iter()
        .filter_map(|o| {
            let ns = o.metadata.namespace.clone()?;
            serde_json::to_value(o).ok().map(|v| (ns, v))
        })
        .collect())
}

/// Performs every step, a few namespaces at once; the failures, by namespace.
async fn apply(
    ctx: &Context,
    ar: &ApiResource,
    name: &str,
    steps: Vec<NamespaceStep>,
    existing: &BTreeMap<String, Value>,
) -> Vec<Failure> {
    futures::stream::iter(steps)
        .map(|s| async move {
            let message = match &s.step {
                Step::Keep => return None,
                Step::Conflict => keys::RD_CONFLICT_MESSAGE.to_owned(),
                Step::NamespaceMissing => keys::RD_NAMESPACE_NOT_EXISTS_MESSAGE.to_owned(),
                step => {
                    let uid = existing
                        .get(&s.namespace)
                        .and_then(|o| o.pointer("/metadata/uid"))
                        .and_then(Value::as_str);
                    match write(ctx, ar, &s.namespace, name, step, uid).await {
                        Ok(()) => return None,
                        Err(e) => e.to_string(),
                    }
                }
            };
            let condition = match &s.step {
                Step::Conflict => ConditionType::ConflictOccurred,
                Step::NamespaceMissing => ConditionType::NamespaceNotExists,
                step => step.failure_condition()?,
            };
            tracing::debug!(namespace = %s.namespace, ?condition, %message, "namespace failed");
            Some(Failure {
                condition,
                namespace: s.namespace,
                targeted: s.targeted,
                message,
            })
        })
        .buffer_unordered(PARALLEL_WRITES)
        .filter_map(futures::future::ready)
        .collect()
        .await
}

/// One create, update or delete.
async fn write(
    ctx: &Context,
    ar: &ApiResource,
    namespace: &str,
    name: &str,
    step: &Step,
    uid: Option<&str>,
) -> Result<(), kube::Error> {
    let api: Api<DynamicObject> = Api::namespaced_with(ctx.client.clone(), namespace, ar);
    let object = |v: &Value| serde_json::from_value::<DynamicObject>(v.clone());
    match step {
        Step::Create(v) => {
            api.create(
                &PostParams::default(),
                &object(v).map_err(kube::Error::SerdeError)?,
            )
            .await?;
            tracing::debug!(namespace, name, "created the copy");
        }
        Step::Update(v) => {
            api.replace(
                name,
                &PostParams::default(),
                &object(v).map_err(kube::Error::SerdeError)?,
            )
            .await?;
            tracing::debug!(namespace, name, "updated the copy");
        }
        Step::Delete => {
            let dp = DeleteParams {
                preconditions: uid.map(|u| Preconditions {
                    uid: Some(u.to_owned()),
                    resource_version: None,
                }),
                ..DeleteParams::default()
            };
            match api.delete(name, &dp).await {
                Ok(_) => tracing::debug!(namespace, name, "deleted the copy"),
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        Step::Keep | Step::Conflict | Step::NamespaceMissing => {}
    }
    Ok(())
}
