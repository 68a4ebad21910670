use super::*;
use crate::inplace::batches::PreCheckPending;
use crate::inplace::completion::NotCompleted;
use crate::inplace::conditions;
use crate::inplace::hooks::{CloneSetHooks, InPlaceHooks};
use crate::inplace::patch::{self, EngineError};
use crate::inplace::plan::{self, GraceStep, RefreshStep};
use crate::inplace::spec::UpdateOptions;
use k8s_openapi::api::core::v1::{ConfigMapKeySelector, ContainerResizePolicy, PodCondition};
use kruise_api::appspub::{InPlaceUpdateState, LifecycleStateType, UpdateSpec};
use std::time::Duration;

const H: CloneSetHooks = CloneSetHooks;

fn state_of(p: &Pod) -> InPlaceUpdateState {
    InPlaceUpdateState::from_annotations(p.metadata.annotations.as_ref())
        .expect("readable")
        .expect("present")
}

fn images(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn spec_images(pairs: &[(&str, &str)]) -> UpdateSpec {
    UpdateSpec {
        revision: "cs-v2".into(),
        container_images: images(pairs),
        ..Default::default()
    }
}

fn prio(c: Container, p: i32) -> Container {
    with_env(
        c,
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
        },
    )
}

fn condition<'a>(p: &'a Pod, t: &str) -> Option<&'a PodCondition> {
    p.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == t)
}

/// Pretend the kubelet restarted every container with its spec image.
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
                s.resources = c.resources.clone();
            }
        }
    }
}

#[test]
fn update_without_grace_patches_images_and_records_state() {
    let p = pod(vec![
        container("main", "nginx:1"),
        container("side", "busybox:1"),
    ]);
    let opts = UpdateOptions {
        lifecycle_state: Some(LifecycleStateType::Updating),
        ..Default::default()
    };
    let w = plan::plan_update(&p, &spec_images(&[("main", "nginx:2")]), &H, &opts, ts(0))
        .expect("plan");
    assert!(w.resize.is_none());
    assert_eq!(image_of(&w.pod, "main"), Some("nginx:2"));
    assert_eq!(image_of(&w.pod, "side"), Some("busybox:1"));
    assert_eq!(
        label(&w.pod, keys::CONTROLLER_REVISION_HASH_LABEL).map(String::as_str),
        Some("cs-v2")
    );
    assert_eq!(
        label(&w.pod, keys::POD_TEMPLATE_HASH_LABEL).map(String::as_str),
        Some("v2")
    );
    assert_eq!(
        label(&w.pod, keys::LIFECYCLE_STATE_LABEL).map(String::as_str),
        Some("Updating")
    );
    assert_eq!(
        annotation(&w.pod, keys::LIFECYCLE_TIMESTAMP_ANNOTATION).map(String::as_str),
        Some("2027-01-15T08:00:00Z")
    );
    assert!(annotation(&w.pod, keys::INPLACE_UPDATE_GRACE_ANNOTATION).is_none());
    let s = state_of(&w.pod);
    assert_eq!(s.revision, "cs-v2");
    assert_eq!(s.update_timestamp.0, ts(0));
    assert!(s.update_images && !s.update_resources && !s.update_env_from_metadata);
    assert_eq!(s.last_container_statuses.len(), 1);
    assert_eq!(s.last_container_statuses["main"].image_id, "id-nginx:1");
    assert!(s.next_container_images.is_empty());
    assert!(s.pre_check_before_next.is_none());
    assert_eq!(s.container_batches_record.len(), 1);
    assert_eq!(
        s.container_batches_record[0].containers,
        vec!["main".to_string()]
    );
}

#[test]
fn update_drops_the_legacy_state_key() {
    let mut p = pod(vec![container("main", "a:1")]);
    set_annotation(&mut p, keys::INPLACE_UPDATE_STATE_ANNOTATION_OLD, "{}");
    let w = plan::plan_update(
        &p,
        &spec_images(&[("main", "a:2")]),
        &H,
        &UpdateOptions::default(),
        ts(0),
    )
    .expect("plan");
    assert!(annotation(&w.pod, keys::INPLACE_UPDATE_STATE_ANNOTATION_OLD).is_none());
}

