//! The campaign's workloads: what it creates, how a round rolls each out, when a round's
//! rollout is complete, and which owners the invariants hold each to.

use k8s_openapi::api::core::v1::Pod;
use kruise_api::keys;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, PostParams};
use kube::{Api, Client, ResourceExt};
use serde_json::{Value, json};

use super::history::History;
use super::invariants::{Budget, Expect, SpreadCap};
use crate::{advancedcronjob, broadcastjob, cloneset, daemonset, ephemeraljob, image, statefulset};

type Res<T> = std::result::Result<T, String>;

/// Replicas of the in-place CloneSet and Advanced StatefulSet.
const REPLICAS: i64 = 3;
/// The recreated CloneSet under the budget and the spread.
const GUARDED: &str = "guarded";
const GUARDED_REPLICAS: i64 = 4;
const GUARDED_BUDGET: i64 = 1;
const SPREAD_CAP: i64 = 2;
/// The WorkloadSpread over it (Pods carry `<name>/<subset>` in their annotation).
const SPREAD: &str = "spread";
/// Standalone Pods the per-round requests act on (a CRR restarts one, an EphemeralJob adds
/// a container to the other).
const CRR_TARGET: &str = "crr-target";
const EJ_TARGET: &str = "ej-target";
/// The UnitedDeployment's replicas, over two subsets on this node.
const UD_REPLICAS: i64 = 2;

/// The workloads, in the table's column order, with the `Kind/name` prefix of the Pods'
/// (or runs') owner each covers.
pub const WORKLOADS: &[(&str, &str)] = &[
    ("CloneSet", "CloneSet/cs"),
    ("AdvStatefulSet", "StatefulSet/sts"),
    ("AdvDaemonSet", "DaemonSet/ds"),
    ("CloneSet+PUB+WS", "CloneSet/guarded"),
    ("SidecarSet", "SidecarSet/"),
    ("UnitedDeployment", "CloneSet/ud-"),
    ("BroadcastJob", "BroadcastJob/"),
    ("AdvancedCronJob", "AdvancedCronJob/"),
    ("EphemeralJob", "EphemeralJob/"),
    ("CRR", "ContainerRecreateRequest/"),
    ("ImagePullJob", "ImagePullJob/"),
];

/// The column a violation's subject (an owner, `Kind/name`) falls in.
pub fn column_of(subject: &str) -> Option<&'static str> {
    WORKLOADS
        .iter()
        .find(|(_, prefix)| subject.starts_with(prefix))
        .map(|(name, _)| *name)
}

fn ar(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

fn kruise(version: &str, kind: &str, plural: &str) -> ApiResource {
    ar(keys::APPS_GROUP, version, kind, plural)
}

/// Every namespaced kind the campaign makes (watched for the history).
pub fn kinds() -> Vec<ApiResource> {
    use keys::{VERSION_V1ALPHA1 as A1, VERSION_V1BETA1 as B1};
    vec![
        kruise(B1, "CloneSet", "clonesets"),
        kruise(B1, "StatefulSet", "statefulsets"),
        kruise(B1, "DaemonSet", "daemonsets"),
        kruise(A1, "UnitedDeployment", "uniteddeployments"),
        kruise(B1, "BroadcastJob", "broadcastjobs"),
        kruise(B1, "AdvancedCronJob", "advancedcronjobs"),
        kruise(A1, "EphemeralJob", "ephemeraljobs"),
        kruise(B1, "ContainerRecreateRequest", "containerrecreaterequests"),
        kruise(B1, "ImagePullJob", "imagepulljobs"),
        ar(
            "policy.kruise.io",
            "v1alpha1",
            "PodUnavailableBudget",
            "podunavailablebudgets",
        ),
        kruise(A1, "WorkloadSpread", "workloadspreads"),
        ar("batch", "v1", "Job", "jobs"),
    ]
}

fn api(client: &Client, ns: &str, kind: &str) -> Res<Api<DynamicObject>> {
    kinds()
        .into_iter()
        .find(|a| a.kind == kind)
        .map(|a| Api::namespaced_with(client.clone(), ns, &a))
        .ok_or_else(|| format!("unknown kind {kind}"))
}

/// The image tag of round `r` (round 0 rolls v1 to v2).
pub fn tag(round: usize) -> &'static str {
    ["v2", "v3", "v1"][round % 3]
}

