//! `kubectl kruise install` and `uninstall`: the manifests of `deploy/`, embedded at build time,
//! applied server side (or printed), and removed in the order that never leaves the cluster
//! refusing Pods.

use std::time::{Duration, Instant};

use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::Pod;
use kruise_api::keys;
use kube::Api;
use kube::api::DynamicObject;
use serde_json::Value;

use crate::cli::{InstallArgs, UninstallArgs};
use crate::ctx::Ctx;
use crate::dev::{self, Images, cluster};
use crate::error::{CliError, Result, exit, kube_err};

/// Applies (or prints) the manifests.
#[tracing::instrument(skip_all)]
pub async fn install(ctx: &Ctx, args: &InstallArgs) -> Result<i32> {
    let objects = objects(args)?;
    if args.output.is_some() {
        let yaml = dev::to_yaml(&objects).map_err(|e| CliError::Failed(e.to_string()))?;
        dev::print_out(&yaml).map_err(|e| CliError::Failed(format!("writing stdout: {e}")))?;
        return Ok(exit::OK);
    }
    let dry = if args.dry_run {
        " (server dry run)"
    } else {
        ""
    };
    // CRDs first and Established before anything uses them; the rest in kustomization order
    // (namespaces, RBAC, then the workloads).
    let (crds, rest): (Vec<&Value>, Vec<&Value>) = objects
        .iter()
        .partition(|o| dev::kind(o) == "CustomResourceDefinition");
    for o in rest.iter().filter(|o| dev::kind(o) == "Namespace") {
        cluster::apply(&ctx.client, o, args.dry_run).await?;
    }
    for o in &crds {
        cluster::apply(&ctx.client, o, args.dry_run).await?;
    }
    if !args.dry_run {
        cluster::wait_established(&ctx.client, &crds, Duration::from_secs(60)).await?;
    }
    for o in rest.iter().filter(|o| dev::kind(o) != "Namespace") {
        cluster::apply(&ctx.client, o, args.dry_run).await?;
    }
    println!("applied {} objects{dry}", objects.len());
    if args.wait && !args.dry_run {
        wait_ready(ctx, args.timeout).await?;
        println!("Kruise-rs is ready");
    }
    Ok(exit::OK)
}

fn objects(args: &InstallArgs) -> Result<Vec<Value>> {
    let images = Images {
        repo: args.image_repo.clone(),
        version: args.version.clone(),
    };
    dev::objects(&images).map_err(|e| CliError::Usage(e.to_string()))
}

