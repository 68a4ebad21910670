use super::*;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::json;
use std::collections::BTreeMap;

fn pod(rv: Option<&str>, labels: &[(&str, &str)]) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some("p".into()),
            namespace: Some("ns".into()),
            resource_version: rv.map(str::to_string),
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect::<BTreeMap<_, _>>(),
            ),
            ..Default::default()
        },
        ..Default::default()
    }
}

#[test]
fn guarded_patch_leads_with_the_resource_version() {
    let mut before = pod(Some("7"), &[("a", "1")]);
    let mut after = pod(Some("7"), &[("a", "2"), ("b/c", "3")]);
    let patch = guarded_patch(&mut before, &mut after)
        .expect("serializes")
        .expect("changed");
    assert_eq!(
        serde_json::to_value(&patch).expect("json"),
        json!([
            {"op": "replace", "path": "/metadata/resourceVersion", "value": "7"},
            {"op": "replace", "path": "/metadata/labels/a", "value": "2"},
            {"op": "add", "path": "/metadata/labels/b~1c", "value": "3"},
        ])
    );
    // Applying it to the pod as read gives the pod we wanted.
    let mut doc = serde_json::to_value(&before).expect("json");
    json_patch::patch(&mut doc, &patch).expect("applies");
    assert_eq!(doc, serde_json::to_value(&after).expect("json"));
}

#[test]
fn guarded_patch_is_empty_when_nothing_changed() {
    let mut p = pod(Some("7"), &[("a", "1")]);
    let mut same = p.clone();
    assert!(
        guarded_patch(&mut p, &mut same)
            .expect("serializes")
            .is_none()
    );
    let mut unversioned = pod(None, &[("a", "1")]);
    let mut changed = pod(None, &[("a", "2")]);
    let patch = guarded_patch(&mut unversioned, &mut changed)
        .expect("serializes")
        .expect("changed");
    assert_eq!(patch.0.len(), 1);
}

#[test]
fn unnamed_pods_are_refused() {
    let client_free = Pod::default();
    assert!(matches!(
        pods_name(&client_free),
        Err(ApplyError::Unnamed(_))
    ));
}

/// A pod with the parts the engine's writes touch and the parts they do not.
fn full_pod(containers: usize, with_status: bool) -> Pod {
    let cs: Vec<Value> = (0..containers)
        .map(|i| {
            json!({"name": format!("c{i}"), "image": format!("img{i}:1"),
                   "env": [{"name": "E", "value": "v"}],
                   "resources": {"requests": {"cpu": "100m"}}})
        })
        .collect();
    let statuses: Vec<Value> = (0..containers)
        .map(|i| {
            json!({"name": format!("c{i}"), "image": format!("img{i}:1"),
                   "imageID": format!("id{i}"), "ready": true, "restartCount": 0,
                   "containerID": format!("containerd://{i}")})
        })
        .collect();
    let mut p = json!({
        "metadata": {"name": "p", "namespace": "ns", "resourceVersion": "9",
                     "labels": {"app": "x"}, "annotations": {"k": "v"}},
        "spec": {"containers": cs, "volumes": [{"name": "v", "emptyDir": {}}],
                 "readinessGates": [{"conditionType": "InPlaceUpdateReady"}]},
    });
    if with_status {
        p["status"] = json!({"phase": "Running", "containerStatuses": statuses,
            "conditions": [{"type": "Ready", "status": "True"}]});
    }
    serde_json::from_value(p).expect("pod")
}

/// One of the changes a write can make, chosen by `which`, to container `i` (mod the count).
fn change(p: &mut Pod, which: u8, i: usize) {
    let n = p.spec.as_ref().map_or(0, |s| s.containers.len());
    let spec = p.spec.get_or_insert_default();
    match which % 12 {
        0 if n > 0 => spec.containers[i % n].image = Some(format!("img:{which}")),
        1 => {
            p.metadata
                .labels
                .get_or_insert_default()
                .insert(format!("l{i}"), "1".into());
        }
        2 => {
            p.metadata.annotations = None;
        }
        3 => {
            p.metadata
                .annotations
                .get_or_insert_default()
                .insert("apps.kruise.io/x~/y".into(), format!("{i}"));
        }
        4 => {
            p.status
                .get_or_insert_default()
                .conditions
                .get_or_insert_default()
                .push(
                    serde_json::from_value(
                        json!({"type": "InPlaceUpdateReady", "status": "False"}),
                    )
                    .expect("condition"),
                );
        }
        5 => {
            if let Some(c) = p
                .status
                .as_mut()
                .and_then(|s| s.conditions.as_mut())
                .and_then(|c| c.first_mut())
            {
                c.status = "False".into();
            }
        }
        6 => {
            if let Some(s) = p.status.as_mut() {
                s.conditions = None;
            }
        }
        7 => spec.containers.push(
            serde_json::from_value(json!({"name": format!("n{i}"), "image": "n"}))
                .expect("container"),
        ),
        8 => {
            spec.containers.pop();
        }
        9 => spec.volumes = None,
        10 => p.status = None,
        _ => {
            if let Some(s) = p.status.as_mut() {
                s.phase = Some(format!("P{i}"));
            }
        }
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

    /// The part-wise patch takes the pod as read to the pod as wanted (as the server
    /// applies it to the pod's JSON), leaves both pods as they were, and does what a diff
    /// of the whole pods does.
    #[test]
    fn the_partwise_patch_is_the_whole_diff(
        containers in 0usize..4,
        with_status: bool,
        changes in proptest::collection::vec((0u8..24, 0usize..4), 0..5),
    ) {
        let mut before = full_pod(containers, with_status);
        let mut after = before.clone();
        for (which, i) in changes {
            change(&mut after, which, i);
        }
        let (b0, a0) = (before.clone(), after.clone());
        let patch = guarded_patch(&mut before, &mut after).expect("serializes");
        proptest::prop_assert_eq!(&before, &b0);
        proptest::prop_assert_eq!(&after, &a0);
        let (vb, va) = (serde_json::to_value(&b0).expect("json"), serde_json::to_value(&a0).expect("json"));
        let whole = json_patch::diff(&vb, &va);
        let Some(patch) = patch else {
            proptest::prop_assert!(whole.0.is_empty(), "no patch, but the pods differ: {:?}", whole);
            return Ok(());
        };
        let mut doc = vb.clone();
        json_patch::patch(&mut doc, &patch).expect("applies");
        proptest::prop_assert_eq!(&doc, &va);
        // The same operations as the whole diff (plus the guard), in another order.
        let key = |op: &PatchOperation| serde_json::to_string(op).expect("json");
        let mut ours: Vec<String> = patch.0.iter().skip(1).map(key).collect();
        let mut theirs: Vec<String> = whole.0.iter().map(key).collect();
        ours.sort();
        theirs.sort();
        proptest::prop_assert_eq!(ours, theirs);
    }
}
