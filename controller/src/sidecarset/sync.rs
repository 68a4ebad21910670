//! The Pod writes of one SidecarSet sync: the readiness key an earlier build held during an
//! upgrade released once it is done, the in-place upgrade itself (upstream `updateSidecarImageAndHash`), and the hot-upgrade flip
//! (upstream `flipPodSidecarContainerDo`). One Pod that cannot be written does not stop the
//! others; each is reported.

use std::collections::BTreeMap;
use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{ContainerStatus, Pod, PodCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kruise_api::apps::v1beta1::SidecarSet;
use kruise_api::appspub::{InPlaceUpdateContainerStatus, InPlaceUpdateState, PodReadinessMessage};
use kruise_api::sidecarset::SidecarSetUpgradeSpec;
use kruise_api::{keys, sidecarset as wire};
use kube::api::{Patch, PatchParams};
use kube::runtime::events::EventType;
use kube::{Api, ResourceExt};
use serde_json::{Map, Value, json};

use super::context::Context;
use super::error::Error;
use super::hot;
use super::plan::{Latest, Plan};

fn pod_key(pod: &Pod) -> String {
    format!("{}/{}", pod.namespace().unwrap_or_default(), pod.name_any())
}

/// Performs the plan's Pod writes and the hot flips that are due; returns the Pods that could
/// not be acted on ("namespace/name: why"), each already reported as a Warning Event.
pub(super) async fn sync(
    ctx: &Context,
    set: &SidecarSet,
    latest: &Latest,
    pods: &[Arc<Pod>],
    plan: &Plan,
    now: Timestamp,
) -> Vec<String> {
    let mut blocked: Vec<String> = Vec::new();
    for &i in &plan.release {
        if let Err(e) = release(ctx, &pods[i], now).await {
            blocked.push(format!("{}: {e}", pod_key(&pods[i])));
        }
    }
    not_upgradable(ctx, set, pods, plan, now, &mut blocked).await;
    // Budgets that refused an upgrade this round: their other Pods wait for the next round
    // (the budget frees a slot once the upgraded Pod is available again), as upstream's
    // processor stops at a refusal; a refusal is waiting, not a failure.
    let mut spent: Vec<String> = Vec::new();
    for &i in &plan.upgrade {
        let budget = kruise_api::policy::v1alpha1::pubcontrol::related_budget_name(&pods[i]);
        if budget.is_some_and(|b| spent.iter().any(|s| s == b)) {
            continue;
        }
        let upgraded = upgrade(ctx, set, latest, &pods[i], now).await;
        if let (Err(Error::Kube(crate::runner::KubeError(kube::Error::Api(s)))), Some(b)) =
            (&upgraded, budget)
            && kruise_api::policy::v1alpha1::pubcontrol::is_charge_refusal(&s.message)
        {
            tracing::debug!(pod = %pod_key(&pods[i]), budget = b, "upgrade waits for its PodUnavailableBudget");
            spent.push(b.to_owned());
            continue;
        }
        if upgraded.is_ok()
            && let Err(e) = set_upgradable(ctx, set, &pods[i], true, now).await
        {
            blocked.push(format!("{}: {e}", pod_key(&pods[i])));
        }
        match upgraded {
            Ok(images) if !images.is_empty() => {
                let note = format!(
                    "upgrading the sidecars of Pod {} in place: {}",
                    pod_key(&pods[i]),
                    images.join(", ")
                );
                ctx.event(
                    set,
                    EventType::Normal,
                    keys::SIDECARSET_REASON_UPGRADE,
                    note,
                )
                .await;
            }
            Ok(_) => {}
            Err(e) => blocked.push(format!("{}: {e}", pod_key(&pods[i]))),
        }
    }
    flip_all(ctx, set, latest, pods, now, &mut blocked).await;
    for b in &blocked {
        tracing::warn!(pod = %b, "cannot upgrade the sidecars of a matched Pod");
        ctx.event(
            set,
            EventType::Warning,
            keys::SIDECARSET_REASON_UPGRADE_FAILED,
            format!("cannot upgrade the sidecars of Pod {b}"),
        )
        .await;
    }
    blocked
}

/// Marks the Pods the SidecarSet cannot upgrade in place (`SidecarSetUpgradable` False) and,
/// when that changed any, says so in a Normal Event with upstream's reason and note.
async fn not_upgradable(
    ctx: &Context,
    set: &SidecarSet,
    pods: &[Arc<Pod>],
    plan: &Plan,
    now: Timestamp,
    blocked: &mut Vec<String>,
) {
    let mut written = false;
    for &i in &plan.not_upgradable {
        match set_upgradable(ctx, set, &pods[i], false, now).await {
            Ok(w) => written |= w,
            Err(e) => blocked.push(format!("{}: {e}", pod_key(&pods[i]))),
        }
    }
    // Upstream notes every round; ours rounds every few seconds while Pods lag, so only a
    // round that changed a condition says it.
    if written {
        let note = format!(
            "SidecarSet in-place update detected {} not upgradable pod(s) in this round, will skip them.",
            plan.not_upgradable.len()
        );
        ctx.event(
            set,
            EventType::Normal,
            keys::SIDECARSET_REASON_NOT_UPGRADABLE_PODS,
            note,
        )
        .await;
    }
}

/// Writes this SidecarSet's mark into the Pod's `SidecarSetUpgradable` condition; returns
/// whether anything was written.
async fn set_upgradable(
    ctx: &Context,
    set: &SidecarSet,
    pod: &Pod,
    upgradable: bool,
    now: Timestamp,
) -> Result<bool, Error> {
    let Some(cond) = super::upgradable::condition(pod, &set.name_any(), upgradable, now)
        .map_err(Error::UpgradableMessage)?
    else {
        return Ok(false);
    };
    patch_condition(ctx, pod, &cond).await?;
    Ok(true)
}

/// The hot flips every matched Pod is ready for.
async fn flip_all(
    ctx: &Context,
    set: &SidecarSet,
    latest: &Latest,
    pods: &[Arc<Pod>],
    now: Timestamp,
    blocked: &mut Vec<String>,
) {
    for pod in pods {
        let flips: Vec<hot::Step> = hot::steps(set, pod)
            .into_iter()
            .filter(|s| matches!(s, hot::Step::Reset { .. }))
            .collect();
        if flips.is_empty() {
            continue;
        }
        match flip(ctx, set, latest, pod, &flips, now).await {
            Ok(()) => {
                let note = format!(
                    "hot upgrade of Pod {}: the new version serves, the old container is emptied",
                    pod_key(pod)
                );
                ctx.event(
                    set,
                    EventType::Normal,
                    keys::SIDECARSET_REASON_UPGRADE,
                    note,
                )
                .await;
            }
            Err(e) => blocked.push(format!("{}: {e}", pod_key(pod))),
        }
    }
}

/// Removes our not-ready key from the Pod's `KruisePodReady` condition (earlier builds held
/// the Pod not-ready during an upgrade; this one never adds the key).
async fn release(ctx: &Context, pod: &Pod, now: Timestamp) -> Result<(), Error> {
    let msg = PodReadinessMessage::new(
        keys::READINESS_USER_AGENT_SIDECARSET,
        keys::READINESS_KEY_SIDECAR_UPGRADE,
    );
    let Some(cond) = kruise_api::appspub::kruise_pod_ready_condition(pod, &msg, false, now)? else {
        return Ok(());
    };
    patch_condition(ctx, pod, &cond).await
}

/// Strategic-merge one condition into the Pod's status (merged by type); a Pod that is gone
/// needs nothing.
async fn patch_condition(ctx: &Context, pod: &Pod, cond: &PodCondition) -> Result<(), Error> {
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &pod.namespace().unwrap_or_default());
    let patch = json!({"status": {"conditions": [cond]}});
    match api
        .patch_status(
            &pod.name_any(),
            &PatchParams::default(),
            &Patch::Strategic(&patch),
        )
        .await
    {
        Ok(written) => {
            ctx.wrote(&written);
            Ok(())
        }
        Err(kube::Error::Api(s)) if s.is_not_found() => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// The container's image ID as the kubelet last reported it, the `lastContainerStatuses`
/// entry of the in-place state.
fn image_id(statuses: &[ContainerStatus], container: &str) -> String {
    statuses
        .iter()
        .find(|s| s.name == container)
        .map(|s| s.image_id.clone())
        .unwrap_or_default()
}

/// The cold sidecars whose image differs from the SidecarSet's: their new image, and their
/// image ID now in `last`.
fn cold_images(
    set: &SidecarSet,
    pod: &Pod,
    statuses: &[ContainerStatus],
    last: &mut Map<String, Value>,
) -> Vec<Value> {
    let mut images = Vec::new();
    for sc in &set.spec.containers {
        if sc.is_hot_upgrade() {
            continue;
        }
        let want = sc.container.image.clone().unwrap_or_default();
        let Some(have) = pod
            .spec
            .as_ref()
            .and_then(|s| s.containers.iter().find(|c| c.name == sc.container.name))
        else {
            continue;
        };
        if have.image.as_deref() == Some(want.as_str()) {
            continue;
        }
        images.push(json!({"name": sc.container.name, "image": want}));
        last.insert(
            sc.container.name.clone(),
            json!({"imageID": image_id(statuses, &sc.container.name)}),
        );
    }
    images
}

/// Hot pairs: the new image goes to the container [`hot::steps`] picks, which becomes the working
/// one (pushed to `images`, its image ID to `last`); returns the annotations that go with it in
/// the same update (working containers, versions). The Pod stays in Service.
fn hot_starts(
    set: &SidecarSet,
    pod: &Pod,
    statuses: &[ContainerStatus],
    images: &mut Vec<Value>,
    last: &mut Map<String, Value>,
) -> Result<BTreeMap<String, String>, Error> {
    let set_version = set.metadata.resource_version.clone().unwrap_or_default();
    let mut working = hot::working_containers(pod);
    let mut annotations = BTreeMap::new();
    for step in hot::steps(set, pod) {
        let hot::Step::Start {
            sidecar,
            container,
            older,
            image,
        } = step
        else {
            continue;
        };
        images.push(json!({"name": container, "image": image}));
        last.insert(
            container.clone(),
            json!({"imageID": image_id(statuses, &container)}),
        );
        annotations.extend(hot::start_versions(pod, &set_version, &container, &older));
        working.insert(sidecar, container);
    }
    if !annotations.is_empty() {
        annotations.insert(
            keys::SIDECARSET_WORKING_HOT_UPGRADE_CONTAINER_ANNOTATION.to_owned(),
            wire::format_working_containers(&working)?,
        );
    }
    Ok(annotations)
}

/// The Pod's `kruise.io/sidecarset-hash` entry for this SidecarSet after an upgrade, written
/// whole as upstream `UpdatePodSidecarSetHash` does: the latest hash, the sidecar names, and
/// the latest ControllerRevision (a Pod injected from a pinned revision now runs the current
/// spec, so the pin no longer describes it).
pub(super) fn upgraded_hash_entry(
    set: &SidecarSet,
    latest: &Latest,
    time: &Time,
) -> SidecarSetUpgradeSpec {
    let mut sidecars: Vec<String> = set
        .spec
        .init_containers
        .iter()
        .filter(|c| c.is_native_sidecar())
        .chain(&set.spec.containers)
        .map(|c| c.container.name.clone())
        .collect();
    sidecars.sort();
    sidecars.dedup();
    SidecarSetUpgradeSpec {
        update_timestamp: time.clone(),
        hash: latest.hash.clone(),
        sidecar_set_name: set.name_any(),
        sidecar_list: sidecars,
        controller_revision: latest.revision.clone(),
    }
}

/// Both hash annotations of the Pod with this SidecarSet's entry moved to `latest`.
fn hash_annotations(
    set: &SidecarSet,
    ann: &BTreeMap<String, String>,
    latest: &Latest,
    time: &Time,
    annotations: &mut BTreeMap<String, String>,
) -> Result<(), Error> {
    let set_name = set.name_any();
    let read = |key: &'static str| {
        wire::parse_hash_annotation(key, ann.get(key).map(String::as_str).unwrap_or(""))
    };
    let mut hashes = read(keys::SIDECARSET_HASH_ANNOTATION)?;
    hashes.insert(set_name.clone(), upgraded_hash_entry(set, latest, time));
    annotations.insert(
        keys::SIDECARSET_HASH_ANNOTATION.to_owned(),
        wire::format_hash_annotation(&hashes)?,
    );
    let mut without = read(keys::SIDECARSET_HASH_WITHOUT_IMAGE_ANNOTATION)?;
    if let Some(e) = without.get_mut(&set_name) {
        e.hash = latest.without_image.clone();
        e.update_timestamp = time.clone();
    }
    annotations.insert(
        keys::SIDECARSET_HASH_WITHOUT_IMAGE_ANNOTATION.to_owned(),
        wire::format_hash_annotation(&without)?,
    );
    Ok(())
}

/// The in-place state annotation with this SidecarSet's entry for the change being made: the
/// imageIDs in `last` (what each changed container ran before) merged into the entry earlier
/// changes left, as upstream `UpdatePodAnnotationsInUpgrade` merges them, so that a container
/// an earlier change is still waiting for keeps its record.
fn inplace_state_annotation(
    set_name: &str,
    ann: &BTreeMap<String, String>,
    latest: &Latest,
    time: &Time,
    last: Map<String, Value>,
) -> Result<String, Error> {
    let mut states = wire::parse_inplace_states(
        ann.get(keys::SIDECARSET_INPLACE_UPDATE_STATE_ANNOTATION)
            .map(String::as_str)
            .unwrap_or(""),
    )?;
    let serialize = |source| kruise_api::Error::Serialize {
        what: "sidecar in-place state",
        source,
    };
    let mut recorded = states
        .remove(set_name)
        .map(|s| s.last_container_statuses)
        .unwrap_or_default();
    let changed: BTreeMap<String, InPlaceUpdateContainerStatus> =
        serde_json::from_value(Value::Object(last)).map_err(serialize)?;
    recorded.extend(changed);
    let state: InPlaceUpdateState = serde_json::from_value(json!({
        "revision": latest.hash,
        "updateTimestamp": time,
        "lastContainerStatuses": recorded,
        "updateImages": true,
    }))
    .map_err(serialize)?;
    states.insert(set_name.to_owned(), state);
    Ok(wire::format_inplace_states(&states)?)
}

/// Upgrades the Pod's sidecars to the SidecarSet's images in place (upstream
/// `updateSidecarImageAndHash`). Returns the "container=image" pairs written.
async fn upgrade(
    ctx: &Context,
    set: &SidecarSet,
    latest: &Latest,
    pod: &Pod,
    now: Timestamp,
) -> Result<Vec<String>, Error> {
    let name = set.name_any();
    let ann = pod.annotations();
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.clone())
        .unwrap_or_default();
    let mut last = Map::new();
    let mut images = cold_images(set, pod, &statuses, &mut last);
    let mut annotations = hot_starts(set, pod, &statuses, &mut images, &mut last)?;
    // Upstream re-applies patchPodMetadata in the same update as the new images.
    annotations.extend(super::metadata::patched_annotations(set, ann)?);
    let time = Time(now);
    hash_annotations(set, ann, latest, &time, &mut annotations)?;
    if !images.is_empty() {
        annotations.insert(
            keys::SIDECARSET_INPLACE_UPDATE_STATE_ANNOTATION.to_owned(),
            inplace_state_annotation(&name, ann, latest, &time, last)?,
        );
    }
    // The Pod stays Ready until the kubelet restarts the sidecar, as upstream: so the
    // PodUnavailableBudget webhook sees this update make a Ready Pod unavailable, charges it,
    // and refuses it once the budget is spent. A Pod held not-ready first would be charged
    // nothing, and every Pod would upgrade at once.

    let mut patch = json!({"metadata": {"annotations": annotations}});
    if !images.is_empty() {
        patch["spec"] = json!({"containers": images});
    }
    tracing::info!(pod = %pod.name_any(), images = images.len(), "upgrading sidecars in place");
    let done: Vec<String> = images
        .iter()
        .map(|i| {
            format!(
                "{}={}",
                i["name"].as_str().unwrap_or_default(),
                i["image"].as_str().unwrap_or_default()
            )
        })
        .collect();
    Ok(if patch_pod(ctx, pod, &patch).await? {
        done
    } else {
        Vec::new()
    })
}