#[test]
fn update_with_grace_parks_the_spec() {
    let p = pod(vec![container("main", "a:1")]);
    let mut spec = spec_images(&[("main", "a:2")]);
    spec.grace_seconds = 30;
    let w = plan::plan_update(&p, &spec, &H, &UpdateOptions::default(), ts(0)).expect("plan");
    assert_eq!(image_of(&w.pod, "main"), Some("a:1"));
    let parked = UpdateSpec::from_grace_annotation(w.pod.metadata.annotations.as_ref())
        .expect("readable")
        .expect("present");
    assert_eq!(parked, spec);
    let s = state_of(&w.pod);
    assert!(s.container_batches_record.is_empty());
    assert!(s.last_container_statuses.is_empty());
    // Not complete while the grace period runs.
    assert_eq!(
        H.pod_update_completed(&w.pod),
        Err(NotCompleted::GracePending)
    );
}

#[test]
fn grace_period_timeline() {
    let p = pod(vec![container("main", "a:1")]);
    let mut spec = spec_images(&[("main", "a:2")]);
    spec.grace_seconds = 30;
    let parked = plan::plan_update(&p, &spec, &H, &UpdateOptions::default(), ts(0))
        .expect("plan")
        .pod;
    let opts = UpdateOptions::default();
    let at = |secs: i64, millis: i64| {
        ts(secs)
            .checked_add(jiff::SignedDuration::from_millis(millis))
            .expect("time")
    };
    assert_eq!(
        plan::plan_finish_grace(&parked, &H, &opts, at(10, 0)).expect("plan"),
        GraceStep::Wait(Duration::from_secs(20))
    );
    // Rounded up to whole seconds.
    assert_eq!(
        plan::plan_finish_grace(&parked, &H, &opts, at(10, 500)).expect("plan"),
        GraceStep::Wait(Duration::from_secs(20))
    );
    assert_eq!(
        plan::plan_finish_grace(&parked, &H, &opts, at(29, 999)).expect("plan"),
        GraceStep::Wait(Duration::from_secs(1))
    );
    let GraceStep::Apply(w) = plan::plan_finish_grace(&parked, &H, &opts, ts(30)).expect("plan")
    else {
        panic!("grace should end at 30s");
    };
    assert_eq!(image_of(&w.pod, "main"), Some("a:2"));
    assert!(annotation(&w.pod, keys::INPLACE_UPDATE_GRACE_ANNOTATION).is_none());
    let s = state_of(&w.pod);
    assert_eq!(s.update_timestamp.0, ts(0));
    assert_eq!(s.container_batches_record[0].timestamp.0, ts(30));
    assert_eq!(s.last_container_statuses["main"].image_id, "id-a:1");
    // And refresh says the same.
    assert!(matches!(
        plan::plan_refresh(&parked, &H, &opts, ts(5)).expect("plan"),
        RefreshStep::Grace(GraceStep::Wait(_))
    ));
}

#[test]
fn grace_dropped_when_revision_moved_on() {
    let p = pod(vec![container("main", "a:1")]);
    let mut spec = spec_images(&[("main", "a:2")]);
    spec.grace_seconds = 30;
    let mut parked = plan::plan_update(&p, &spec, &H, &UpdateOptions::default(), ts(0))
        .expect("plan")
        .pod;
    H.write_revision(&mut parked, "cs-v3");
    let GraceStep::Drop(w) =
        plan::plan_finish_grace(&parked, &H, &UpdateOptions::default(), ts(100)).expect("plan")
    else {
        panic!("should drop");
    };
    assert!(annotation(&w.pod, keys::INPLACE_UPDATE_GRACE_ANNOTATION).is_none());
    assert_eq!(image_of(&w.pod, "main"), Some("a:1"));
}

#[test]
fn grace_without_state_is_an_error() {
    let mut p = pod(vec![container("main", "a:1")]);
    let spec = spec_images(&[("main", "a:2")]);
    set_annotation(
        &mut p,
        keys::INPLACE_UPDATE_GRACE_ANNOTATION,
        &spec.to_annotation_value().expect("json"),
    );
    assert!(matches!(
        plan::plan_finish_grace(&p, &H, &UpdateOptions::default(), ts(0)),
        Err(EngineError::GraceWithoutState)
    ));
    set_annotation(&mut p, keys::INPLACE_UPDATE_GRACE_ANNOTATION, "{broken");
    assert!(matches!(
        plan::plan_finish_grace(&p, &H, &UpdateOptions::default(), ts(0)),
        Err(EngineError::Annotation(_))
    ));
}

