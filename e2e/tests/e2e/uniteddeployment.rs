//! UnitedDeployment end to end, against the install from `deploy/`, on the local cluster's one
//! node: a CloneSet-template UnitedDeployment of four over subsets `a` (1 replica), `b` and `c`
//! (the rest, split as upstream), each required to the node's hostname, `b` held by a partition
//! of 1; its template uses the release's v1alpha1 CloneSet fields, which read back and reach
//! every subset's (v1alpha1) CloneSet. The split, the status and the conditions are checked; an image change updates the
//! CloneSets' Pods in place (same UID, restartCount 1) except the partitioned one, which follows
//! once the partition is lifted; a subset added, a subset removed (its CloneSet deleted) and
//! min/max bounds each re-split the replicas. A Deployment-template UnitedDeployment gets one
//! apps/v1 Deployment per subset, split, counted and re-split the same way. Bad input is
//! refused naming the field.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kruise_api::keys;
use kruise_e2e::uniteddeployment::{self as ud, cloneset_children, cloneset_template, create_raw};
use kruise_e2e::{TestNamespace, client, wait_for};
use kube::api::{DynamicObject, ListParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::{Value, json};

const SETTLE: Duration = Duration::from_secs(60);

async fn merge(api: &Api<DynamicObject>, spec: Value) {
    api.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(&json!({ "spec": spec })),
    )
    .await
    .expect("patch UnitedDeployment");
}

fn status(u: &DynamicObject) -> &Value {
    &u.data["status"]
}

fn condition<'a>(u: &'a DynamicObject, type_: &str) -> Option<&'a Value> {
    status(u)["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

/// `(uid, image, restartCount)` of every Pod of the UnitedDeployment, by subset and name.
async fn pods_by_subset(pods: &Api<Pod>) -> BTreeMap<String, Vec<(String, String, i32)>> {
    let mut out: BTreeMap<String, Vec<(String, String, i32)>> = BTreeMap::new();
    let list = pods
        .list(&ListParams::default().labels("app=web"))
        .await
        .expect("pods")
        .items;
    for p in list
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
    {
        let subset = p
            .labels()
            .get(keys::SUBSET_NAME_LABEL)
            .cloned()
            .unwrap_or_default();
        let image = p
            .spec
            .as_ref()
            .and_then(|s| s.containers.first())
            .and_then(|c| c.image.clone())
            .unwrap_or_default();
        let restarts = p
            .status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref())
            .and_then(|c| c.first())
            .map_or(0, |c| c.restart_count);
        out.entry(subset)
            .or_default()
            .push((p.uid().unwrap_or_default(), image, restarts));
    }
    out
}

/// The suite's CloneSet template with the release's v1alpha1 strategy fields: a template
/// partition (the controller sets its own per subset), a budget, `paused: false`, an in-place
/// grace period and no PVC reuse.
fn release_template(tag: &str) -> Value {
    let mut t = cloneset_template("web", tag);
    let spec = &mut t["cloneSetTemplate"]["spec"];
    spec["updateStrategy"] = json!({"type": "InPlaceIfPossible", "partition": 3,
        "maxUnavailable": 2, "paused": false, "inPlaceUpdateStrategy": {"gracePeriodSeconds": 1}});
    spec["scaleStrategy"] = json!({"disablePVCReuse": true});
    t
}

