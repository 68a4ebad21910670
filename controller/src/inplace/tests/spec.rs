use super::*;
use crate::inplace::qos::QosClass;
use crate::inplace::spec::{self, Features, NotInPlace, UpdateOptions};
use kruise_api::appspub::UpdateSpec;

fn tpl(containers: Value) -> Value {
    json!({"metadata": {"labels": {"app": "web"}}, "spec": {"containers": containers}})
}

fn calc(old: Value, new: Value, opts: &UpdateOptions) -> Result<UpdateSpec, NotInPlace> {
    spec::calculate(
        Some(&revision("cs-v1", old)),
        &revision("cs-v2", new),
        "cs-v2".into(),
        opts,
    )
}

fn meta_patch(spec: &UpdateSpec) -> Option<Value> {
    spec.meta_data_patch
        .as_ref()
        .map(|b| serde_json::from_slice(&b.0).expect("patch is JSON"))
}

#[test]
fn not_in_place_table() {
    let opts = UpdateOptions::default();
    let base =
        tpl(json!([{"name": "main", "image": "nginx:1", "env": [{"name": "A", "value": "1"}]}]));
    let cases: Vec<(&str, Value, &str)> = vec![
        (
            "env value",
            tpl(
                json!([{"name": "main", "image": "nginx:1", "env": [{"name": "A", "value": "2"}]}]),
            ),
            "spec.containers[0].env changed",
        ),
        (
            "env removed",
            tpl(json!([{"name": "main", "image": "nginx:1"}])),
            "spec.containers[0].env changed",
        ),
        (
            "container added",
            tpl(
                json!([{"name": "main", "image": "nginx:1", "env": [{"name": "A", "value": "1"}]},
                       {"name": "side", "image": "busybox"}]),
            ),
            "spec.containers changed",
        ),
        (
            "command",
            tpl(
                json!([{"name": "main", "image": "nginx:1", "command": ["sh"], "env": [{"name": "A", "value": "1"}]}]),
            ),
            "spec.containers[0].command changed",
        ),
        (
            "container renamed",
            tpl(
                json!([{"name": "other", "image": "nginx:1", "env": [{"name": "A", "value": "1"}]}]),
            ),
            "spec.containers[0].name changed",
        ),
        (
            "volumes",
            json!({"metadata": {"labels": {"app": "web"}}, "spec": {
                "containers": [{"name": "main", "image": "nginx:1", "env": [{"name": "A", "value": "1"}]}],
                "volumes": [{"name": "v", "emptyDir": {}}]}}),
            "spec.volumes changed",
        ),
        (
            "node selector",
            json!({"metadata": {"labels": {"app": "web"}}, "spec": {
                "containers": [{"name": "main", "image": "nginx:1", "env": [{"name": "A", "value": "1"}]}],
                "nodeSelector": {"disk": "ssd"}}}),
            "spec.nodeSelector changed",
        ),
        (
            "finalizers",
            json!({"metadata": {"labels": {"app": "web"}, "finalizers": ["x"]}, "spec": {
                "containers": [{"name": "main", "image": "nginx:1", "env": [{"name": "A", "value": "1"}]}]}}),
            "metadata.finalizers changed",
        ),
    ];
    for (name, new, want) in cases {
        let got = calc(base.clone(), new, &opts).expect_err(name);
        assert_eq!(got.to_string(), want, "{name}");
    }
}

#[test]
fn init_container_image_is_not_in_place() {
    let old = json!({"spec": {"initContainers": [{"name": "init", "image": "a:1"}],
                              "containers": [{"name": "main", "image": "nginx:1"}]}});
    let new = json!({"spec": {"initContainers": [{"name": "init", "image": "a:2"}],
                              "containers": [{"name": "main", "image": "nginx:1"}]}});
    let err = calc(old, new, &UpdateOptions::default()).expect_err("init container");
    assert_eq!(err.to_string(), "spec.initContainers[0].image changed");
}

