use super::*;
use crate::inplace::completion::{self, NotCompleted};
use crate::inplace::hooks::{CloneSetHooks, InPlaceHooks};
use crate::inplace::plan::{self, RefreshStep};
use crate::inplace::spec::{self, UpdateOptions};
use k8s_openapi::api::core::v1::ConfigMapKeySelector;
use kruise_api::appspub::{InPlaceUpdateState, UpdateSpec};
use proptest::prelude::*;
use std::collections::BTreeSet;

const H: CloneSetHooks = CloneSetHooks;

fn base_template(n: usize) -> Value {
    let containers: Vec<Value> = (0..n)
        .map(|i| {
            json!({"name": format!("c{i}"), "image": format!("img{i}:1"),
                   "env": [{"name": "E", "value": "v"}],
                   "ports": [{"containerPort": 8000 + i}],
                   "resources": {"requests": {"cpu": "100m", "memory": "64Mi"},
                                 "limits": {"cpu": "1", "memory": "128Mi"}}})
        })
        .collect();
    json!({"metadata": {"labels": {"app": "x"}},
           "spec": {"containers": containers, "initContainers": [{"name": "init", "image": "init:1",
               "resources": {"requests": {"cpu": "1", "memory": "128Mi"},
                             "limits": {"cpu": "1", "memory": "128Mi"}}}]}})
}

/// Changes that can be applied in place.
fn allowed(t: &mut Value, which: u8, i: usize) {
    let c = &mut t["spec"]["containers"][i];
    match which % 4 {
        0 => c["image"] = json!(format!("img{i}:2")),
        1 => c["resources"]["requests"]["cpu"] = json!("200m"),
        2 => t["metadata"]["labels"]["rev"] = json!("2"),
        _ => t["metadata"]["annotations"] = json!({"note": "y"}),
    }
}

/// Changes that must force a recreate.
fn forbidden(t: &mut Value, which: u8, i: usize) {
    let c = &mut t["spec"]["containers"][i];
    match which % 11 {
        0 => c["env"][0]["value"] = json!("w"),
        1 => c["command"] = json!(["sh"]),
        2 => c["ports"][0]["containerPort"] = json!(1),
        3 => c["resources"]["limits"]["ephemeral-storage"] = json!("1Gi"),
        4 => c["name"] = json!("renamed"),
        5 => t["spec"]["initContainers"][0]["image"] = json!("init:2"),
        6 => t["spec"]["nodeSelector"] = json!({"k": "v"}),
        7 => t["spec"]["volumes"] = json!([{"name": "v", "emptyDir": {}}]),
        8 => t["metadata"]["finalizers"] = json!(["f"]),
        9 => {
            if let Some(list) = t["spec"]["containers"].as_array_mut() {
                list.push(json!({"name": "extra", "image": "e"}));
            }
        }
        _ => {
            // cpu/memory resize that moves the pod to Guaranteed.
            let r = &mut c["resources"];
            r["requests"]["cpu"] = r["limits"]["cpu"].clone();
            r["requests"]["memory"] = r["limits"]["memory"].clone();
            if let Some(list) = t["spec"]["containers"].as_array_mut() {
                for (j, other) in list.iter_mut().enumerate() {
                    if j != i {
                        other["resources"]["requests"] = other["resources"]["limits"].clone();
                    }
                }
            }
        }
    }
}