#[tokio::test]
async fn cloneset_subsets_split_update_in_place_and_resplit() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-ud").await.expect("ns");
    let term = kruise_e2e::hostname_term(&client).await;
    let subset = |name: &str, extra: Value| {
        let mut s = json!({"name": name, "nodeSelectorTerm": term});
        for (k, v) in extra.as_object().into_iter().flatten() {
            s[k] = v.clone();
        }
        s
    };
    create_raw(
        &client,
        &ns.name,
        "web",
        json!({
            "replicas": 4,
            "selector": {"matchLabels": {"app": "web"}},
            "template": release_template("v1"),
            "topology": {"subsets": [
                subset("a", json!({"replicas": 1})),
                subset("b", json!({"patch": {"metadata": {"labels": {"tier": "b"}}}})),
                subset("c", json!({})),
            ]},
            "updateStrategy": {"manualUpdate": {"partitions": {"b": 1}}}
        }),
    )
    .await
    .expect("create UnitedDeployment");
    let uds = ud::api(&client, &ns.name);

    // a is given its 1; b and c share 3, the odd one to the later name.
    ud::wait_split(
        &client,
        &ns.name,
        ud::expect(&[("a", 1), ("b", 1), ("c", 2)]),
        SETTLE,
    )
    .await;
    // The template reads back with every release field; each subset's CloneSet was written
    // as a v1alpha1 CloneSet with them, its partition the UnitedDeployment's for the subset.
    let u = uds.get("web").await.expect("read");
    let tspec = &u.data["spec"]["template"]["cloneSetTemplate"]["spec"];
    assert_eq!(
        tspec["updateStrategy"],
        release_template("v1")["cloneSetTemplate"]["spec"]["updateStrategy"],
        "{tspec}"
    );
    assert_eq!(tspec["scaleStrategy"]["disablePVCReuse"], true, "{tspec}");
    let children = cloneset_children(&client, &ns.name)
        .await
        .expect("children");
    for (name, partition) in [("a", 0), ("b", 1), ("c", 0)] {
        let cs = &children[name];
        let us = &cs.data["spec"]["updateStrategy"];
        assert_eq!(us["type"], "InPlaceIfPossible", "{name}: {us}");
        assert_eq!(us["partition"], partition, "{name}: {us}");
        assert_eq!(us["maxUnavailable"], 2, "{name}: {us}");
        assert_ne!(us["paused"], true, "{name}: {us}");
        assert_eq!(
            us["inPlaceUpdateStrategy"]["gracePeriodSeconds"], 1,
            "{name}: {us}"
        );
        assert!(us.get("rollingUpdate").is_none(), "{name}: {us}");
        assert_eq!(
            cs.data["spec"]["scaleStrategy"]["disablePVCReuse"], true,
            "{name}"
        );
        let writers: Vec<String> = cs
            .metadata
            .managed_fields
            .iter()
            .flatten()
            .filter(|m| m.operation.as_deref() == Some("Update") && m.subresource.is_none())
            .filter_map(|m| m.api_version.clone())
            .collect();
        assert!(
            !writers.is_empty() && writers.iter().all(|v| v == keys::APPS_V1ALPHA1),
            "{name}: written as v1alpha1 only, as the release's adapter: {writers:?}"
        );
    }
    let b = &children["b"];
    assert!(b.name_any().starts_with("web-b-"), "{}", b.name_any());
    assert_eq!(
        b.data["spec"]["selector"]["matchLabels"][keys::SUBSET_NAME_LABEL],
        "b"
    );
    assert_eq!(
        b.data["spec"]["template"]["metadata"]["labels"]["tier"],
        "b"
    );
    assert_eq!(
        b.data["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
            ["nodeSelectorTerms"][0],
        term
    );
    assert_eq!(b.owner_references()[0].kind, "UnitedDeployment");

    let settled = wait_for("the status of four ready Pods", SETTLE, || async {
        let u = uds.get("web").await?;
        let st = status(&u);
        let ok = st["observedGeneration"].as_i64() == u.metadata.generation
            && st["replicas"] == 4
            && st["readyReplicas"] == 4
            && st["updatedReadyReplicas"] == 4;
        Ok(ok.then_some(u))
    })
    .await
    .expect("settled");
    let st = status(&settled);
    assert_eq!(st["subsetReplicas"], json!({"a": 1, "b": 1, "c": 2}));
    assert_eq!(
        st["updateStatus"]["currentPartitions"],
        json!({"a": 0, "b": 1, "c": 0})
    );
    assert_eq!(st["currentRevision"], st["updateStatus"]["updatedRevision"]);
    assert_eq!(st["labelSelector"], "app=web");
    assert_eq!(
        condition(&settled, "SubsetProvisioned").map(|c| &c["status"]),
        Some(&json!("True"))
    );
    assert_eq!(
        condition(&settled, "UnitedDeploymentUpdated").map(|c| &c["status"]),
        Some(&json!("True"))
    );
    let first_revision = st["currentRevision"].clone();

    // An image change: in place everywhere but under b's partition.
    let pods: Api<Pod> = ns.api();
    let before = pods_by_subset(&pods).await;
    assert_eq!(before.values().map(Vec::len).sum::<usize>(), 4);
    merge(&uds, json!({"template": release_template("v2")})).await;
    let v2 = kruise_e2e::image("testapp", "v2");
    let updated = wait_for("a and c updated in place, b held", SETTLE, || async {
        let now = pods_by_subset(&pods).await;
        let done = ["a", "c"].iter().all(|s| {
            now.get(*s)
                .is_some_and(|ps| ps.iter().all(|(_, img, r)| *img == v2 && *r == 1))
        });
        let u = uds.get("web").await?;
        Ok((done && status(&u)["updatedReadyReplicas"] == 3).then_some((now, u)))
    })
    .await
    .expect("in-place update");
    let (now, u) = updated;
    for s in ["a", "b", "c"] {
        let uids = |m: &BTreeMap<String, Vec<(String, String, i32)>>| {
            let mut v: Vec<String> = m
                .get(s)
                .into_iter()
                .flatten()
                .map(|p| p.0.clone())
                .collect();
            v.sort();
            v
        };
        assert_eq!(uids(&before), uids(&now), "subset {s}: same Pods");
    }
    assert!(
        now["b"].iter().all(|(_, img, r)| *img != v2 && *r == 0),
        "{:?}",
        now["b"]
    );
    let st = status(&u);
    assert_eq!(st["updatedReplicas"], 3);
    assert_eq!(st["currentRevision"], first_revision);
    assert_ne!(st["updateStatus"]["updatedRevision"], first_revision);
    assert_eq!(
        condition(&u, "UnitedDeploymentUpdated").map(|c| &c["status"]),
        Some(&json!("False"))
    );

    // kubectl kruise sees the rollout held: 3 of 4 Pods on the UnitedDeployment's revision.
    let kk = kruise_e2e::cli::Kruise::new(&ns.name).expect("kubectl-kruise");
    let held = kk
        .run(&["rollout", "status", "ud/web", "--timeout", "2s"])
        .await
        .expect("run rollout status");
    assert_eq!(held.code, Some(4), "held by b's partition: {held}");
    assert!(held.stdout.contains("3 of 4"), "{held}");

    // A subset's partition is driven by the plugin: without --subset it is refused naming the
    // flag, an unknown subset lists the subsets; then `promote --subset b --full` lifts it, and
    // b follows and the update revision becomes current.
    let no_subset = kk
        .run(&["rollout", "partition", "ud/web", "0"])
        .await
        .expect("run rollout partition");
    assert_eq!(no_subset.code, Some(2), "{no_subset}");
    assert!(no_subset.stderr.contains("--subset"), "{no_subset}");
    let unknown = kk
        .run(&["rollout", "promote", "ud/web", "--subset", "zz", "--full"])
        .await
        .expect("run rollout promote");
    assert_eq!(unknown.code, Some(2), "{unknown}");
    assert!(unknown.stderr.contains("a, b, c"), "{unknown}");
    let promoted = kk
        .run(&["rollout", "promote", "ud/web", "--subset", "b", "--full"])
        .await
        .expect("run rollout promote");
    assert_eq!(promoted.code, Some(0), "{promoted}");
    assert!(
        promoted
            .stdout
            .contains("subset b promoted: partition 1 -> 0"),
        "{promoted}"
    );
    let u = uds.get("web").await.expect("read");
    assert_eq!(
        u.data["spec"]["updateStrategy"]["manualUpdate"]["partitions"],
        json!({"b": 0}),
        "only b's partition changed"
    );
    wait_for(
        "b updated in place and the revision current",
        SETTLE,
        || async {
            let now = pods_by_subset(&pods).await;
            let b_done = now
                .get("b")
                .is_some_and(|ps| ps.iter().all(|(_, img, r)| *img == v2 && *r == 1));
            let u = uds.get("web").await?;
            let st = status(&u);
            let current = st["currentRevision"] == st["updateStatus"]["updatedRevision"];
            Ok((b_done && current && st["updatedReadyReplicas"] == 4).then_some(()))
        },
    )
    .await
    .expect("partition lifted");
    let done = kk
        .run(&["rollout", "status", "ud/web", "--timeout", "60s"])
        .await
        .expect("run rollout status");
    assert_eq!(done.code, Some(0), "{done}");
    assert!(
        done.stdout.contains("ud \"web\" successfully rolled out"),
        "{done}"
    );

    // A subset added: the rest is shared again.
    let subsets = |v: Vec<Value>| json!({"topology": {"subsets": v}});
    merge(
        &uds,
        subsets(vec![
            subset("a", json!({"replicas": 1})),
            subset(
                "b",
                json!({"patch": {"metadata": {"labels": {"tier": "b"}}}}),
            ),
            subset("c", json!({})),
            subset("d", json!({})),
        ]),
    )
    .await;
    ud::wait_split(
        &client,
        &ns.name,
        ud::expect(&[("a", 1), ("b", 1), ("c", 1), ("d", 1)]),
        SETTLE,
    )
    .await;

    // A subset removed: its CloneSet goes, and the four are split over three.
    merge(
        &uds,
        subsets(vec![
            subset(
                "b",
                json!({"patch": {"metadata": {"labels": {"tier": "b"}}}}),
            ),
            subset("c", json!({})),
            subset("d", json!({})),
        ]),
    )
    .await;
    ud::wait_split(
        &client,
        &ns.name,
        ud::expect(&[("b", 1), ("c", 1), ("d", 2)]),
        SETTLE,
    )
    .await;

    // Elastic bounds: filled in order up to each maximum, the unbounded last takes the rest.
    merge(
        &uds,
        subsets(vec![
            subset("b", json!({"maxReplicas": 1})),
            subset("c", json!({"maxReplicas": 2})),
            subset("d", json!({})),
        ]),
    )
    .await;
    ud::wait_split(
        &client,
        &ns.name,
        ud::expect(&[("b", 1), ("c", 2), ("d", 1)]),
        SETTLE,
    )
    .await;
    let u = uds.get("web").await.expect("ud");
    // The webhook defaulted every minReplicas to 0 (upstream).
    assert_eq!(u.data["spec"]["topology"]["subsets"][2]["minReplicas"], 0);
}

