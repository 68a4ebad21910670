//! The live view's state and its key handling. Everything here is pure: the event loop hands
//! every input to [`LiveModel::apply`] (watch changes, terminal events, clock ticks, results of
//! cluster actions) and draws when it returns true; rendering only reads the model.

use super::feeds::Feeds;
use crate::math;
use crate::status::{Decision, PodSummary, decide};
use crate::view::{PodView, RolloutView};
use crate::watch::Update;
use crate::workload::Kind;
use kube::api::ApiResource;
use ratatui::crossterm::event::{
    Event as TermEvent, KeyCode, KeyEvent, KeyEventKind, KeyModifiers,
};

#[derive(Debug, Clone, PartialEq)]
pub struct EventRow {
    pub time: Option<jiff::Timestamp>,
    pub type_: String,
    pub reason: String,
    pub object: String,
    pub message: String,
}

/// What a key press asks the event loop to do against the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    Quit,
    SetPaused(bool),
    SetPartition(i64),
    Promote,
    Recreate(String),
}

/// Everything the event loop sees, handed to [`LiveModel::apply`].
pub enum Input {
    /// A change from one of the watches (the workload, its Pods, the namespace's Events).
    Watch(Update),
    /// A watch failed and retries by itself; the message is shown.
    WatchError(String),
    /// A terminal event: key presses and resizes matter, the rest is ignored.
    Term(TermEvent),
    /// The clock moved on (once a second).
    Tick(jiff::Timestamp),
    /// A cluster action finished: what to show in the footer.
    ActionDone(String),
}

/// A cluster action for the loop's action task, with the workload as the model saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    pub action: Action,
    pub view: RolloutView,
}

#[derive(Debug, Clone)]
pub struct LiveModel {
    pub target: String,
    pub namespace: String,
    pub rollout: Option<RolloutView>,
    /// Sorted by name.
    pub pods: Vec<PodView>,
    /// Newest first.
    pub events: Vec<EventRow>,
    pub now: jiff::Timestamp,
    /// Index into `visible()`.
    pub selected: usize,
    /// First row of `visible()` shown in the table.
    pub offset: usize,
    /// Rows the table showed at the last draw, for PgUp/PgDn.
    pub page: usize,
    pub filter: String,
    pub editing_filter: bool,
    pub show_help: bool,
    pub color: bool,
    /// Result of the last action, shown in the footer.
    pub flash: String,
    pub connected: bool,
    /// The watch caches the view is built from.
    pub feeds: Feeds,
    /// Set once the user asked to leave.
    pub quit: bool,
    /// Cluster actions asked for and not yet handed to the action task.
    pub outbox: Vec<Request>,
}

impl LiveModel {
    pub fn new(target: &str, namespace: &str, now: jiff::Timestamp, color: bool) -> Self {
        LiveModel {
            target: target.to_string(),
            namespace: namespace.to_string(),
            rollout: None,
            pods: Vec::new(),
            events: Vec::new(),
            now,
            selected: 0,
            offset: 0,
            page: 10,
            filter: String::new(),
            editing_filter: false,
            show_help: false,
            color,
            flash: String::new(),
            connected: false,
            feeds: Feeds::default(),
            quit: false,
            outbox: Vec::new(),
        }
    }

    /// Points the model at the workload `name` whose objects are `resource`.
    pub fn watching(mut self, name: &str, resource: ApiResource) -> Self {
        self.feeds.name = name.to_string();
        self.feeds.resource = Some(resource);
        self
    }

    /// Takes one input; returns true when the screen must be redrawn.
    pub fn apply(&mut self, input: Input) -> bool {
        match input {
            Input::Watch(update) => self.apply_watch(update),
            Input::WatchError(e) => {
                self.flash = format!("watch error (retrying): {e}");
                self.connected = false;
                true
            }
            Input::Term(TermEvent::Key(k)) if k.kind == KeyEventKind::Press => {
                self.flash.clear();
                match self.on_key(k) {
                    Some(Action::Quit) => self.quit = true,
                    Some(action) => {
                        // Without a workload loaded there is nothing to act on.
                        if let Some(view) = self.rollout.clone() {
                            self.outbox.push(Request { action, view });
                        }
                    }
                    None => {}
                }
                true
            }
            Input::Term(TermEvent::Resize(..)) => true,
            Input::Term(_) => false,
            Input::Tick(now) => {
                // Ages and grace countdowns change with time alone; redraw only when one is shown.
                self.now = now;
                self.feeds.ticks += 1;
                // Event ages are coarse, so they refresh every 10 s; a grace countdown every second.
                self.has_countdown()
                    || (self.feeds.ticks.is_multiple_of(10) && !self.events.is_empty())
            }
            Input::ActionDone(msg) => {
                self.flash = msg;
                true
            }
        }
    }