/// Puts the older container of each pair whose new version serves on the empty image, in one
/// patch with its version annotations (upstream `flipPodSidecarContainerDo`). The imageID each
/// emptied container runs now is recorded in the in-place state, as upstream does, so the Pod
/// counts as consistent (updatedReady) only once the kubelet has really put it on the empty
/// image; until then the SidecarSet's status does not claim an upgrade the Pod has not made.
async fn flip(
    ctx: &Context,
    set: &SidecarSet,
    latest: &Latest,
    pod: &Pod,
    resets: &[hot::Step],
    now: Timestamp,
) -> Result<(), Error> {
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.clone())
        .unwrap_or_default();
    let mut images = Vec::new();
    let mut annotations = BTreeMap::new();
    let mut last = Map::new();
    for step in resets {
        if let hot::Step::Reset {
            older,
            working,
            empty,
        } = step
        {
            images.push(json!({"name": older, "image": empty}));
            annotations.extend(hot::reset_versions(older, working));
            last.insert(
                older.clone(),
                json!({"imageID": image_id(&statuses, older)}),
            );
        }
    }
    annotations.insert(
        keys::SIDECARSET_INPLACE_UPDATE_STATE_ANNOTATION.to_owned(),
        inplace_state_annotation(&set.name_any(), pod.annotations(), latest, &Time(now), last)?,
    );
    let patch = json!({
        "metadata": {"annotations": annotations},
        "spec": {"containers": images},
    });
    tracing::info!(pod = %pod.name_any(), "hot upgrade: resetting the older sidecar containers to the empty image");
    patch_pod(ctx, pod, &patch).await?;
    Ok(())
}

