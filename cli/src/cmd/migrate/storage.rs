//! `migrate storage`: the Kubernetes storage-version migration for Kruise's CRDs. When a CRD's
//! storage version changes (Kruise-rs builds before the release's storage versions stored
//! CloneSet and six other kinds as v1beta1; OpenKruise v1.9.0 stores them as v1alpha1), the
//! objects already in etcd stay in the old version and the CRD keeps it in
//! `status.storedVersions`, so no CRD without that version can be applied. Every object is read
//! and written back unchanged, which the API server stores at the current storage version; then
//! `storedVersions` is trimmed to that version through the CRD's status subresource.
//!
//! A CLI command rather than a step of the manager's start: it needs the conversion webhook the
//! manager serves to read the old objects, it writes every object of a kind (an operator's
//! decision, with `--dry-run` first), and the manager then needs no right to write CRD status.
//! Idempotent: a CRD whose `storedVersions` is only its storage version is left alone. Resumable:
//! interrupted, a rerun rewrites that CRD's objects again (a write of an object already at the
//! storage version is harmless) and trims only once all are written.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams,
    TypeMeta,
};
use kube::{Client, ResourceExt};
use serde_json::json;

use crate::cli::MigrateArgs;
use crate::ctx::Ctx;
use crate::error::{CliError, Result, exit};
use kruise_api::keys;

/// Objects listed per request.
const PAGE: u32 = 500;

pub async fn run(ctx: &Ctx, args: &MigrateArgs) -> Result<i32> {
    let crds: Api<CustomResourceDefinition> = Api::all(ctx.client.clone());
    let mut ours: Vec<CustomResourceDefinition> = crds
        .list(&ListParams::default())
        .await
        .map_err(|e| CliError::from_kube(e, None))?
        .items
        .into_iter()
        .filter(|c| [keys::APPS_GROUP, keys::POLICY_GROUP].contains(&c.spec.group.as_str()))
        .collect();
    if ours.is_empty() {
        return Err(CliError::Missing(format!(
            "no CRD of {} or {} on this cluster: nothing to migrate",
            keys::APPS_GROUP,
            keys::POLICY_GROUP
        )));
    }
    ours.sort_by_key(|c| c.name_any());
    let (mut migrated, mut objects) = (0, 0);
    for crd in &ours {
        let name = crd.name_any();
        let Some(storage) = crd.spec.versions.iter().find(|v| v.storage) else {
            println!("{name}: no storage version, skipped");
            continue;
        };
        let storage = storage.name.as_str();
        let stored = crd
            .status
            .as_ref()
            .and_then(|s| s.stored_versions.clone())
            .unwrap_or_default();
        if stored.iter().all(|v| v == storage) {
            println!("{name}: stored as {storage} only, nothing to migrate");
            continue;
        }
        println!(
            "{name}: stored versions [{}], storage version {storage}: {} every object",
            stored.join(", "),
            if args.dry_run {
                "would rewrite"
            } else {
                "rewriting"
            }
        );
        let n = rewrite_all(&ctx.client, crd, storage, args.dry_run).await?;
        objects += n;
        if args.dry_run {
            println!("{name}: would rewrite {n} objects, then set storedVersions to [{storage}]");
            continue;
        }
        trim(&crds, &name, storage).await?;
        migrated += 1;
        println!("{name}: {n} objects rewritten; storedVersions now [{storage}]");
    }
    if args.dry_run {
        println!("dry run: {objects} objects would be rewritten; nothing changed");
    } else {
        println!("{migrated} CRDs migrated, {objects} objects rewritten");
    }
    Ok(exit::OK)
}

/// Writes every object of `crd` back unchanged at `storage`, saying so object by object; the
/// number of objects.
async fn rewrite_all(
    client: &Client,
    crd: &CustomResourceDefinition,
    storage: &str,
    dry_run: bool,
) -> Result<usize> {
    let gvk = GroupVersionKind::gvk(&crd.spec.group, storage, &crd.spec.names.kind);
    let ar = ApiResource::from_gvk_with_plural(&gvk, &crd.spec.names.plural);
    let all: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    let mut params = ListParams::default().limit(PAGE);
    let mut n = 0;
    loop {
        let page = all
            .list(&params)
            .await
            .map_err(|e| CliError::from_kube(e, None))?;
        for mut obj in page.items {
            let ns = obj.namespace();
            let name = obj.name_any();
            let label = match &ns {
                Some(ns) => format!("  {}/{ns}/{name}", crd.spec.names.kind),
                None => format!("  {}/{name}", crd.spec.names.kind),
            };
            n += 1;
            if dry_run {
                println!("{label}");
                continue;
            }
            let api: Api<DynamicObject> = match &ns {
                Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
                None => Api::all_with(client.clone(), &ar),
            };
            // List items may come without their type; a write needs it.
            obj.types = Some(TypeMeta {
                api_version: ar.api_version.clone(),
                kind: ar.kind.clone(),
            });
            match api.replace(&name, &PostParams::default(), &obj).await {
                Ok(_) => println!("{label}: rewritten at {storage}"),
                // Written by someone else since it was listed: stored at the storage version.
                Err(kube::Error::Api(e)) if e.code == 409 => {
                    println!("{label}: changed since listed, so already rewritten")
                }
                Err(kube::Error::Api(e)) if e.code == 404 => println!("{label}: gone"),
                Err(e) => {
                    return Err(CliError::Failed(format!(
                        "{label}: cannot be rewritten ({}); fix that and rerun: the objects \
                         already written stay written",
                        CliError::from_kube(e, None)
                    )));
                }
            }
        }
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => return Ok(n),
        }
    }
}

/// Sets `storedVersions` of the CRD `name` to `[storage]`, unless its storage version changed
/// meanwhile (then the objects may not all be at it: refused).
async fn trim(crds: &Api<CustomResourceDefinition>, name: &str, storage: &str) -> Result<()> {
    let live = crds
        .get(name)
        .await
        .map_err(|e| CliError::from_kube(e, None))?;
    let now = live.spec.versions.iter().find(|v| v.storage);
    if now.map(|v| v.name.as_str()) != Some(storage) {
        return Err(CliError::Failed(format!(
            "{name}: its storage version changed while the objects were rewritten; rerun"
        )));
    }
    // The resourceVersion makes the write conditional on the CRD read just above.
    let patch = json!({
        "metadata": {"resourceVersion": live.resource_version()},
        "status": {"storedVersions": [storage]},
    });
    crds.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|e| CliError::from_kube(e, None))?;
    Ok(())
}