#[test]
fn priority_batches_walk_through_refresh() {
    let p = pod(vec![
        prio(container("low", "l:1"), 0),
        prio(container("high", "h:1"), 10),
        prio(container("mid", "m:1"), 5),
    ]);
    let opts = UpdateOptions::default();
    let spec = spec_images(&[("low", "l:2"), ("high", "h:2"), ("mid", "m:2")]);
    let mut cur = plan::plan_update(&p, &spec, &H, &opts, ts(0))
        .expect("plan")
        .pod;
    let s = state_of(&cur);
    assert_eq!(image_of(&cur, "high"), Some("h:2"));
    assert_eq!(image_of(&cur, "mid"), Some("m:1"));
    assert_eq!(
        s.next_container_images,
        images(&[("low", "l:2"), ("mid", "m:2")])
    );
    assert_eq!(
        s.pre_check_before_next
            .as_ref()
            .map(|p| p.containers_required_ready.clone()),
        Some(vec!["high".to_string()])
    );
    assert_eq!(
        H.pod_update_completed(&cur),
        Err(NotCompleted::NextBatchPending)
    );

    // Kubelet has not restarted "high" yet.
    assert_eq!(
        plan::plan_refresh(&cur, &H, &opts, ts(1)).expect("plan"),
        RefreshStep::InProgress(NotCompleted::ImageNotChanged("high".into()))
    );
    // Restarted but not ready: the next batch waits.
    kubelet_catches_up(&mut cur);
    if let Some(st) = cur
        .status
        .as_mut()
        .and_then(|s| s.container_statuses.as_mut())
    {
        for s in st.iter_mut().filter(|s| s.name == "high") {
            s.ready = false;
        }
    }
    assert_eq!(
        plan::plan_refresh(&cur, &H, &opts, ts(2)).expect("plan"),
        RefreshStep::WaitingForBatch(PreCheckPending::NotReady("high".into()))
    );
    if let Some(st) = cur
        .status
        .as_mut()
        .and_then(|s| s.container_statuses.as_mut())
    {
        for s in st.iter_mut() {
            s.ready = true;
        }
    }
    let RefreshStep::NextBatch(w) = plan::plan_refresh(&cur, &H, &opts, ts(3)).expect("plan")
    else {
        panic!("second batch expected");
    };
    cur = w.pod;
    let s = state_of(&cur);
    assert_eq!(image_of(&cur, "mid"), Some("m:2"));
    assert_eq!(image_of(&cur, "low"), Some("l:1"));
    assert_eq!(s.next_container_images, images(&[("low", "l:2")]));
    assert_eq!(s.container_batches_record.len(), 2);
    assert_eq!(
        s.container_batches_record[1].containers,
        vec!["mid".to_string()]
    );
    assert_eq!(s.container_batches_record[1].timestamp.0, ts(3));
    assert_eq!(s.last_container_statuses["high"].image_id, "id-h:1");
    assert_eq!(s.last_container_statuses["mid"].image_id, "id-m:1");

    kubelet_catches_up(&mut cur);
    let RefreshStep::NextBatch(w) = plan::plan_refresh(&cur, &H, &opts, ts(4)).expect("plan")
    else {
        panic!("third batch expected");
    };
    cur = w.pod;
    let s = state_of(&cur);
    assert!(s.next_container_images.is_empty());
    assert!(s.pre_check_before_next.is_none());
    assert_eq!(
        s.container_batches_record
            .iter()
            .map(|b| b.containers.clone())
            .collect::<Vec<_>>(),
        vec![
            vec!["high".to_string()],
            vec!["mid".to_string()],
            vec!["low".to_string()]
        ]
    );
    kubelet_catches_up(&mut cur);
    assert_eq!(H.pod_update_completed(&cur), Ok(()));
    let RefreshStep::MarkReady(done) = plan::plan_refresh(&cur, &H, &opts, ts(5)).expect("plan")
    else {
        panic!("should mark ready");
    };
    let c = condition(&done, keys::INPLACE_UPDATE_READY).expect("condition");
    assert_eq!(c.status, "True");
    assert_eq!(c.last_transition_time.as_ref().map(|t| t.0), Some(ts(5)));
    // Once True, nothing more to do.
    assert_eq!(
        plan::plan_refresh(&done, &H, &opts, ts(6)).expect("plan"),
        RefreshStep::Idle
    );
}

