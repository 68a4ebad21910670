use super::*;
use ratatui::crossterm::event::KeyEventKind;

fn key(c: KeyCode) -> KeyEvent {
    KeyEvent::new_with_kind(c, KeyModifiers::NONE, KeyEventKind::Press)
}

fn model(n: usize) -> LiveModel {
    let mut m = LiveModel::new(
        "cloneset/web",
        "default",
        jiff::Timestamp::UNIX_EPOCH,
        false,
    );
    m.set_pods(
        (0..n)
            .map(|i| PodView {
                name: format!("web-{i:04}"),
                namespace: format!("ns-{i}"),
                ..Default::default()
            })
            .collect(),
    );
    m.page = 10;
    m
}

#[test]
fn scrolling_keeps_selection_visible() {
    let mut m = model(100);
    m.on_key(key(KeyCode::PageDown));
    assert_eq!(m.selected, 10);
    assert_eq!(m.window(10), (1, 11));
    m.on_key(key(KeyCode::End));
    assert_eq!(m.selected, 99);
    assert_eq!(m.window(10), (90, 100));
    m.on_key(key(KeyCode::Home));
    assert_eq!((m.selected, m.window(10)), (0, (0, 10)));
    m.on_key(key(KeyCode::Up));
    assert_eq!(m.selected, 0);
}

#[test]
fn filter_and_actions() {
    let mut m = model(30);
    m.on_key(key(KeyCode::Char('/')));
    for c in "0002".chars() {
        m.on_key(key(KeyCode::Char(c)));
    }
    m.on_key(key(KeyCode::Enter));
    let names: Vec<&str> = m.visible().iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, vec!["web-0002"]);
    assert_eq!(
        m.on_key(key(KeyCode::Char('r'))),
        Some(Action::Recreate {
            namespace: "ns-2".into(),
            pod: "web-0002".into()
        })
    );
    // No rollout loaded yet: partition keys do nothing.
    assert_eq!(m.on_key(key(KeyCode::Char('+'))), None);
    assert_eq!(m.on_key(key(KeyCode::Char('?'))), None);
    assert!(m.show_help);
    assert_eq!(m.on_key(key(KeyCode::Char('x'))), None);
    assert!(!m.show_help);
    assert_eq!(m.on_key(key(KeyCode::Char('q'))), Some(Action::Quit));
}

fn press(c: KeyCode) -> Input {
    Input::Term(TermEvent::Key(key(c)))
}

fn kube_pod(name: &str, owner: &str, rv: &str) -> k8s_openapi::api::core::v1::Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "resourceVersion": rv,
            "ownerReferences": [{"apiVersion": "apps.kruise.io/v1beta1", "kind": "CloneSet",
                "name": "web", "uid": owner, "controller": true}]}
    }))
    .expect("pod")
}

fn pod_ev(ev: kube::runtime::watcher::Event<k8s_openapi::api::core::v1::Pod>) -> Input {
    Input::Watch(Update::Pod(Box::new(ev)))
}

fn event_ev(name: &str, about: &str) -> Input {
    let e: k8s_openapi::api::core::v1::Event = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name},
        "involvedObject": {"kind": "Pod", "name": about},
        "reason": "Pulled",
    }))
    .expect("event");
    Input::Watch(Update::Event(Box::new(
        kube::runtime::watcher::Event::Apply(e),
    )))
}

fn cloneset(uid: &str, paused: bool) -> RolloutView {
    RolloutView::from_json(&serde_json::json!({
        "apiVersion": "apps.kruise.io/v1beta1", "kind": "CloneSet",
        "metadata": {"name": "web", "namespace": "default", "uid": uid},
        "spec": {"replicas": 3, "updateStrategy": {"rollingUpdate": {"paused": paused}}}
    }))
}