    fn apply_watch(&mut self, update: Update) -> bool {
        match update {
            Update::Object(ev) => {
                if !self.feeds.objects.apply(*ev) {
                    return false;
                }
                self.connected = true;
                self.rollout = self
                    .feeds
                    .object_json()
                    .map(|raw| RolloutView::from_json(&raw));
                true
            }
            Update::Pod(ev) => {
                if !self.feeds.pods.apply(*ev) {
                    return false;
                }
                // Most kinds own their Pods; for the others every Pod the selector matches counts.
                let owner = self
                    .rollout
                    .as_ref()
                    .filter(|r| r.kind.owns_pods())
                    .map(|r| r.uid.clone());
                let mut views = self.feeds.pod_views(owner.as_deref());
                // A SidecarSet's Pods are those it injected (upstream `getMatchingPods` keeps
                // only injected ones): the selector alone also matches Pods of namespaces its
                // namespaceSelector leaves out.
                if let Some(r) = self.rollout.as_ref().filter(|r| r.kind == Kind::SidecarSet) {
                    views.retain(|p| p.sidecar_hashes.contains_key(&r.name));
                }
                self.set_pods(views);
                self.events = self.feeds.relevant_events(&self.pods);
                true
            }
            Update::Event(ev) => {
                if !self.feeds.events.apply(*ev) {
                    return false;
                }
                let rows = self.feeds.relevant_events(&self.pods);
                if rows == self.events {
                    return false;
                }
                self.events = rows;
                true
            }
        }
    }

    pub fn set_pods(&mut self, mut pods: Vec<PodView>) {
        let keep = self.selected_pod().map(|p| p.name.clone());
        // The kind's order: ordinals for StatefulSets, nodes for DaemonSets, names otherwise.
        match &self.rollout {
            Some(r) => (r.kind.spec().sort_pods)(&mut pods),
            None => pods.sort_by(|a, b| a.name.cmp(&b.name)),
        }
        self.pods = pods;
        // Keep the cursor on the same pod when others come and go.
        if let Some(name) = keep
            && let Some(i) = self.visible().iter().position(|p| p.name == name)
        {
            self.selected = i;
        }
        self.clamp();
    }

    /// Pods matching the filter (substring of name, node, revision or lifecycle state).
    pub fn visible(&self) -> Vec<&PodView> {
        let f = self.filter.to_lowercase();
        self.pods
            .iter()
            .filter(|p| {
                f.is_empty()
                    || p.name.contains(&f)
                    || p.node.to_lowercase().contains(&f)
                    || p.revision.contains(&f)
                    || p.lifecycle.to_lowercase().contains(&f)
            })
            .collect()
    }

    pub fn selected_pod(&self) -> Option<&PodView> {
        self.visible().get(self.selected).copied()
    }

    pub fn decision(&self) -> Option<Decision> {
        let r = self.rollout.as_ref()?;
        Some(decide(r, &PodSummary::from_pods(self.pods.iter())))
    }

    /// True while some countdown is on screen, so the loop knows to tick once a second.
    pub fn has_countdown(&self) -> bool {
        self.pods
            .iter()
            .any(|p| p.inplace.as_ref().is_some_and(|i| i.grace_seconds > 0))
    }

    fn clamp(&mut self) {
        let n = self.visible().len();
        if n == 0 {
            self.selected = 0;
            self.offset = 0;
            return;
        }
        self.selected = self.selected.min(n - 1);
        self.offset = self.offset.min(self.selected);
    }