#[test]
fn refresh_without_gate_or_state() {
    let mut p = pod(vec![container("main", "a:1")]);
    // No state, gate present: the condition is set True (pods created with the gate).
    assert!(matches!(
        plan::plan_refresh(&p, &H, &UpdateOptions::default(), ts(0)).expect("plan"),
        RefreshStep::MarkReady(_)
    ));
    if let Some(s) = p.spec.as_mut() {
        s.readiness_gates = None;
    }
    assert_eq!(
        plan::plan_refresh(&p, &H, &UpdateOptions::default(), ts(0)).expect("plan"),
        RefreshStep::Idle
    );
}

#[test]
fn unready_condition_also_drops_ready() {
    let mut p = pod(vec![container("main", "a:1")]);
    if let Some(s) = p.status.as_mut() {
        s.conditions = Some(vec![
            PodCondition {
                type_: "ContainersReady".into(),
                status: "True".into(),
                ..Default::default()
            },
            PodCondition {
                type_: "Ready".into(),
                status: "True".into(),
                ..Default::default()
            },
            PodCondition {
                type_: keys::INPLACE_UPDATE_READY.into(),
                status: "True".into(),
                ..Default::default()
            },
        ]);
    }
    let out = conditions::with_inplace_condition(
        &p,
        false,
        Some(keys::REASON_START_INPLACE_UPDATE),
        ts(0),
    )
    .expect("changed");
    let c = condition(&out, keys::INPLACE_UPDATE_READY).expect("condition");
    assert_eq!(
        (c.status.as_str(), c.reason.as_deref()),
        ("False", Some("StartInPlaceUpdate"))
    );
    let ready = condition(&out, "Ready").expect("ready");
    assert_eq!(ready.status, "False");
    assert_eq!(ready.reason.as_deref(), Some("ReadinessGatesNotReady"));
    assert!(
        ready
            .message
            .as_deref()
            .is_some_and(|m| m.contains(keys::INPLACE_UPDATE_READY))
    );
    // Same condition again: nothing to write.
    assert!(
        conditions::with_inplace_condition(
            &out,
            false,
            Some(keys::REASON_START_INPLACE_UPDATE),
            ts(1)
        )
        .is_none()
    );
    // Back to True: Ready is left to the kubelet.
    let back = conditions::with_inplace_condition(&out, true, None, ts(2)).expect("changed");
    assert_eq!(
        condition(&back, "Ready").map(|c| c.status.as_str()),
        Some("False")
    );
}

#[test]
fn resources_go_through_resize() {
    let mut main = container("main", "a:1");
    main.resources = Some(resources(
        &[("cpu", "100m"), ("memory", "64Mi")],
        &[("cpu", "1")],
    ));
    let p = pod(vec![main]);
    let spec = UpdateSpec {
        revision: "cs-v2".into(),
        container_resources: BTreeMap::from([(
            "main".to_string(),
            resources(&[("cpu", "200m"), ("memory", "64Mi")], &[("cpu", "1000m")]),
        )]),
        ..Default::default()
    };
    let w = plan::plan_update(&p, &spec, &H, &UpdateOptions::default(), ts(0)).expect("plan");
    // The spec is left alone; only changed quantities are sent.
    assert_eq!(w.pod.spec, p.spec);
    assert_eq!(
        w.resize,
        Some(
            json!({"spec": {"containers": [{"name": "main", "resources": {"requests": {"cpu": "200m"}}}]}})
        )
    );
    let s = state_of(&w.pod);
    assert!(s.update_resources && !s.update_images);

    // Without the subresource the spec carries the new resources.
    let opts = UpdateOptions {
        use_resize_subresource: false,
        ..Default::default()
    };
    let w = plan::plan_update(&p, &spec, &H, &opts, ts(0)).expect("plan");
    assert!(w.resize.is_none());
    let r = w
        .pod
        .spec
        .as_ref()
        .and_then(|s| s.containers[0].resources.clone())
        .expect("resources");
    assert_eq!(
        r.requests.as_ref().map(|m| m["cpu"].0.as_str()),
        Some("200m")
    );
}