#[tokio::test]
async fn bad_united_deployments_are_refused_naming_the_field() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-ud-bad")
        .await
        .expect("ns");
    let good = json!({
        "replicas": 2,
        "selector": {"matchLabels": {"app": "web"}},
        "template": cloneset_template("web", "v1"),
        "topology": {"subsets": [{"name": "a"}, {"name": "b"}]}
    });
    let with = |pointer: &str, v: Value| {
        let mut s = good.clone();
        let mut cur = &mut s;
        for k in pointer.trim_start_matches('/').split('/') {
            cur = match k.parse::<usize>() {
                Ok(i) => &mut cur[i],
                Err(_) => &mut cur[k],
            };
        }
        *cur = v;
        s
    };
    let mut two = good.clone();
    two["template"]["deploymentTemplate"] = json!({"spec": {"template": {}}});
    let cases = [
        (
            with("/topology/subsets/1/name", json!("a")),
            "spec.topology.subsets[1].name",
        ),
        (two, "spec.template"),
        (
            with("/topology/subsets/0/replicas", json!("120%")),
            "spec.topology.subsets[0].replicas",
        ),
        (
            with("/selector", json!({"matchLabels": {"app": "x"}})),
            "spec.template.cloneSetTemplate.metadata.labels",
        ),
        (
            with(
                "/topology/scheduleStrategy",
                json!({"type": "Adaptive", "adaptive": {"rescheduleCriticalSeconds": -1}}),
            ),
            "spec.topology.scheduleStrategy.adaptive.rescheduleCriticalSeconds",
        ),
        (
            with(
                "/updateStrategy",
                json!({"manualUpdate": {"partitions": {"zz": 1}}}),
            ),
            "spec.updateStrategy.manualUpdate.partitions",
        ),
    ];
    for (i, (spec, field)) in cases.into_iter().enumerate() {
        let err = create_raw(&client, &ns.name, &format!("bad-{i}"), spec)
            .await
            .expect_err("refused");
        let msg = err.to_string();
        assert!(msg.contains(field), "case {i}: {msg}");
        assert!(msg.contains("denied the request"), "case {i}: {msg}");
    }
}