/// Waits until the manager Deployment and the daemon DaemonSet are rolled out and ready.
async fn wait_ready(ctx: &Ctx, timeout: Duration) -> Result<()> {
    let start = Instant::now();
    let deploys: Api<Deployment> = Api::namespaced(ctx.client.clone(), keys::KRUISE_NAMESPACE);
    let daemons: Api<DaemonSet> = Api::namespaced(ctx.client.clone(), keys::KRUISE_NAMESPACE);
    loop {
        let d = deploys
            .get_opt(dev::MANAGER_DEPLOYMENT)
            .await
            .map_err(kube_err)?;
        let manager_ready = d.as_ref().is_some_and(deployment_ready);
        let ds = daemons
            .get_opt(dev::DAEMON_DAEMONSET)
            .await
            .map_err(kube_err)?;
        let daemon_ready = ds.as_ref().is_some_and(daemonset_ready);
        if manager_ready && daemon_ready {
            return Ok(());
        }
        if start.elapsed() > timeout {
            let (kind, name) = if manager_ready {
                ("daemonset", dev::DAEMON_DAEMONSET)
            } else {
                ("deployment", dev::MANAGER_DEPLOYMENT)
            };
            return Err(CliError::Timeout(format!(
                "{kind} {}/{name} is not ready after {}s (kubectl -n {} describe {kind} {name}; are the images pullable?)",
                keys::KRUISE_NAMESPACE,
                timeout.as_secs(),
                keys::KRUISE_NAMESPACE,
            )));
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Every replica updated, ready and the newest generation observed.
pub fn deployment_ready(d: &Deployment) -> bool {
    let want = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    let Some(s) = &d.status else { return false };
    s.observed_generation >= d.metadata.generation
        && s.updated_replicas.unwrap_or(0) >= want
        && s.ready_replicas.unwrap_or(0) >= want
        && s.replicas.unwrap_or(0) == want
}

/// Every scheduled daemon Pod updated and ready.
pub fn daemonset_ready(d: &DaemonSet) -> bool {
    let Some(s) = &d.status else { return false };
    s.observed_generation >= d.metadata.generation
        && s.desired_number_scheduled > 0
        && s.updated_number_scheduled.unwrap_or(0) >= s.desired_number_scheduled
        && s.number_ready >= s.desired_number_scheduled
}

/// Kinds whose objects Kruise-rs makes itself (one per node), never a user: they go with
/// Kruise-rs and do not hold an uninstall back.
const MANAGED_KINDS: &[&str] = &["nodeimages", "nodepodprobes"];

/// A Kruise object a user made, as `uninstall` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct UserObject {
    kind: String,
    namespace: String,
    name: String,
    /// Pods it owns directly.
    pods: usize,
}

/// Removes what `install` creates, keeping what users made.
///
/// While Kruise objects made by users exist (any object of a Kruise kind, except those Kruise-rs
/// makes per node and those another object controls), it deletes nothing and lists them, unless
/// `--keep-crds` (remove Kruise-rs, keep the CRDs and every object and Pod) or
/// `--delete-user-objects` (delete them, and so their Pods) says what to do with them.
///
/// Order: the webhook configurations first (so no request waits on a webhook that is going
/// away), then the Kruise objects while the manager can still finalize them, the workloads,
/// RBAC, CRDs and last the namespaces.
#[tracing::instrument(skip_all)]
pub async fn uninstall(ctx: &Ctx, args: &UninstallArgs) -> Result<i32> {
    let objects = dev::objects(&Images::default()).map_err(|e| CliError::Failed(e.to_string()))?;
    let crds = dev::crds(&objects);
    if !args.delete_user_objects {
        let users = user_objects(ctx, &crds).await?;
        if !users.is_empty() && !args.keep_crds {
            eprint!("{}", refusal(&users));
            return Ok(exit::FAILED);
        }
        if !users.is_empty() {
            println!(
                "keeping the CRDs and {} Kruise objects users made (--keep-crds)",
                users.len()
            );
        }
    }
    let n = cluster::delete_webhook_configurations(&ctx.client).await?;
    println!("deleted {n} webhook configurations");
    if delete_pod_webhook_policy(ctx).await? {
        println!("deleted the Pod webhook's admission policy");
    }
    if !args.keep_crds {
        for crd in &crds {
            delete_all_of(ctx, crd, args.timeout).await?;
        }
    }
    // Reverse kustomization order: workloads before their RBAC, namespaces last.
    let order = |o: &&Value| match dev::kind(o) {
        "Deployment" | "DaemonSet" | "Service" => 0,
        "CustomResourceDefinition" => 2,
        "Namespace" => 3,
        _ => 1,
    };
    let mut ordered: Vec<&Value> = objects
        .iter()
        .filter(|o| !(args.keep_crds && dev::kind(o) == "CustomResourceDefinition"))
        .collect();
    ordered.sort_by_key(order);
    let mut deleted = Vec::new();
    for o in ordered {
        if cluster::delete(&ctx.client, o).await? {
            println!("deleted {} {}", dev::kind(o), dev::name(o));
            deleted.push(o);
        }
    }
    if args.wait {
        for o in deleted {
            cluster::wait_gone(&ctx.client, o, args.timeout).await?;
        }
    }
    // The manager's own objects that deploy/ does not list (Lease, certificate Secret) go
    // with the namespace.
    println!("Kruise-rs uninstalled");
    Ok(exit::OK)
}

/// Deletes the admission policy (and binding) the manager creates at run time beside its
/// webhook configurations (docs/safety.md); whether there was one.
async fn delete_pod_webhook_policy(ctx: &Ctx) -> Result<bool> {
    let dp = kube::api::DeleteParams::default();
    fn gone<T>(r: std::result::Result<T, kube::Error>) -> Result<bool> {
        match r {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(false),
            Err(e) => Err(kube_err(e)),
        }
    }
    gone(
        Api::<ValidatingAdmissionPolicyBinding>::all(ctx.client.clone())
            .delete(keys::POD_WEBHOOK_POLICY_NAME, &dp)
            .await,
    )?;
    gone(
        Api::<ValidatingAdmissionPolicy>::all(ctx.client.clone())
            .delete(keys::POD_WEBHOOK_POLICY_NAME, &dp)
            .await,
    )
}

/// What `uninstall` prints when it refuses.
fn refusal(users: &[UserObject]) -> String {
    let mut out = format!(
        "refusing to uninstall: {} Kruise objects made by users exist, and uninstalling would delete them and their Pods:\n",
        users.len()
    );
    let width = |f: fn(&UserObject) -> usize, title: &str| {
        users.iter().map(f).max().unwrap_or(0).max(title.len())
    };
    let (wk, wn, wm) = (
        width(|u| u.kind.len(), "KIND"),
        width(|u| u.namespace.len(), "NAMESPACE"),
        width(|u| u.name.len(), "NAME"),
    );
    out.push_str(&format!(
        "{:wk$}  {:wn$}  {:wm$}  PODS\n",
        "KIND", "NAMESPACE", "NAME"
    ));
    for u in users {
        out.push_str(&format!(
            "{:wk$}  {:wn$}  {:wm$}  {}\n",
            u.kind, u.namespace, u.name, u.pods
        ));
    }
    out.push_str(
        "Nothing was deleted. Run again with --keep-crds to remove Kruise-rs and keep these objects, \
         their Pods and the CRDs, or with --delete-user-objects to delete them and their Pods.\n",
    );
    out
}

/// Every object of a Kruise kind that a user made: not one Kruise-rs makes per node, and not one
/// another object controls (it goes with its owner).
async fn user_objects(ctx: &Ctx, crds: &[&Value]) -> Result<Vec<UserObject>> {
    let mut found = Vec::new();
    for crd in crds {
        let group = crd["spec"]["group"].as_str().unwrap_or_default();
        let plural = crd["spec"]["names"]["plural"].as_str().unwrap_or_default();
        let kind = crd["spec"]["names"]["kind"].as_str().unwrap_or_default();
        if MANAGED_KINDS.contains(&plural) {
            continue;
        }
        let Ok((ar, _)) = ctx.resolve(group, plural).await else {
            continue;
        };
        let api: Api<DynamicObject> = Api::all_with(ctx.client.clone(), &ar);
        let list = match api.list(&Default::default()).await {
            Ok(l) => l,
            Err(kube::Error::Api(s)) if s.code == 404 => continue,
            Err(e) => return Err(kube_err(e)),
        };
        for o in list.items {
            let controlled = o
                .metadata
                .owner_references
                .iter()
                .flatten()
                .any(|r| r.controller == Some(true));
            if controlled {
                continue;
            }
            found.push(UserObject {
                kind: kind.to_owned(),
                namespace: o.metadata.namespace.clone().unwrap_or_default(),
                name: o.metadata.name.clone().unwrap_or_default(),
                pods: owned_pods(ctx, &o).await?,
            });
        }
    }
    Ok(found)
}

/// How many Pods name `o` as an owner.
async fn owned_pods(ctx: &Ctx, o: &DynamicObject) -> Result<usize> {
    let (Some(ns), Some(uid)) = (&o.metadata.namespace, &o.metadata.uid) else {
        return Ok(0);
    };
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), ns);
    let list = pods.list(&Default::default()).await.map_err(kube_err)?;
    Ok(list
        .items
        .iter()
        .filter(|p| {
            p.metadata
                .owner_references
                .iter()
                .flatten()
                .any(|r| &r.uid == uid)
        })
        .count())
}