/// Which inputs redraw, one row per kind of input the loop sees.
#[test]
fn apply_says_when_to_redraw() {
    use ratatui::crossterm::event::KeyEventState;
    let release = Input::Term(TermEvent::Key(KeyEvent {
        code: KeyCode::Char('j'),
        modifiers: KeyModifiers::NONE,
        kind: KeyEventKind::Release,
        state: KeyEventState::NONE,
    }));
    let cases: Vec<(&str, Input, bool)> = vec![
        ("key press", press(KeyCode::Down), true),
        ("key release", release, false),
        ("resize", Input::Term(TermEvent::Resize(80, 24)), true),
        ("focus", Input::Term(TermEvent::FocusGained), false),
        (
            "tick, nothing timed on screen",
            Input::Tick(jiff::Timestamp::UNIX_EPOCH),
            false,
        ),
        ("action result", Input::ActionDone("paused".into()), true),
        ("watch error", Input::WatchError("boom".into()), true),
        (
            "list starts",
            pod_ev(kube::runtime::watcher::Event::Init),
            false,
        ),
    ];
    for (what, input, want) in cases {
        let mut m = model(3);
        assert_eq!(m.apply(input), want, "{what}");
    }
}

#[test]
fn keys_queue_actions_with_the_view_they_were_made_on() {
    let mut m = model(3);
    // No workload yet: nothing to act on, but the key still redraws.
    assert!(m.apply(press(KeyCode::Char('p'))));
    assert!(m.outbox.is_empty());
    m.rollout = Some(cloneset("u1", false));
    m.flash = "old result".into();
    m.apply(press(KeyCode::Char('p')));
    m.apply(press(KeyCode::Char('r')));
    let got: Vec<Action> = m.outbox.iter().map(|r| r.action.clone()).collect();
    assert_eq!(
        got,
        vec![
            Action::SetPaused(true),
            Action::Recreate {
                namespace: "ns-0".into(),
                pod: "web-0000".into()
            }
        ]
    );
    assert_eq!(m.outbox[0].view, cloneset("u1", false));
    assert!(m.flash.is_empty(), "a key press clears the last result");
    assert!(!m.quit);
    m.apply(Input::ActionDone("cloneset/web paused".into()));
    assert_eq!(m.flash, "cloneset/web paused");
    m.apply(press(KeyCode::Char('q')));
    assert!(m.quit);
}

/// A live model of `target` (named `web`) with nothing watched yet.
fn watching(target: &str) -> LiveModel {
    let mut m = LiveModel::new(target, "default", jiff::Timestamp::UNIX_EPOCH, false);
    m.feeds.name = "web".into();
    m
}

/// Pods listed before their workload are read again when it arrives: only its own remain, with
/// the revision the kind reads (a UnitedDeployment's from `apps.kruise.io/controller-revision-hash`).
#[test]
fn pods_listed_before_the_workload_are_read_again_with_its_kind() {
    use kube::runtime::watcher::Event;
    let mut m = watching("ud/web");
    let mut pod = kube_pod("web-a-x", "cs-1", "1");
    pod.metadata.labels = Some(
        [
            (
                kruise_api::keys::KRUISE_CONTROLLER_REVISION_HASH_LABEL.to_owned(),
                "ud-rev".to_owned(),
            ),
            ("controller-revision-hash".to_owned(), "cs-rev".to_owned()),
        ]
        .into(),
    );
    m.apply(pod_ev(Event::Init));
    m.apply(pod_ev(Event::InitApply(pod)));
    assert!(m.apply(pod_ev(Event::InitDone)));
    assert_eq!(m.pods.len(), 1);
    let obj: kube::api::DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "apps.kruise.io/v1alpha1", "kind": "UnitedDeployment",
        "metadata": {"name": "web", "uid": "ud-1"},
        "spec": {"replicas": 1}
    }))
    .expect("object");
    assert!(m.apply(Input::Watch(Update::Object(Box::new(Event::Apply(obj))))));
    assert_eq!(
        m.pods.len(),
        1,
        "a UnitedDeployment counts the Pods its selector matches"
    );
    assert_eq!(m.pods[0].revision, "ud-rev");

    // A CloneSet's Pods are its own: one of another owner listed first goes once it is known.
    let mut m = watching("cloneset/web");
    m.apply(pod_ev(Event::Init));
    for (name, owner) in [("web-a", "u1"), ("other", "u2")] {
        m.apply(pod_ev(Event::InitApply(kube_pod(name, owner, "1"))));
    }
    m.apply(pod_ev(Event::InitDone));
    assert_eq!(m.pods.len(), 2, "no owner known yet");
    let obj: kube::api::DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "apps.kruise.io/v1beta1", "kind": "CloneSet",
        "metadata": {"name": "web", "uid": "u1"}, "spec": {"replicas": 1}
    }))
    .expect("object");
    assert!(m.apply(Input::Watch(Update::Object(Box::new(Event::Apply(obj))))));
    let names: Vec<&str> = m.pods.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, vec!["web-a"]);
}