/// Kubernetes' own kind as the subset workload: one apps/v1 Deployment per subset, split and
/// counted like the CloneSets, and re-split when the total changes.
#[tokio::test]
async fn deployment_subsets_are_split_and_counted() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-ud-deploy")
        .await
        .expect("ns");
    let term = kruise_e2e::hostname_term(&client).await;
    let mut template = cloneset_template("web", "v1")["cloneSetTemplate"].clone();
    if let Some(spec) = template["spec"].as_object_mut() {
        spec.remove("updateStrategy");
        spec.remove("selector");
    }
    create_raw(
        &client,
        &ns.name,
        "web",
        json!({
            "replicas": 3,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"deploymentTemplate": template},
            "topology": {"subsets": [
                {"name": "a", "nodeSelectorTerm": term},
                {"name": "b", "nodeSelectorTerm": term},
            ]}
        }),
    )
    .await
    .expect("create UnitedDeployment");
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> = ns.api();
    let split = |want: BTreeMap<String, i32>| {
        let deployments = deployments.clone();
        async move {
            wait_for(&format!("Deployments {want:?}"), SETTLE, || async {
                let mut got = BTreeMap::new();
                for d in deployments.list(&ListParams::default()).await?.items {
                    let subset = d
                        .labels()
                        .get(keys::SUBSET_NAME_LABEL)
                        .cloned()
                        .unwrap_or_default();
                    let replicas = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(-1);
                    got.insert(subset, replicas);
                }
                Ok((got == want).then_some(()))
            })
            .await
            .expect("split");
        }
    };
    let want = |pairs: &[(&str, i32)]| -> BTreeMap<String, i32> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()
    };
    split(want(&[("a", 1), ("b", 2)])).await;
    let uds = ud::api(&client, &ns.name);
    wait_for("three ready Pods counted", SETTLE, || async {
        let u = uds.get("web").await?;
        let st = status(&u);
        Ok((st["readyReplicas"] == 3 && st["updatedReadyReplicas"] == 3).then_some(()))
    })
    .await
    .expect("ready");
    uds.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(&json!({"spec": {"replicas": 4}})),
    )
    .await
    .expect("scale");
    split(want(&[("a", 2), ("b", 2)])).await;
}
