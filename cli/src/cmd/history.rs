//! `rollout history` and `rollout undo` over ControllerRevisions (CloneSet) or ReplicaSets
//! (Deployment).

use crate::cli::Output;
use crate::cmd::status::print_doc;
use crate::ctx::{Ctx, Workload};
use crate::error::{CliError, Result, exit, kube_err};
use crate::target::Target;
use crate::view::workload::History;
use crate::view::{RolloutView, get};
use k8s_openapi::api::apps::v1::{ControllerRevision, ReplicaSet};
use kruise_api::keys::{self, k8s};
use kube::api::{Api, ListParams};
use serde::Serialize;
use serde_json::{Value, json};

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Revision {
    pub revision: i64,
    pub name: String,
    pub images: Vec<String>,
    pub change_cause: String,
    pub current: bool,
    pub update: bool,
    #[serde(skip)]
    pub template: Value,
}

fn images_of(template: &Value) -> Vec<String> {
    get(template, &["spec", "containers"])
        .and_then(Value::as_array)
        .map(|cs| {
            cs.iter()
                .map(|c| {
                    format!(
                        "{}={}",
                        c["name"].as_str().unwrap_or("?"),
                        c["image"].as_str().unwrap_or("?")
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Whether one of `refs` names the owner `uid`.
pub(crate) fn owned_by(
    refs: Option<&Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference>>,
    uid: &str,
) -> bool {
    refs.is_some_and(|r| r.iter().any(|o| o.uid == uid))
}

pub(crate) async fn revisions(
    ctx: &Ctx,
    wl: &Workload,
    view: &RolloutView,
) -> Result<Vec<Revision>> {
    let lp = ListParams::default().labels(view.list_selector()?);
    let mut out = Vec::new();
    match view.kind.spec().history {
        History::Unsupported => {
            return Err(CliError::Usage(format!(
                "{}: a {} keeps no revisions this plugin can list or roll back to",
                wl.target, view.kind
            )));
        }
        History::ControllerRevisions => {
            let api: Api<ControllerRevision> = Api::namespaced(ctx.client.clone(), &wl.namespace);
            for cr in api.list(&lp).await.map_err(kube_err)?.items {
                if !owned_by(cr.metadata.owner_references.as_ref(), &view.uid) {
                    continue;
                }
                let name = cr.metadata.name.clone().unwrap_or_default();
                // The revision stores `{"spec":{"template":{..., "$patch":"replace"}}}`.
                let mut template = cr
                    .data
                    .as_ref()
                    .and_then(|d| get(&d.0, &["spec", "template"]).cloned())
                    .unwrap_or(Value::Null);
                if let Some(obj) = template.as_object_mut() {
                    obj.remove("$patch");
                }
                out.push(Revision {
                    revision: cr.revision,
                    images: images_of(&template),
                    change_cause: cr
                        .metadata
                        .annotations
                        .as_ref()
                        .and_then(|a| a.get(k8s::CHANGE_CAUSE_ANNOTATION).cloned())
                        .unwrap_or_default(),
                    current: is_revision(&name, &view.current_revision),
                    update: is_revision(&name, &view.update_revision),
                    name,
                    template,
                });
            }
        }
        History::ReplicaSets => {
            let api: Api<ReplicaSet> = Api::namespaced(ctx.client.clone(), &wl.namespace);
            for rs in api.list(&lp).await.map_err(kube_err)?.items {
                if !owned_by(rs.metadata.owner_references.as_ref(), &view.uid) {
                    continue;
                }
                let ann = rs.metadata.annotations.clone().unwrap_or_default();
                let revision = ann
                    .get(k8s::DEPLOYMENT_REVISION_ANNOTATION)
                    .and_then(|r| r.parse().ok())
                    .unwrap_or(0);
                let mut template = rs
                    .spec
                    .as_ref()
                    .and_then(|s| serde_json::to_value(&s.template).ok())
                    .unwrap_or(Value::Null);
                // The ReplicaSet's hash label must not travel back into the Deployment template.
                if let Some(labels) = template
                    .pointer_mut("/metadata/labels")
                    .and_then(Value::as_object_mut)
                {
                    labels.remove(keys::POD_TEMPLATE_HASH_LABEL);
                }
                let rev_str = revision.to_string();
                out.push(Revision {
                    revision,
                    name: rs.metadata.name.clone().unwrap_or_default(),
                    images: images_of(&template),
                    change_cause: ann
                        .get(k8s::CHANGE_CAUSE_ANNOTATION)
                        .cloned()
                        .unwrap_or_default(),
                    current: rev_str == view.current_revision,
                    update: rev_str == view.update_revision,
                    template,
                });
            }
        }
    }
    out.sort_by_key(|r| r.revision);
    // DaemonSets report no update revision: the newest one is what the controller rolls to.
    if view.update_revision.is_empty()
        && let Some(last) = out.last_mut()
    {
        last.update = true;
    }
    Ok(out)
}

/// Whether the ControllerRevision `name` is `revision`: its full name (CloneSet,
/// StatefulSets) or the hash it ends in (an Advanced DaemonSet's `daemonSetHash`).
fn is_revision(name: &str, revision: &str) -> bool {
    !revision.is_empty()
        && (name == revision
            || name
                .strip_suffix(revision)
                .is_some_and(|rest| rest.ends_with('-')))
}

pub async fn history(
    ctx: &Ctx,
    target: &Target,
    revision: Option<i64>,
    output: Output,
) -> Result<i32> {
    let wl = Workload::locate(ctx, target).await?;
    let view = wl.view().await?;
    let revs = revisions(ctx, &wl, &view).await?;
    if let Some(n) = revision {
        let rev = revs
            .iter()
            .find(|r| r.revision == n)
            .ok_or_else(|| CliError::Usage(format!("{target} has no revision {n}")))?;
        match output {
            Output::Text => print_doc(Output::Yaml, &rev.template),
            other => print_doc(other, &rev.template),
        }
        return Ok(exit::OK);
    }
    if output != Output::Text {
        print_doc(output, &revs);
        return Ok(exit::OK);
    }
    println!("{target}");
    // The images column is as wide as its longest entry, so CHANGE-CAUSE stays aligned.
    let width = revs
        .iter()
        .map(|r| r.images.join(",").chars().count())
        .max()
        .unwrap_or(0)
        .max("IMAGES".len());
    println!(
        "{:<9} {:<8} {:<width$} CHANGE-CAUSE",
        "REVISION", "STATE", "IMAGES"
    );
    for r in &revs {
        // "update" marks the revision still rolling out; pods not yet updated run "current".
        let state = match (r.current, r.update) {
            (true, _) => "current",
            (false, true) => "update",
            _ => "",
        };
        let cause = if r.change_cause.is_empty() {
            "<none>"
        } else {
            &r.change_cause
        };
        println!(
            "{:<9} {:<8} {:<width$} {cause}",
            r.revision,
            state,
            r.images.join(",")
        );
    }
    Ok(exit::OK)
}

/// Picks the revision to go back to: the given one, or the newest one older than the revision
/// the workload is updating to.
pub fn pick_revision(revs: &[Revision], to: Option<i64>) -> std::result::Result<&Revision, String> {
    match to {
        Some(n) => revs
            .iter()
            .find(|r| r.revision == n)
            .ok_or_else(|| format!("no revision {n}")),
        None => {
            let update = revs
                .iter()
                .find(|r| r.update)
                .map(|r| r.revision)
                .or(revs.last().map(|r| r.revision));
            revs.iter()
                .rev()
                .find(|r| Some(r.revision) < update)
                .ok_or_else(|| "no previous revision to roll back to".to_string())
        }
    }
}

pub async fn undo(ctx: &Ctx, target: &Target, to: Option<i64>, dry_run: bool) -> Result<i32> {
    let wl = Workload::locate(ctx, target).await?;
    let view = wl.view().await?;
    let revs = revisions(ctx, &wl, &view).await?;
    let rev = pick_revision(&revs, to).map_err(|e| CliError::Usage(format!("{target}: {e}")))?;
    if rev.update {
        println!("{target} already at revision {} (skipped)", rev.revision);
        return Ok(exit::OK);
    }
    println!(
        "{target}: rolling back to revision {} ({})",
        rev.revision,
        rev.images.join(",")
    );
    if dry_run {
        println!("(dry run: nothing changed)");
        return Ok(exit::OK);
    }
    // A JSON patch replaces the whole template; a merge patch would keep fields the old
    // revision did not have.
    wl.json_patch(json!([{"op": "replace", "path": "/spec/template", "value": rev.template}]))
        .await?;
    if view.paused {
        println!(
            "{target} is paused: run `kubectl kruise rollout resume {target}` to apply the rollback"
        );
    }
    Ok(exit::OK)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rev(n: i64, update: bool) -> Revision {
        Revision {
            revision: n,
            name: format!("web-{n}"),
            images: vec![],
            change_cause: String::new(),
            current: false,
            update,
            template: Value::Null,
        }
    }

    #[test]
    fn revision_names() {
        assert!(is_revision("web-6d4b9c", "web-6d4b9c"));
        assert!(is_revision("agent-6d4b9c", "6d4b9c"));
        assert!(!is_revision("agent-16d4b9c", "6d4b9c"));
        assert!(!is_revision("web-1", ""));
    }

    #[test]
    fn undo_picks_previous() {
        let revs = vec![rev(1, false), rev(2, false), rev(3, true)];
        assert_eq!(pick_revision(&revs, None).map(|r| r.revision), Ok(2));
        assert_eq!(pick_revision(&revs, Some(1)).map(|r| r.revision), Ok(1));
        assert!(pick_revision(&revs, Some(9)).is_err());
        assert!(pick_revision(&[rev(1, true)], None).is_err());
        // After an undo to 1 the update revision is 1 again... and "previous" is older than it.
        let back = vec![rev(1, true), rev(2, false), rev(3, false)];
        assert!(pick_revision(&back, None).is_err());
    }
}