/// Strategic-merge `patch` into the Pod, expecting what the API server returns. Returns
/// whether it was written: a Pod that is gone needs nothing more.
async fn patch_pod(ctx: &Context, pod: &Pod, patch: &Value) -> Result<bool, Error> {
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &pod.namespace().unwrap_or_default());
    match api
        .patch(
            &pod.name_any(),
            &PatchParams::default(),
            &Patch::Strategic(patch),
        )
        .await
    {
        Ok(written) => {
            ctx.wrote(&written);
            Ok(true)
        }
        Err(kube::Error::Api(s)) if s.is_not_found() => Ok(false),
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set() -> SidecarSet {
        serde_json::from_value(json!({
            "apiVersion": "apps.kruise.io/v1beta1", "kind": "SidecarSet",
            "metadata": {"name": "mesh"},
            "spec": {"selector": {"matchLabels": {"app": "web"}},
                "containers": [{"name": "proxy", "image": "e:2"}]}}))
        .expect("set")
    }

    #[test]
    fn an_upgrade_records_the_latest_revision_over_the_pinned_one() {
        let injected = |rev: &str, hash: &str| {
            json!({"updateTimestamp": "2026-01-01T00:00:00Z", "hash": hash,
                "sidecarSetName": "mesh", "sidecarList": ["proxy"], "controllerRevision": rev})
        };
        let pod_ann = BTreeMap::from([
            (
                keys::SIDECARSET_HASH_ANNOTATION.to_owned(),
                json!({"mesh": injected("mesh-1", "old"), "other": injected("other-7", "o")})
                    .to_string(),
            ),
            (
                keys::SIDECARSET_HASH_WITHOUT_IMAGE_ANNOTATION.to_owned(),
                json!({"mesh": injected("mesh-1", "w")}).to_string(),
            ),
        ]);
        let latest = Latest {
            hash: "new".into(),
            without_image: "w".into(),
            revision: "mesh-2".into(),
        };
        let time = Time(Timestamp::from_second(1_800_000_000).expect("ts"));
        let mut out = BTreeMap::new();
        hash_annotations(&set(), &pod_ann, &latest, &time, &mut out).expect("annotations");
        let hashes = wire::parse_hash_annotation(
            keys::SIDECARSET_HASH_ANNOTATION,
            &out[keys::SIDECARSET_HASH_ANNOTATION],
        )
        .expect("parses");
        assert_eq!(hashes["mesh"].controller_revision, "mesh-2");
        assert_eq!(hashes["mesh"].hash, "new");
        assert_eq!(hashes["mesh"].sidecar_list, ["proxy"]);
        assert_eq!(hashes["mesh"].update_timestamp, time);
        // Another SidecarSet's entry is not ours to move.
        assert_eq!(hashes["other"].controller_revision, "other-7");
        assert_eq!(hashes["other"].hash, "o");
    }

    #[test]
    fn a_change_adds_its_containers_to_the_recorded_ones() {
        // A hot upgrade started proxy-2 (recorded as running the empty image); its reset now
        // empties proxy-1, which ran v1: both stay recorded, and another set's entry stays.
        let ann = BTreeMap::from([(
            keys::SIDECARSET_INPLACE_UPDATE_STATE_ANNOTATION.to_owned(),
            json!({"mesh": {"revision": "h1", "updateTimestamp": "2026-01-01T00:00:00Z",
                    "lastContainerStatuses": {"proxy-2": {"imageID": "id-empty"}}},
                "other": {"revision": "o", "updateTimestamp": "2026-01-01T00:00:00Z",
                    "lastContainerStatuses": {"x": {"imageID": "id-x"}}}})
            .to_string(),
        )]);
        let latest = Latest {
            hash: "h2".into(),
            without_image: "w".into(),
            revision: "mesh-2".into(),
        };
        let time = Time(Timestamp::from_second(1_800_000_000).expect("ts"));
        let mut last = Map::new();
        last.insert("proxy-1".into(), json!({"imageID": "id-v1"}));
        let out = inplace_state_annotation("mesh", &ann, &latest, &time, last).expect("state");
        let states = wire::parse_inplace_states(&out).expect("parses");
        let ids = |set: &str| {
            states[set]
                .last_container_statuses
                .iter()
                .map(|(c, s)| (c.clone(), s.image_id.clone()))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            ids("mesh"),
            [
                ("proxy-1".to_owned(), "id-v1".to_owned()),
                ("proxy-2".to_owned(), "id-empty".to_owned())
            ]
        );
        assert_eq!(states["mesh"].revision, "h2");
        assert_eq!(ids("other"), [("x".to_owned(), "id-x".to_owned())]);
    }
}