/// What the invariants expect of these workloads.
pub fn expect() -> Expect {
    let owners = |l: &[&str]| l.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    Expect {
        one_pod_per_slot: owners(&[
            "CloneSet/cs",
            "StatefulSet/sts",
            "DaemonSet/ds",
            "CloneSet/ud-",
            "BroadcastJob/",
        ]),
        in_place: owners(&[
            "CloneSet/cs",
            "StatefulSet/sts",
            "DaemonSet/ds",
            "CloneSet/ud-",
        ]),
        budgets: vec![Budget {
            owner: format!("CloneSet/{GUARDED}"),
            replicas: GUARDED_REPLICAS as usize,
            max_unavailable: GUARDED_BUDGET as usize,
        }],
        spreads: vec![SpreadCap {
            subset: format!("{SPREAD}/a"),
            max: SPREAD_CAP as usize,
        }],
        // The campaign fills them in from what it injected.
        kubelet_kills_ms: Vec::new(),
    }
}

async fn create(client: &Client, ns: &str, kind: &str, obj: Value) -> Res<()> {
    let obj: DynamicObject = serde_json::from_value(obj).map_err(|e| e.to_string())?;
    match api(client, ns, kind)?
        .create(&PostParams::default(), &obj)
        .await
    {
        // A retried round start: made the first time.
        Ok(_) => Ok(()),
        Err(kube::Error::Api(ae)) if ae.code == 409 => Ok(()),
        Err(e) => Err(format!("create {kind} {}: {e}", obj.name_any())),
    }
}

fn to_value<T: serde::Serialize>(o: Res<T>) -> Res<Value> {
    serde_json::to_value(o?).map_err(|e| e.to_string())
}

/// Creates the long-lived workloads (sidecar first: it is injected at Pod creation; budget and
/// spread before the CloneSet they cover). The SidecarSet is cluster-scoped: `sidecar_name`.
pub async fn create_all(client: &Client, ns: &str, sidecar_name: &str) -> Res<()> {
    let e = |x: crate::Error| x.to_string();
    let sc = crate::sidecarset::new(
        sidecar_name,
        ns,
        "cs",
        json!({
            "containers": [{"name": "sidecar", "image": image("sidecar", "v1")}],
            "updateStrategy": {"type": "RollingUpdate", "maxUnavailable": 1}
        }),
    )
    .map_err(e)?;
    crate::sidecarset::api(client)
        .create(&PostParams::default(), &sc)
        .await
        .map_err(|x| format!("create SidecarSet: {x}"))?;
    let term = crate::hostname_term(client).await;
    create(client, ns, "PodUnavailableBudget", json!({
        "apiVersion": "policy.kruise.io/v1alpha1", "kind": "PodUnavailableBudget",
        "metadata": {"name": "budget"},
        "spec": {"selector": {"matchLabels": {"app": GUARDED}}, "maxUnavailable": GUARDED_BUDGET}
    }))
    .await?;
    crate::workloadspread::create_seen(
        client,
        ns,
        SPREAD,
        json!({
            "targetRef": {"apiVersion": keys::APPS_V1ALPHA1, "kind": "CloneSet", "name": GUARDED},
            "subsets": [
                {"name": "a", "requiredNodeSelectorTerm": term, "maxReplicas": SPREAD_CAP},
                {"name": "b", "requiredNodeSelectorTerm": term}
            ]
        }),
    )
    .await
    .map_err(e)?;
    let inplace = json!({"type": "RollingUpdate",
        "rollingUpdate": {"podUpdatePolicy": "InPlaceIfPossible", "maxUnavailable": 1}});
    let mut objs = vec![
        ("CloneSet", to_value(cloneset::new("cs", REPLICAS as i32, "v1", inplace.clone()).map_err(e))?),
        ("CloneSet", to_value(cloneset::new(GUARDED, GUARDED_REPLICAS as i32, "v1",
            json!({"type": "RollingUpdate",
                "rollingUpdate": {"podUpdatePolicy": "ReCreate", "maxUnavailable": 2}})).map_err(e))?),
        ("StatefulSet", to_value(statefulset::new("sts", REPLICAS as i32, "v1", false, json!({
            "podManagementPolicy": "Parallel",
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {
                "podUpdatePolicy": "InPlaceIfPossible", "maxUnavailable": 1}},
            "template": {"metadata": {"labels": {"app": "sts"}}, "spec": {
                "terminationGracePeriodSeconds": 5,
                "containers": [{"name": "app", "image": image("testapp", "v1"),
                    "readinessProbe": {"httpGet": {"path": "/", "port": 8080}, "periodSeconds": 1}}]}}
        })).map_err(e))?),
        ("DaemonSet", to_value(daemonset::new("ds", &image("testapp", "v1"), json!({"type": "RollingUpdate",
            "rollingUpdate": {"rollingUpdateType": "InPlaceIfPossible", "maxUnavailable": 1}}), json!({})).map_err(e))?),
    ];
    let mut ud = json!({"apiVersion": keys::APPS_V1ALPHA1, "kind": "UnitedDeployment",
        "metadata": {"name": "ud"},
        "spec": {"replicas": UD_REPLICAS, "selector": {"matchLabels": {"app": "ud"}},
            "template": crate::uniteddeployment::cloneset_template("ud", "v1"),
            "topology": {"subsets": [
                {"name": "a", "nodeSelectorTerm": term, "replicas": 1},
                {"name": "b", "nodeSelectorTerm": term}]}}});
    ud["spec"]["template"]["cloneSetTemplate"]["spec"]["updateStrategy"]["maxUnavailable"] =
        json!(1);
    objs.push(("UnitedDeployment", ud));
    crate::statefulset::create_headless_service(client, ns, "sts")
        .await
        .map_err(e)?;
    for (kind, obj) in objs {
        create(client, ns, kind, obj).await?;
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    ephemeraljob::running_pod(&pods, CRR_TARGET, CRR_TARGET, "main")
        .await
        .map_err(e)?;
    ephemeraljob::running_pod(&pods, EJ_TARGET, EJ_TARGET, "main")
        .await
        .map_err(e)?;
    let acj = advancedcronjob::with_job(
        "acj",
        "@every 10s",
        "true",
        json!({"concurrencyPolicy": "Allow", "successfulJobsHistoryLimit": 3}),
    )
    .map_err(e)?;
    create(client, ns, "AdvancedCronJob", to_value(Ok(acj))?).await
}