#[test]
fn resize_patch_skips_applied_quantities() {
    let mut main = container("main", "a:1");
    main.resources = Some(resources(&[("cpu", "1")], &[]));
    let p = pod(vec![main]);
    let expected = BTreeMap::from([("main".to_string(), resources(&[("cpu", "1000m")], &[]))]);
    assert_eq!(patch::resize_patch(&p, &expected), None);
}

#[test]
fn env_from_metadata_update_writes_labels() {
    let main = with_env(
        container("main", "a:1"),
        field_env("V", "metadata.labels['v']"),
    );
    let p = pod(vec![main, container("side", "b:1")]);
    let spec = UpdateSpec {
        revision: "cs-v2".into(),
        container_ref_metadata: BTreeMap::from([(
            "main".to_string(),
            ObjectMeta {
                labels: Some(BTreeMap::from([("v".to_string(), "2".to_string())])),
                ..Default::default()
            },
        )]),
        update_env_from_metadata: true,
        meta_data_patch: Some(k8s_openapi::ByteString(
            br#"{"metadata":{"labels":{"plain":"x"},"annotations":{"note":"n"}}}"#.to_vec(),
        )),
        ..Default::default()
    };
    let w = plan::plan_update(&p, &spec, &H, &UpdateOptions::default(), ts(0)).expect("plan");
    assert_eq!(label(&w.pod, "v").map(String::as_str), Some("2"));
    assert_eq!(label(&w.pod, "plain").map(String::as_str), Some("x"));
    assert_eq!(annotation(&w.pod, "note").map(String::as_str), Some("n"));
    let s = state_of(&w.pod);
    assert!(s.update_env_from_metadata);
    assert_eq!(
        s.container_batches_record[0].containers,
        vec!["main".to_string()]
    );
}

#[test]
fn needs_be_unready_table() {
    let gate_pod = |policy: Option<(&str, &str)>| {
        let mut c = container("main", "a:1");
        c.resize_policy = policy.map(|(r, p)| {
            vec![ContainerResizePolicy {
                resource_name: r.into(),
                restart_policy: p.into(),
            }]
        });
        pod(vec![c])
    };
    let cpu_only = UpdateSpec {
        container_resources: BTreeMap::from([(
            "main".to_string(),
            resources(&[("cpu", "2")], &[]),
        )]),
        ..Default::default()
    };
    let with_image = UpdateSpec {
        container_images: images(&[("main", "a:2")]),
        ..cpu_only.clone()
    };
    let vertical_off = UpdateOptions {
        features: crate::inplace::Features {
            vertical_scaling: false,
            ..Default::default()
        },
        ..Default::default()
    };
    let on = super::vertical();
    let cases: Vec<(&str, Pod, &UpdateSpec, &UpdateOptions, bool)> = vec![
        ("image change", gate_pod(None), &with_image, &on, true),
        ("cpu only, no policy", gate_pod(None), &cpu_only, &on, false),
        (
            "cpu only, cpu restarts",
            gate_pod(Some(("cpu", "RestartContainer"))),
            &cpu_only,
            &on,
            true,
        ),
        (
            "cpu only, memory restarts",
            gate_pod(Some(("memory", "RestartContainer"))),
            &cpu_only,
            &on,
            false,
        ),
        (
            "cpu only, cpu not required",
            gate_pod(Some(("cpu", "NotRequired"))),
            &cpu_only,
            &on,
            false,
        ),
        (
            "vertical gate off",
            gate_pod(None),
            &cpu_only,
            &vertical_off,
            true,
        ),
    ];
    for (name, p, spec, opts, want) in cases {
        assert_eq!(
            conditions::default_pod_needs_be_unready(&p, spec, opts),
            want,
            "{name}"
        );
    }
    let mut no_gate = gate_pod(Some(("cpu", "RestartContainer")));
    if let Some(s) = no_gate.spec.as_mut() {
        s.readiness_gates = None;
    }
    assert!(!conditions::default_pod_needs_be_unready(
        &no_gate,
        &with_image,
        &on
    ));
    assert!(!conditions::default_pod_needs_be_unready(
        &no_gate, &cpu_only, &on
    ));
}