#[test]
fn pod_watch_builds_the_owned_pods_once_listed() {
    use kube::runtime::watcher::Event;
    let mut m = watching("cloneset/web");
    m.rollout = Some(cloneset("u1", false));
    assert!(!m.apply(pod_ev(Event::Init)));
    for (name, owner) in [("web-b", "u1"), ("web-a", "u1"), ("other", "u2")] {
        assert!(!m.apply(pod_ev(Event::InitApply(kube_pod(name, owner, "1")))));
    }
    assert!(
        m.pods.is_empty(),
        "nothing shown before the list is complete"
    );
    assert!(m.apply(pod_ev(Event::InitDone)));
    let names: Vec<&str> = m.pods.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, vec!["web-a", "web-b"]);
    assert!(m.apply(pod_ev(Event::Delete(kube_pod("web-a", "u1", "1")))));
    assert_eq!(m.pods.len(), 1);
    // Events: only those about the workload's Pods are shown, and others do not redraw.
    assert!(!m.apply(event_ev("e1", "other")));
    assert!(m.apply(event_ev("e2", "web-b")));
    assert_eq!(m.events.len(), 1);
    assert_eq!(m.events[0].object, "pod/web-b");
}

#[test]
fn object_watch_sets_the_rollout_and_connection() {
    use kube::runtime::watcher::Event;
    let mut m = watching("cloneset/web");
    m.apply(Input::WatchError("connection reset".into()));
    assert!(!m.connected);
    let obj: kube::api::DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "apps.kruise.io/v1beta1", "kind": "CloneSet",
        "metadata": {"name": "web", "uid": "u1"},
        "spec": {"replicas": 3, "updateStrategy": {"rollingUpdate": {"paused": true}}}
    }))
    .expect("object");
    let ev = |e| Input::Watch(Update::Object(Box::new(e)));
    assert!(m.apply(ev(Event::Apply(obj.clone()))));
    assert!(m.connected);
    assert_eq!(
        m.rollout.as_ref().map(|r| (r.uid.as_str(), r.paused)),
        Some(("u1", true))
    );
    assert!(m.apply(ev(Event::Delete(obj))));
    assert!(m.rollout.is_none());
}

#[test]
fn ticks_redraw_for_countdowns_and_every_tenth_for_event_ages() {
    let now = jiff::Timestamp::UNIX_EPOCH;
    let mut m = model(2);
    m.events = vec![EventRow {
        time: None,
        type_: "Normal".into(),
        reason: "Pulled".into(),
        object: "pod/web-0000".into(),
        message: String::new(),
    }];
    let redraws: Vec<bool> = (0..10).map(|_| m.apply(Input::Tick(now))).collect();
    assert_eq!(redraws.iter().filter(|r| **r).count(), 1);
    assert!(redraws[9]);
    m.pods[0].inplace = Some(crate::view::InPlaceProgress {
        grace_seconds: 30,
        ..Default::default()
    });
    assert!(m.apply(Input::Tick(now)));
}