/// Starts round `r`: new images for the rolling workloads, new per-round requests.
pub async fn start_round(client: &Client, ns: &str, sidecar_name: &str, r: usize) -> Res<()> {
    let e = |x: crate::Error| x.to_string();
    let t = tag(r);
    let cs = api(client, ns, "CloneSet")?;
    cloneset::set_image(&cs, "cs", t).await.map_err(e)?;
    cloneset::set_image(&cs, GUARDED, t).await.map_err(e)?;
    let sts = api(client, ns, "StatefulSet")?;
    cloneset::set_image(&sts, "sts", t).await.map_err(e)?;
    daemonset::set_image(&api(client, ns, "DaemonSet")?, "ds", &image("testapp", t))
        .await
        .map_err(e)?;
    let ud = api(client, ns, "UnitedDeployment")?;
    cloneset::json_patch(
        &ud,
        "ud",
        json!([{"op": "replace",
        "path": "/spec/template/cloneSetTemplate/spec/template/spec/containers/0/image",
        "value": image("testapp", t)}]),
    )
    .await
    .map_err(e)?;
    let sidecar_tag = if r.is_multiple_of(2) { "v2" } else { "v1" };
    crate::sidecarset::patch_spec(
        &crate::sidecarset::api(client),
        sidecar_name,
        json!({"containers": [{"name": "sidecar", "image": image("sidecar", sidecar_tag)}]}),
    )
    .await
    .map_err(e)?;
    let bj = broadcastjob::new(&format!("bj-{r}"), "true", "Never", json!({})).map_err(e)?;
    create(client, ns, "BroadcastJob", to_value(Ok(bj))?).await?;
    let mut ej = ephemeraljob::new(
        &format!("ej-{r}"),
        EJ_TARGET,
        "true",
        json!({"replicas": 1, "parallelism": 1}),
    )
    .map_err(e)?;
    // Ephemeral containers' names are unique in a Pod: one per round.
    ej.data["spec"]["template"]["ephemeralContainers"][0]["name"] = json!(format!("dbg-{r}"));
    create(client, ns, "EphemeralJob", to_value(Ok(ej))?).await?;
    create(
        client,
        ns,
        "ContainerRecreateRequest",
        json!({
            "apiVersion": keys::APPS_V1BETA1, "kind": "ContainerRecreateRequest",
            "metadata": {"name": format!("crr-{r}")},
            "spec": {"podName": CRR_TARGET, "containers": [{"name": "main"}]}
        }),
    )
    .await?;
    let node = crate::broadcastjob::eligible_nodes(client)
        .await
        .map_err(e)?;
    create(
        client,
        ns,
        "ImagePullJob",
        json!({
            "apiVersion": keys::APPS_V1BETA1, "kind": "ImagePullJob",
            "metadata": {"name": format!("ipj-{r}")},
            "spec": {"image": image("testapp", t), "selector": {"names": node},
                "completionPolicy": {"type": "Always"}}
        }),
    )
    .await
}

fn st<'a>(o: &'a DynamicObject, f: &str) -> &'a Value {
    &o.data["status"][f]
}