#[test]
fn revision_matching() {
    let mut p = pod(vec![container("main", "a:1")]);
    assert!(H.equals_revision(&p, "cs-v1"));
    assert!(H.equals_revision(&p, "v1"));
    assert!(!H.equals_revision(&p, "cs-v2"));
    H.write_revision(&mut p, "cs-7f9c");
    assert!(H.equals_revision(&p, "cs-7f9c"));
    assert_eq!(
        label(&p, keys::POD_TEMPLATE_HASH_LABEL).map(String::as_str),
        Some("7f9c")
    );
}

/// Upstream `EqualToRevisionHash` compares a missing label as "": an unlabelled pod matches only
/// a revision whose short hash is empty (the engine's old copy refused even that).
#[test]
fn revision_matching_of_unlabelled_pods_follows_upstream() {
    let mut p = pod(vec![container("main", "a:1")]);
    p.metadata.labels = None;
    assert!(!H.equals_revision(&p, "cs-v1"));
    assert!(H.equals_revision(&p, "cs-"));
    assert!(H.equals_revision(&p, ""));
}

/// The pure verdict the workloads ask before choosing in place or recreate.
#[test]
fn can_update_in_place_table() {
    let tpl = |c: Value| json!({"metadata": {"labels": {"app": "web"}}, "spec": {"containers": c}});
    let old = revision("cs-v1", tpl(json!([{"name": "main", "image": "a:1"}])));
    let image = revision("cs-v2", tpl(json!([{"name": "main", "image": "a:2"}])));
    let command = revision(
        "cs-v3",
        tpl(json!([{"name": "main", "image": "a:1", "command": ["sh"]}])),
    );
    let opts = UpdateOptions::default();
    let cases: [(Option<&ControllerRevision>, &ControllerRevision, bool); 4] = [
        (Some(&old), &image, true),
        (Some(&old), &old, true),
        (Some(&old), &command, false),
        (None, &image, false),
    ];
    for (from, to, want) in cases {
        let got = plan::can_update_in_place(&H, from, to, &opts);
        assert_eq!(
            got.is_ok(),
            want,
            "{:?} -> {:?}: {got:?}",
            from.and_then(|r| r.metadata.name.as_deref()),
            to.metadata.name
        );
    }
}

/// `refresh_unwritten` answers for every step that writes nothing exactly what `refresh`
/// answers (its callers skip `refresh` then), and declines every step that writes.
#[tokio::test]
async fn refresh_unwritten_answers_as_refresh_without_a_write() {
    use crate::inplace::InPlaceControl;
    let opts = UpdateOptions::default();
    let p = pod(vec![container("main", "a:1")]);
    let updated = plan::plan_update(&p, &spec_images(&[("main", "a:2")]), &H, &opts, ts(0))
        .expect("plan")
        .pod;
    let mut parked_spec = spec_images(&[("main", "a:2")]);
    parked_spec.grace_seconds = 30;
    let parked = plan::plan_update(&p, &parked_spec, &H, &opts, ts(0))
        .expect("plan")
        .pod;
    let mut restarted = updated.clone();
    kubelet_catches_up(&mut restarted);
    let RefreshStep::MarkReady(done) =
        plan::plan_refresh(&restarted, &H, &opts, ts(1)).expect("plan")
    else {
        panic!("should mark ready");
    };
    // No API server behind it: a refresh that tried to write would fail.
    let cfg = kube::Config::new("http://127.0.0.1:9".parse().expect("url"));
    let control = InPlaceControl::new(kube::Client::try_from(cfg).expect("client"));
    for (what, pod, writes) in [
        ("container not restarted yet", &updated, false),
        ("grace period running", &parked, false),
        ("finished, condition True", &done, false),
        ("finished, condition not True yet", &restarted, true),
        ("grace period over", &parked, true),
    ] {
        let now = if what == "grace period over" {
            ts(40)
        } else {
            ts(5)
        };
        let unwritten = InPlaceControl::refresh_unwritten(&H, pod, &opts, now);
        assert_eq!(unwritten.is_none(), writes, "{what}");
        if let Some(u) = unwritten {
            let r = control.refresh(&H, pod, &opts, now).await.expect(what);
            assert_eq!(
                (u.requeue_after, u.pending, u.new_resource_version),
                (r.requeue_after, r.pending, r.new_resource_version),
                "{what}"
            );
        }
    }
    assert_eq!(
        InPlaceControl::refresh_unwritten(&H, &parked, &opts, ts(5)).and_then(|u| u.requeue_after),
        Some(Duration::from_secs(25))
    );
}