    /// The window of `visible()` rows to draw in `height` rows, keeping the selection on screen.
    pub fn window(&self, height: usize) -> (usize, usize) {
        let n = self.visible().len();
        let h = height.max(1);
        let mut start = self.offset.min(n.saturating_sub(1));
        if self.selected < start {
            start = self.selected;
        } else if self.selected >= start + h {
            start = self.selected + 1 - h;
        }
        (start, (start + h).min(n))
    }

    fn move_by(&mut self, delta: isize) {
        let n = self.visible().len();
        if n == 0 {
            return;
        }
        let cur = self.selected as isize + delta;
        self.selected = cur.clamp(0, n as isize - 1) as usize;
        let (start, _) = self.window(self.page);
        self.offset = start;
    }

    pub fn on_key(&mut self, key: KeyEvent) -> Option<Action> {
        if key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c') {
            return Some(Action::Quit);
        }
        if self.editing_filter {
            match key.code {
                KeyCode::Enter => self.editing_filter = false,
                KeyCode::Esc => {
                    self.editing_filter = false;
                    self.filter.clear();
                }
                KeyCode::Backspace => {
                    self.filter.pop();
                }
                KeyCode::Char(c) => self.filter.push(c),
                _ => {}
            }
            self.selected = 0;
            self.offset = 0;
            return None;
        }
        if self.show_help {
            // Any key closes help; q still quits.
            self.show_help = false;
            return (key.code == KeyCode::Char('q')).then_some(Action::Quit);
        }
        let page = self.page.max(1) as isize;
        match key.code {
            KeyCode::Char('q') => return Some(Action::Quit),
            KeyCode::Esc if !self.filter.is_empty() => {
                self.filter.clear();
                self.clamp();
            }
            KeyCode::Esc => return Some(Action::Quit),
            KeyCode::Char('?') => self.show_help = true,
            KeyCode::Char('/') => {
                self.editing_filter = true;
                self.filter.clear();
            }
            KeyCode::Up | KeyCode::Char('k') => self.move_by(-1),
            KeyCode::Down | KeyCode::Char('j') => self.move_by(1),
            KeyCode::PageUp => self.move_by(-page),
            KeyCode::PageDown => self.move_by(page),
            KeyCode::Home | KeyCode::Char('g') => self.move_by(isize::MIN / 2),
            KeyCode::End | KeyCode::Char('G') => self.move_by(isize::MAX / 2),
            KeyCode::Char('p') => {
                return self.rollout.as_ref().map(|r| Action::SetPaused(!r.paused));
            }
            KeyCode::Char('+') | KeyCode::Char('=') => {
                let r = self.rollout.as_ref()?;
                let kept = math::partition_pods(r.partition.as_ref(), r.replicas);
                return Some(Action::SetPartition((kept + 1).min(r.replicas)));
            }
            KeyCode::Char('-') => {
                let r = self.rollout.as_ref()?;
                let kept = math::partition_pods(r.partition.as_ref(), r.replicas);
                return Some(Action::SetPartition((kept - 1).max(0)));
            }
            KeyCode::Char('P') => return Some(Action::Promote),
            KeyCode::Char('r') => {
                return self
                    .selected_pod()
                    .map(|p| Action::Recreate(p.name.clone()));
            }
            _ => {}
        }
        None
    }
}

#[cfg(test)]
mod tests {
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
            Some(Action::Recreate("web-0002".into()))
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
            vec![Action::SetPaused(true), Action::Recreate("web-0000".into())]
        );
        assert_eq!(m.outbox[0].view, cloneset("u1", false));
        assert!(m.flash.is_empty(), "a key press clears the last result");
        assert!(!m.quit);
        m.apply(Input::ActionDone("cloneset/web paused".into()));
        assert_eq!(m.flash, "cloneset/web paused");
        m.apply(press(KeyCode::Char('q')));
        assert!(m.quit);
    }

    #[test]
    fn pod_watch_builds_the_owned_pods_once_listed() {
        use kube::runtime::watcher::Event;
        let mut m = LiveModel::new(
            "cloneset/web",
            "default",
            jiff::Timestamp::UNIX_EPOCH,
            false,
        );
        m.feeds.name = "web".into();
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
        let mut m = LiveModel::new(
            "cloneset/web",
            "default",
            jiff::Timestamp::UNIX_EPOCH,
            false,
        );
        m.feeds.name = "web".into();
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
}