fn observed(o: &DynamicObject) -> bool {
    st(o, "observedGeneration").as_i64() == o.metadata.generation
}

/// Which of round `r`'s rollouts and requests are not complete yet (empty: all are).
pub async fn pending(
    client: &Client,
    ns: &str,
    sidecar_name: &str,
    round: Option<usize>,
) -> Res<Vec<&'static str>> {
    let get = |kind: &'static str, name: String| async move {
        api(client, ns, kind)?
            .get(&name)
            .await
            .map_err(|x| format!("get {kind} {name}: {x}"))
    };
    let mut out = Vec::new();
    let n = |o: &DynamicObject, f: &str| st(o, f).as_i64().unwrap_or(-1);
    let rolled = |o: &DynamicObject, want: i64| {
        observed(o)
            && n(o, "replicas") == want
            && n(o, "readyReplicas") == want
            && n(o, "updatedReplicas") == want
            && st(o, "currentRevision") == st(o, "updateRevision")
    };
    if !rolled(&get("CloneSet", "cs".into()).await?, REPLICAS) {
        out.push("CloneSet");
    }
    if !rolled(&get("CloneSet", GUARDED.into()).await?, GUARDED_REPLICAS) {
        out.push("CloneSet+PUB+WS");
    }
    if !rolled(&get("StatefulSet", "sts".into()).await?, REPLICAS) {
        out.push("AdvStatefulSet");
    }
    let ds = get("DaemonSet", "ds".into()).await?;
    let d = n(&ds, "desiredNumberScheduled");
    if !(observed(&ds)
        && d > 0
        && n(&ds, "updatedNumberScheduled") == d
        && n(&ds, "numberAvailable") == d)
    {
        out.push("AdvDaemonSet");
    }
    let ud = get("UnitedDeployment", "ud".into()).await?;
    if !(observed(&ud)
        && n(&ud, "updatedReadyReplicas") == UD_REPLICAS
        && n(&ud, "readyReplicas") == UD_REPLICAS)
    {
        out.push("UnitedDeployment");
    }
    let sc = crate::sidecarset::api(client)
        .get(sidecar_name)
        .await
        .map_err(|x| x.to_string())?;
    let scs = serde_json::to_value(&sc.status).unwrap_or_default();
    let matched = scs["matchedPods"].as_i64().unwrap_or(-1);
    if !(scs["observedGeneration"].as_i64() == sc.metadata.generation
        && matched == REPLICAS
        && scs["updatedPods"].as_i64() == Some(matched)
        && scs["updatedReadyPods"].as_i64() == Some(matched))
    {
        out.push("SidecarSet");
    }
    let Some(r) = round else {
        return Ok(out);
    };
    if broadcastjob::phase(&get("BroadcastJob", format!("bj-{r}")).await?) != "completed" {
        out.push("BroadcastJob");
    }
    if ephemeraljob::phase(&get("EphemeralJob", format!("ej-{r}")).await?) != "Succeeded" {
        out.push("EphemeralJob");
    }
    if st(
        &get("ContainerRecreateRequest", format!("crr-{r}")).await?,
        "phase",
    ) != "Completed"
    {
        out.push("CRR");
    }
    if st(
        &get("ImagePullJob", format!("ipj-{r}")).await?,
        "completionTime",
    )
    .is_null()
    {
        out.push("ImagePullJob");
    }
    Ok(out)
}

/// The end of the campaign: the per-round requests' effects counted once each (a CRR restarts
/// its container once; an EphemeralJob adds one container; an ImagePullJob pulls on one node),
/// the cron job ran after the last fault, and every object the campaign made still exists.
/// Returns `(subject, invariant, detail)` of each failure.
pub async fn final_checks(
    client: &Client,
    ns: &str,
    history: &History,
    rounds: usize,
    last_fault_secs: i64,
) -> Res<Vec<(String, &'static str, String)>> {
    use super::invariants::RUNS;
    let mut out = Vec::new();
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let target = pods
        .get(CRR_TARGET)
        .await
        .map_err(|x| format!("{CRR_TARGET}: {x}"))?;
    let restarts = crate::container_status(&target, "main")
        .map(|c| c.restart_count)
        .unwrap_or(-1);
    if restarts != rounds as i32 {
        out.push((
            "ContainerRecreateRequest/".into(),
            RUNS,
            format!(
                "{rounds} CRRs completed but {CRR_TARGET}'s container restarted {restarts} times"
            ),
        ));
    }
    let ej = pods
        .get(EJ_TARGET)
        .await
        .map_err(|x| format!("{EJ_TARGET}: {x}"))?;
    let eph = ej
        .spec
        .as_ref()
        .and_then(|s| s.ephemeral_containers.as_ref())
        .map_or(0, Vec::len);
    if eph != rounds {
        out.push((
            "EphemeralJob/".into(),
            RUNS,
            format!("{rounds} EphemeralJobs but {EJ_TARGET} has {eph} ephemeral containers"),
        ));
    }
    for r in 0..rounds {
        let ipj = api(client, ns, "ImagePullJob")?
            .get(&format!("ipj-{r}"))
            .await
            .map_err(|x| x.to_string())?;
        if st(&ipj, "succeeded").as_i64() != Some(1) {
            out.push((
                "ImagePullJob/".into(),
                RUNS,
                format!("ipj-{r} status {}", ipj.data["status"]),
            ));
        }
    }
    if !cron_ran_after(client, ns, last_fault_secs).await? {
        out.push((
            "AdvancedCronJob/acj".into(),
            RUNS,
            format!(
                "no run scheduled after the last fault was repaired (waited {}s)",
                CRON_WAIT.as_secs()
            ),
        ));
    }
    out.extend(lost(client, ns, history, rounds).await?);
    Ok(out)
}