#[test]
fn missing_or_broken_revisions() {
    let opts = UpdateOptions::default();
    let new = revision("cs-v2", tpl(json!([{"name": "main", "image": "a"}])));
    assert_eq!(
        spec::calculate(None, &new, "cs-v2".into(), &opts),
        Err(NotInPlace::NoOldRevision)
    );
    let mut broken = new.clone();
    broken.data = Some(RawExtension(json!({"spec": {}})));
    assert!(matches!(
        spec::calculate(Some(&broken), &new, "cs-v2".into(), &opts),
        Err(NotInPlace::InvalidRevision { .. })
    ));
    let mut outside = new.clone();
    outside.data = Some(RawExtension(
        json!({"spec": {"template": {"$patch": "replace", "metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "main", "image": "a"}]}}, "replicas": 3}}),
    ));
    assert_eq!(
        spec::calculate(Some(&new), &outside, "cs-v2".into(), &opts)
            .expect_err("outside template")
            .to_string(),
        "spec.replicas changed"
    );
}

#[test]
fn images_are_in_place() {
    let old =
        tpl(json!([{"name": "main", "image": "nginx:1"}, {"name": "side", "image": "busybox:1"}]));
    let new =
        tpl(json!([{"name": "main", "image": "nginx:2"}, {"name": "side", "image": "busybox:2"}]));
    let spec = calc(old, new, &UpdateOptions::default()).expect("in place");
    assert_eq!(spec.revision, "cs-v2");
    assert_eq!(
        spec.container_images,
        BTreeMap::from([
            ("main".to_string(), "nginx:2".to_string()),
            ("side".to_string(), "busybox:2".to_string())
        ])
    );
    assert!(spec.meta_data_patch.is_none());
    assert!(!spec.update_env_from_metadata);
    assert!(spec.container_resources.is_empty());
}

#[test]
fn unchanged_template_is_an_empty_update() {
    let t = tpl(json!([{"name": "main", "image": "nginx:1"}]));
    let spec = calc(t.clone(), t, &UpdateOptions::default()).expect("in place");
    assert_eq!(spec.container_images.len(), 0);
    assert!(spec.meta_data_patch.is_none());
}

#[test]
fn serializer_noise_is_ignored() {
    // Go writes empty structs and null timestamps; our serializer leaves them out.
    let old = json!({"metadata": {"creationTimestamp": null, "labels": {"app": "web"}},
                     "spec": {"containers": [{"name": "main", "image": "nginx:1", "resources": {}}]}});
    let new = json!({"metadata": {"labels": {"app": "web"}},
                     "spec": {"containers": [{"name": "main", "image": "nginx:2"}]}});
    let spec = calc(old, new, &UpdateOptions::default()).expect("in place");
    assert_eq!(spec.container_images["main"], "nginx:2");
    assert!(spec.meta_data_patch.is_none());
}

#[test]
fn grace_seconds_come_from_options() {
    let opts = UpdateOptions {
        grace_period_seconds: 30,
        ..Default::default()
    };
    let spec = calc(
        tpl(json!([{"name": "main", "image": "a:1"}])),
        tpl(json!([{"name": "main", "image": "a:2"}])),
        &opts,
    )
    .expect("in place");
    assert_eq!(spec.grace_seconds, 30);
}

#[test]
fn labels_and_annotations_become_a_metadata_patch() {
    let old = json!({"metadata": {"labels": {"app": "web", "gone": "x"}, "annotations": {"a": "1"}},
                     "spec": {"containers": [{"name": "main", "image": "nginx:1"}]}});
    let new = json!({"metadata": {"labels": {"app": "web2", "new": "y"}, "annotations": {"a": "1", "b/c": "2"}},
                     "spec": {"containers": [{"name": "main", "image": "nginx:1"}]}});
    let spec = calc(old, new, &UpdateOptions::default()).expect("in place");
    assert_eq!(
        meta_patch(&spec),
        Some(
            json!({"metadata": {"labels": {"app": "web2", "new": "y", "gone": null},
                                 "annotations": {"b/c": "2"}}})
        )
    );
    assert!(!spec.update_env_from_metadata);
    assert!(spec.container_images.is_empty());
}

#[test]
fn labels_added_to_a_template_without_metadata() {
    let old = json!({"spec": {"containers": [{"name": "main", "image": "nginx:1"}]}});
    let new = json!({"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "main", "image": "nginx:1"}]}});
    let spec = calc(old, new, &UpdateOptions::default()).expect("in place");
    assert_eq!(
        meta_patch(&spec),
        Some(json!({"metadata": {"labels": {"a": "b"}}}))
    );
}

#[test]
fn env_from_metadata_goes_per_container() {
    let env_l = json!({"name": "VERSION", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['version']"}}});
    let env_a = json!({"name": "CFG", "valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations['cfg']"}}});
    let mk = |version: &str, cfg: &str, other: &str| {
        json!({"metadata": {"labels": {"version": version, "other": other}, "annotations": {"cfg": cfg}},
               "spec": {"containers": [
                   {"name": "main", "image": "a:1", "env": [env_l.clone()]},
                   {"name": "side", "image": "b:1", "env": [env_a.clone()]},
                   {"name": "plain", "image": "c:1"}]}})
    };
    let spec = calc(
        mk("v1", "c1", "o1"),
        mk("v2", "c2", "o2"),
        &UpdateOptions::default(),
    )
    .expect("in place");
    assert!(spec.update_env_from_metadata);
    assert_eq!(
        spec.container_ref_metadata["main"].labels,
        Some(BTreeMap::from([("version".to_string(), "v2".to_string())]))
    );
    assert_eq!(spec.container_ref_metadata["main"].annotations, None);
    assert_eq!(
        spec.container_ref_metadata["side"].annotations,
        Some(BTreeMap::from([("cfg".to_string(), "c2".to_string())]))
    );
    assert!(!spec.container_ref_metadata.contains_key("plain"));
    // Keys read by env are not in the plain patch.
    assert_eq!(
        meta_patch(&spec),
        Some(json!({"metadata": {"labels": {"other": "o2"}}}))
    );

    // With the feature off everything is a plain patch.
    let opts = UpdateOptions {
        features: Features {
            env_from_metadata: false,
            ..Default::default()
        },
        ..Default::default()
    };
    let spec = calc(mk("v1", "c1", "o1"), mk("v2", "c2", "o2"), &opts).expect("in place");
    assert!(!spec.update_env_from_metadata);
    assert!(spec.container_ref_metadata.is_empty());
    assert_eq!(
        meta_patch(&spec),
        Some(
            json!({"metadata": {"labels": {"version": "v2", "other": "o2"}, "annotations": {"cfg": "c2"}}})
        )
    );
}

#[test]
fn removed_env_label_is_only_patched() {
    let env =
        json!({"name": "V", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['v']"}}});
    let old = json!({"metadata": {"labels": {"v": "1"}}, "spec": {"containers": [{"name": "main", "image": "a", "env": [env.clone()]}]}});
    let new = json!({"metadata": {"labels": {"x": "1"}}, "spec": {"containers": [{"name": "main", "image": "a", "env": [env]}]}});
    let spec = calc(old, new, &UpdateOptions::default()).expect("in place");
    assert!(!spec.update_env_from_metadata);
    assert_eq!(
        meta_patch(&spec),
        Some(json!({"metadata": {"labels": {"x": "1", "v": null}}}))
    );
}

fn res_tpl(req_cpu: &str, lim_cpu: &str, req_mem: &str, lim_mem: &str) -> Value {
    tpl(json!([{"name": "main", "image": "a:1", "resources": {
        "requests": {"cpu": req_cpu, "memory": req_mem},
        "limits": {"cpu": lim_cpu, "memory": lim_mem}}}]))
}

#[test]
fn resources_table() {
    let opts = super::vertical();
    let base = res_tpl("100m", "200m", "64Mi", "128Mi");
    // (name, new template, Ok(resources of main as (requests, limits)) or Err(message))
    type Want = Result<
        (
            Vec<(&'static str, &'static str)>,
            Vec<(&'static str, &'static str)>,
        ),
        &'static str,
    >;
    let cases: Vec<(&str, Value, Want)> = vec![
        (
            "cpu request",
            res_tpl("150m", "200m", "64Mi", "128Mi"),
            Ok((vec![("cpu", "150m")], vec![])),
        ),
        (
            "cpu and memory limits",
            res_tpl("100m", "1", "64Mi", "1Gi"),
            Ok((vec![], vec![("cpu", "1"), ("memory", "1Gi")])),
        ),
        (
            "burstable to guaranteed",
            res_tpl("200m", "200m", "128Mi", "128Mi"),
            Err("the pod QoS class would change from Burstable to Guaranteed"),
        ),
        (
            "resource added",
            tpl(json!([{"name": "main", "image": "a:1", "resources": {
                "requests": {"cpu": "100m", "memory": "64Mi", "ephemeral-storage": "1Gi"},
                "limits": {"cpu": "200m", "memory": "128Mi"}}}])),
            Err(
                "spec.containers[0].resources.requests.ephemeral-storage was added: resources can be changed in place, not added or removed",
            ),
        ),
        (
            "resource removed",
            tpl(json!([{"name": "main", "image": "a:1", "resources": {
                "requests": {"cpu": "100m"},
                "limits": {"cpu": "200m", "memory": "128Mi"}}}])),
            Err(
                "spec.containers[0].resources.requests.memory was removed: resources can be changed in place, not added or removed",
            ),
        ),
    ];
    for (name, new, want) in cases {
        let got = calc(base.clone(), new, &opts);
        match want {
            Ok((req, lim)) => {
                let spec = got.unwrap_or_else(|e| panic!("{name}: {e}"));
                let want = resources(&req, &lim);
                assert_eq!(spec.container_resources["main"], want, "{name}");
                assert!(spec.container_images.is_empty(), "{name}");
            }
            Err(msg) => assert_eq!(got.expect_err(name).to_string(), msg, "{name}"),
        }
    }
}

#[test]
fn non_resizable_resource() {
    let mk = |gpu: &str| {
        tpl(
            json!([{"name": "main", "image": "a:1", "resources": {"limits": {"nvidia.com/gpu": gpu}}}]),
        )
    };
    let err = calc(mk("1"), mk("2"), &super::vertical()).expect_err("gpu");
    assert_eq!(
        err.to_string(),
        "spec.containers[0].resources.limits.nvidia.com/gpu changed: only cpu and memory can be resized in place"
    );
}

/// `InPlaceWorkloadVerticalScaling` decides whether a cpu/memory change goes in place; off
/// (upstream's default) it is a change like any other, and the Pod is recreated.
#[test]
fn resources_follow_the_vertical_scaling_gate() {
    let base = res_tpl("100m", "200m", "64Mi", "128Mi");
    let mut image_and_cpu = res_tpl("150m", "200m", "64Mi", "128Mi");
    image_and_cpu["spec"]["containers"][0]["image"] = json!("a:2");
    let mut image_only = base.clone();
    image_only["spec"]["containers"][0]["image"] = json!("a:2");
    // (name, new template, in place with the gate off, in place with it on)
    let cases = [
        (
            "cpu request",
            res_tpl("150m", "200m", "64Mi", "128Mi"),
            false,
            true,
        ),
        (
            "memory limit",
            res_tpl("100m", "200m", "64Mi", "256Mi"),
            false,
            true,
        ),
        ("image and cpu", image_and_cpu, false, true),
        ("image only", image_only, true, true),
    ];
    let off = UpdateOptions::default();
    assert!(!off.features.vertical_scaling, "upstream's default is off");
    for (name, new, want_off, want_on) in cases {
        let got_off = calc(base.clone(), new.clone(), &off);
        assert_eq!(got_off.is_ok(), want_off, "{name}, gate off: {got_off:?}");
        if let Err(e) = got_off {
            assert_eq!(
                e.to_string(),
                "spec.containers[0].resources changed",
                "{name}"
            );
        }
        let got_on = calc(base.clone(), new, &super::vertical());
        assert_eq!(got_on.is_ok(), want_on, "{name}, gate on: {got_on:?}");
    }
}

#[test]
fn image_and_resources_together() {
    let old = res_tpl("100m", "200m", "64Mi", "128Mi");
    let mut new = res_tpl("150m", "200m", "64Mi", "128Mi");
    new["spec"]["containers"][0]["image"] = json!("a:2");
    let spec = calc(old, new, &super::vertical()).expect("in place");
    assert_eq!(spec.container_images["main"], "a:2");
    assert!(spec.container_resources.contains_key("main"));
    assert!(!spec.vertical_update_only());
}

#[test]
fn qos_guaranteed_stays_guaranteed() {
    let g = |c: &str| res_tpl(c, c, "128Mi", "128Mi");
    let spec = calc(g("1"), g("2"), &super::vertical()).expect("in place");
    assert!(spec.vertical_update_only());
    assert_eq!(
        crate::inplace::qos::compute(
            &serde_json::from_value(g("2")["spec"].clone()).expect("spec")
        ),
        QosClass::Guaranteed
    );
}

#[test]
fn volume_claim_templates_hash() {
    let mut old = revision("cs-v1", tpl(json!([{"name": "main", "image": "a:1"}])));
    let mut new = revision("cs-v2", tpl(json!([{"name": "main", "image": "a:2"}])));
    let set = |r: &mut ControllerRevision, h: &str| {
        r.metadata.annotations = Some(BTreeMap::from([(
            keys::CLONESET_VOLUME_CLAIM_TEMPLATE_HASH_ANNOTATION.to_string(),
            h.to_string(),
        )]));
    };
    let gate = UpdateOptions {
        features: Features {
            recreate_on_volume_claim_templates_change: true,
            ..Default::default()
        },
        ..Default::default()
    };
    // Missing on either side: no opinion.
    assert!(spec::calculate(Some(&old), &new, "cs-v2".into(), &gate).is_ok());
    set(&mut old, "1");
    set(&mut new, "2");
    assert_eq!(
        spec::calculate(Some(&old), &new, "cs-v2".into(), &gate),
        Err(NotInPlace::VolumeClaimTemplatesChanged)
    );
    let ignoring = UpdateOptions {
        ignore_volume_claim_templates_hash_diff: true,
        ..gate.clone()
    };
    assert!(spec::calculate(Some(&old), &new, "cs-v2".into(), &ignoring).is_ok());
    assert!(spec::calculate(Some(&old), &new, "cs-v2".into(), &UpdateOptions::default()).is_ok());
    set(&mut new, "1");
    assert!(spec::calculate(Some(&old), &new, "cs-v2".into(), &gate).is_ok());
}

#[test]
fn metadata_patch_applies_to_pod_metadata() {
    let mut meta = ObjectMeta {
        labels: Some(BTreeMap::from([
            ("a".to_string(), "1".to_string()),
            ("b".to_string(), "2".to_string()),
        ])),
        ..Default::default()
    };
    let patch = json!({"metadata": {"labels": {"a": "9", "b": null}, "annotations": {"x": "y"}, "finalizers": ["f"]}});
    spec::apply_metadata_patch(&mut meta, patch.to_string().as_bytes()).expect("valid patch");
    assert_eq!(
        meta.labels,
        Some(BTreeMap::from([("a".to_string(), "9".to_string())]))
    );
    assert_eq!(
        meta.annotations,
        Some(BTreeMap::from([("x".to_string(), "y".to_string())]))
    );
    assert!(meta.finalizers.is_none());
    assert!(spec::apply_metadata_patch(&mut meta, b"not json").is_err());
}

#[test]
fn update_spec_round_trips_through_the_grace_annotation() {
    let env =
        json!({"name": "V", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['v']"}}});
    let old = json!({"metadata": {"labels": {"v": "1", "o": "1"}}, "spec": {"containers": [{"name": "main", "image": "a:1", "env": [env.clone()]}]}});
    let new = json!({"metadata": {"labels": {"v": "2", "o": "2"}}, "spec": {"containers": [{"name": "main", "image": "a:2", "env": [env]}]}});
    let spec = calc(
        old,
        new,
        &UpdateOptions {
            grace_period_seconds: 5,
            ..Default::default()
        },
    )
    .expect("in place");
    let text = spec.to_annotation_value().expect("serializes");
    let wire: Value = serde_json::from_str(&text).expect("json");
    // Go encodes []byte as base64: metaDataPatch must be a string on the wire.
    assert!(wire["metaDataPatch"].is_string(), "{wire}");
    let back = UpdateSpec::from_grace_annotation(Some(&BTreeMap::from([(
        keys::INPLACE_UPDATE_GRACE_ANNOTATION.to_string(),
        text,
    )])))
    .expect("readable")
    .expect("present");
    assert_eq!(back, spec);
}