/// Deletes every object of a CRD's kind in all namespaces and waits for them to be gone.
async fn delete_all_of(ctx: &Ctx, crd: &Value, timeout: Duration) -> Result<()> {
    let group = crd["spec"]["group"].as_str().unwrap_or_default();
    let plural = crd["spec"]["names"]["plural"].as_str().unwrap_or_default();
    let (ar, _) = match ctx.resolve(group, plural).await {
        Ok(r) => r,
        // Not served: nothing to delete.
        Err(_) => return Ok(()),
    };
    let api: Api<kube::api::DynamicObject> = Api::all_with(ctx.client.clone(), &ar);
    let list = api.list(&Default::default()).await.map_err(kube_err)?;
    if list.items.is_empty() {
        return Ok(());
    }
    for item in &list.items {
        let ns = item.metadata.namespace.clone().unwrap_or_default();
        let name = item.metadata.name.clone().unwrap_or_default();
        let one: Api<kube::api::DynamicObject> = if ns.is_empty() {
            Api::all_with(ctx.client.clone(), &ar)
        } else {
            Api::namespaced_with(ctx.client.clone(), &ns, &ar)
        };
        match one.delete(&name, &Default::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(kube_err(e)),
        }
    }
    let start = Instant::now();
    while !api
        .list(&Default::default())
        .await
        .map_err(kube_err)?
        .items
        .is_empty()
    {
        if start.elapsed() > timeout {
            return Err(CliError::Timeout(format!(
                "{plural}.{group} objects remain after {}s (kubectl get {plural}.{group} -A)",
                timeout.as_secs()
            )));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    println!("deleted {} {plural}.{group}", list.items.len());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_refusal_lists_each_object_and_says_what_to_run() {
        let text = refusal(&[UserObject {
            kind: "CloneSet".into(),
            namespace: "user1".into(),
            name: "keepme".into(),
            pods: 2,
        }]);
        assert!(text.contains("KIND      NAMESPACE  NAME    PODS"), "{text}");
        assert!(text.contains("CloneSet  user1      keepme  2"), "{text}");
        assert!(text.contains("--keep-crds") && text.contains("--delete-user-objects"));
        assert!(text.contains("Nothing was deleted"));
    }

    #[test]
    fn a_daemonset_with_an_unready_pod_is_not_ready() {
        let ds: DaemonSet = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "kruise-daemon", "generation": 1},
            "spec": {"selector": {}, "template": {}},
            "status": {"observedGeneration": 1, "desiredNumberScheduled": 2,
                       "currentNumberScheduled": 2, "numberMisscheduled": 0,
                       "updatedNumberScheduled": 2, "numberReady": 1}
        }))
        .expect("daemonset");
        assert!(!daemonset_ready(&ds));
    }

    #[test]
    fn a_deployment_still_rolling_is_not_ready() {
        let d: Deployment = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "m", "generation": 2},
            "spec": {"replicas": 2, "selector": {}, "template": {}},
            "status": {"observedGeneration": 2, "replicas": 3, "updatedReplicas": 2, "readyReplicas": 2}
        }))
        .expect("deployment");
        assert!(!deployment_ready(&d));
    }
}