/// How long the end of the campaign waits for a run of the cron job (`@every 10s`).
const CRON_WAIT: std::time::Duration = std::time::Duration::from_secs(40);

/// Whether the cron job makes a run for a point after `after` (unix seconds), waiting for it.
async fn cron_ran_after(client: &Client, ns: &str, after: i64) -> Res<bool> {
    let acj = api(client, ns, "AdvancedCronJob")?
        .get("acj")
        .await
        .map_err(|x| x.to_string())?;
    let uid = acj.uid().unwrap_or_default();
    let deadline = std::time::Instant::now() + CRON_WAIT;
    loop {
        let runs = advancedcronjob::runs(client, ns, "Job", &uid)
            .await
            .map_err(|x| x.to_string())?;
        if runs
            .iter()
            .filter_map(advancedcronjob::scheduled_at)
            .any(|t| t > after)
        {
            return Ok(true);
        }
        if std::time::Instant::now() > deadline {
            return Ok(false);
        }
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    }
}

/// The objects the campaign made (it deletes none) that are gone or were replaced: each must
/// still exist with the uid the history first saw for it.
async fn lost(
    client: &Client,
    ns: &str,
    history: &History,
    rounds: usize,
) -> Res<Vec<(String, &'static str, String)>> {
    use super::invariants::OBJECT_LOST;
    let mut made: Vec<(&str, String)> = vec![
        ("CloneSet", "cs".into()),
        ("CloneSet", GUARDED.into()),
        ("StatefulSet", "sts".into()),
        ("DaemonSet", "ds".into()),
        ("UnitedDeployment", "ud".into()),
        ("AdvancedCronJob", "acj".into()),
        ("PodUnavailableBudget", "budget".into()),
        ("WorkloadSpread", SPREAD.into()),
    ];
    for r in 0..rounds {
        for kind in [
            "BroadcastJob",
            "EphemeralJob",
            "ContainerRecreateRequest",
            "ImagePullJob",
        ] {
            let prefix = match kind {
                "BroadcastJob" => "bj",
                "EphemeralJob" => "ej",
                "ContainerRecreateRequest" => "crr",
                _ => "ipj",
            };
            made.push((kind, format!("{prefix}-{r}")));
        }
    }
    let mut out = Vec::new();
    for (kind, name) in made {
        let first = history
            .objects
            .iter()
            .find(|o| o.kind == kind && o.name == name)
            .map(|o| o.uid.clone());
        let now = api(client, ns, kind)?
            .get_opt(&name)
            .await
            .map_err(|x| x.to_string())?;
        let subject = format!("{kind}/{name}");
        match (first, now) {
            (_, None) => out.push((subject, OBJECT_LOST, "gone".into())),
            (None, Some(_)) => out.push((subject, OBJECT_LOST, "never seen by the watches".into())),
            (Some(u), Some(o)) if o.uid().as_deref() != Some(u.as_str()) => out.push((
                subject,
                OBJECT_LOST,
                format!("replaced: uid {u} became {:?}", o.uid()),
            )),
            (Some(_), Some(o)) if o.metadata.deletion_timestamp.is_some() => {
                out.push((subject, OBJECT_LOST, "being deleted".into()))
            }
            _ => {}
        }
    }
    Ok(out)
}

/// The owner prefix of a table column.
pub fn prefix_of(column: &str) -> &'static str {
    WORKLOADS
        .iter()
        .find(|(name, _)| *name == column)
        .map_or("", |(_, prefix)| *prefix)
}