fn barrier_env(p: i32) -> EnvVar {
    EnvVar {
        name: keys::ENV_CONTAINER_BARRIER.into(),
        value_from: Some(EnvVarSource {
            config_map_key_ref: Some(ConfigMapKeySelector {
                name: "b".into(),
                key: format!("p_{p}"),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Pretend the kubelet restarted every container with its spec image and it became ready.
fn kubelet_catches_up(p: &mut Pod) {
    let specs: Vec<Container> = p
        .spec
        .as_ref()
        .map(|s| s.containers.clone())
        .unwrap_or_default();
    if let Some(statuses) = p
        .status
        .as_mut()
        .and_then(|s| s.container_statuses.as_mut())
    {
        for s in statuses.iter_mut() {
            if let Some(c) = specs.iter().find(|c| c.name == s.name) {
                let image = c.image.clone().unwrap_or_default();
                if s.image != image {
                    s.image_id = format!("id-{image}");
                    s.image = image;
                }
                s.ready = true;
            }
        }
    }
}

fn state_of(p: &Pod) -> InPlaceUpdateState {
    InPlaceUpdateState::from_annotations(p.metadata.annotations.as_ref())
        .expect("readable")
        .expect("present")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn forbidden_changes_are_never_in_place(
        n in 1usize..4,
        bad in any::<u8>(),
        bad_at in any::<prop::sample::Index>(),
        good in prop::collection::vec((any::<u8>(), any::<prop::sample::Index>()), 0..4),
    ) {
        let old = base_template(n);
        let mut new = old.clone();
        for (which, at) in &good {
            allowed(&mut new, *which, at.index(n));
        }
        forbidden(&mut new, bad, bad_at.index(n));
        let got = spec::calculate(
            Some(&revision("cs-v1", old)),
            &revision("cs-v2", new),
            "cs-v2".into(),
            &UpdateOptions::default(),
        );
        prop_assert!(got.is_err(), "forbidden change {} accepted: {:?}", bad % 11, got);
    }

    /// Any new or changed field anywhere in the pod spec other than a container image or
    /// cpu/memory quantities forces a recreate, even next to allowed changes.
    #[test]
    fn arbitrary_spec_fields_are_never_in_place(
        n in 1usize..4,
        at in any::<prop::sample::Index>(),
        in_container in any::<bool>(),
        key in "[a-zA-Z]{1,10}",
        value in prop_oneof![
            "[a-z0-9]{1,6}".prop_map(Value::String),
            any::<i32>().prop_map(|i| json!(i)),
            Just(json!(true)),
            Just(json!({"x": 1})),
            Just(json!([1])),
        ],
        good in prop::collection::vec((any::<u8>(), any::<prop::sample::Index>()), 0..3),
    ) {
        let old = base_template(n);
        let mut new = old.clone();
        for (which, i) in &good {
            allowed(&mut new, *which, i.index(n));
        }
        let target = if in_container {
            prop_assume!(key != "image" && key != "resources");
            &mut new["spec"]["containers"][at.index(n)]
        } else {
            &mut new["spec"]
        };
        prop_assume!(target.get(&key) != Some(&value));
        target[key.as_str()] = value;
        let got = spec::calculate(
            Some(&revision("cs-v1", old)),
            &revision("cs-v2", new),
            "cs-v2".into(),
            &UpdateOptions::default(),
        );
        prop_assert!(got.is_err(), "accepted: {:?}", got);
    }

    #[test]
    fn allowed_changes_are_in_place(
        n in 1usize..4,
        good in prop::collection::vec((any::<u8>(), any::<prop::sample::Index>()), 0..6),
    ) {
        let old = base_template(n);
        let mut new = old.clone();
        for (which, at) in &good {
            allowed(&mut new, *which, at.index(n));
        }
        let got = spec::calculate(
            Some(&revision("cs-v1", old)),
            &revision("cs-v2", new),
            "cs-v2".into(),
            &super::vertical(),
        );
        prop_assert!(got.is_ok(), "{:?}", got);
    }

    /// Walks a whole update through Update and Refresh: every changed container is patched in
    /// exactly one batch, batches go from high to low priority, and the pod never counts as
    /// done (nor gets InPlaceUpdateReady=True) while a batch is left.
    #[test]
    fn batches_cover_changed_containers_in_priority_order(
        containers in prop::collection::vec((prop::option::of(-3i32..4), any::<bool>()), 1..6),
    ) {
        let built: Vec<Container> = containers
            .iter()
            .enumerate()
            .map(|(i, (prio, _))| {
                let c = container(&format!("c{i}"), &format!("img{i}:1"));
                match prio {
                    Some(p) => with_env(c, barrier_env(*p)),
                    None => c,
                }
            })
            .collect();
        let priority: BTreeMap<String, Option<i32>> = containers
            .iter()
            .enumerate()
            .map(|(i, (p, _))| (format!("c{i}"), *p))
            .collect();
        let changed: BTreeSet<String> = containers
            .iter()
            .enumerate()
            .filter(|(_, (_, change))| *change)
            .map(|(i, _)| format!("c{i}"))
            .collect();
        prop_assume!(!changed.is_empty());
        let spec = UpdateSpec {
            revision: "cs-v2".into(),
            container_images: changed.iter().map(|c| (c.clone(), format!("{}:2", c.replace('c', "img")))).collect(),
            ..Default::default()
        };
        let opts = UpdateOptions::default();
        let mut cur = plan::plan_update(&pod(built), &spec, &H, &opts, ts(0)).expect("plan").pod;
        for step in 1..=containers.len() as i64 + 1 {
            let st = state_of(&cur);
            if completion::has_next_batch(&st) {
                prop_assert_eq!(H.pod_update_completed(&cur), Err(NotCompleted::NextBatchPending));
            }
            kubelet_catches_up(&mut cur);
            match plan::plan_refresh(&cur, &H, &opts, ts(step)).expect("plan") {
                RefreshStep::NextBatch(w) => {
                    prop_assert!(completion::has_next_batch(&st));
                    cur = w.pod;
                }
                RefreshStep::MarkReady(_) | RefreshStep::Idle => {
                    prop_assert!(!completion::has_next_batch(&st));
                    break;
                }
                other => prop_assert!(false, "unexpected step {:?}", other),
            }
        }
        let st = state_of(&cur);
        prop_assert!(!completion::has_next_batch(&st));
        prop_assert_eq!(H.pod_update_completed(&cur), Ok(()));

        let batches: Vec<Vec<String>> = st.container_batches_record.iter().map(|b| b.containers.clone()).collect();
        let mut seen = BTreeSet::new();
        for b in &batches {
            prop_assert!(!b.is_empty());
            for c in b {
                prop_assert!(seen.insert(c.clone()), "{} patched twice in {:?}", c, batches);
            }
        }
        prop_assert_eq!(&seen, &changed);
        // Unprioritised containers go first; prioritised ones strictly descend by batch,
        // one priority level per batch.
        for (k, b) in batches.iter().enumerate() {
            let levels: BTreeSet<i32> = b.iter().filter_map(|c| priority[c]).collect();
            prop_assert!(levels.len() <= 1, "mixed priorities in {:?}", b);
            if k > 0 {
                prop_assert!(b.iter().all(|c| priority[c].is_some()));
                let prev: BTreeSet<i32> = batches[k - 1].iter().filter_map(|c| priority[c]).collect();
                if let (Some(p), Some(q)) = (prev.iter().next(), levels.iter().next()) {
                    prop_assert!(p > q, "batch {} not below batch {}: {:?}", k, k - 1, batches);
                }
            }
        }
        for c in &changed {
            prop_assert_eq!(image_of(&cur, c).map(str::to_string), Some(format!("{}:2", c.replace('c', "img"))));
        }
    }

    /// With a grace annotation or a next batch recorded, completion is never reported and the
    /// condition is never flipped to True, whatever the statuses say.
    #[test]
    fn never_done_while_grace_or_next_batch_pending(
        grace in any::<bool>(),
        next_kind in 0u8..3,
        ready in any::<bool>(),
        same_id in any::<bool>(),
        with_meta in any::<bool>(),
    ) {
        let mut p = pod(vec![container("a", "a:2"), container("b", "b:1")]);
        if let Some(cs) = p.status.as_mut().and_then(|s| s.container_statuses.as_mut()) {
            for s in cs.iter_mut() {
                s.ready = ready;
                if !same_id {
                    s.image_id = format!("new-{}", s.image_id);
                }
            }
        }
        let mut st = InPlaceUpdateState {
            revision: "cs-v1".into(),
            update_timestamp: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(ts(0)),
            last_container_statuses: BTreeMap::new(),
            update_env_from_metadata: false,
            update_resources: false,
            update_images: true,
            next_container_images: BTreeMap::new(),
            next_container_ref_metadata: BTreeMap::new(),
            next_container_resources: BTreeMap::new(),
            pre_check_before_next: None,
            container_batches_record: vec![],
        };
        if !grace {
            match next_kind {
                0 => { st.next_container_images.insert("b".into(), "b:2".into()); }
                1 => { st.next_container_ref_metadata.insert("b".into(), ObjectMeta::default()); }
                _ => { st.next_container_resources.insert("b".into(), resources(&[("cpu", "1")], &[])); }
            }
        }
        set_annotation(&mut p, keys::INPLACE_UPDATE_STATE_ANNOTATION, &st.to_annotation_value().expect("json"));
        if grace {
            set_annotation(&mut p, keys::INPLACE_UPDATE_GRACE_ANNOTATION,
                r#"{"revision":"cs-v1","containerImages":{"a":"a:3"},"graceSeconds":3600}"#);
        }
        if with_meta {
            set_annotation(&mut p, keys::RUNTIME_CONTAINERS_META_ANNOTATION, r#"{"containers":[]}"#);
        }
        prop_assert!(H.pod_update_completed(&p).is_err());
        let step = plan::plan_refresh(&p, &H, &UpdateOptions::default(), ts(1)).expect("plan");
        prop_assert!(!matches!(step, RefreshStep::MarkReady(_) | RefreshStep::Idle), "{:?}", step);
    }
}
