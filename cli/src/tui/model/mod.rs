//! The live view's state and its key handling. Everything here is pure: the event loop hands
//! every input to [`LiveModel::apply`] (watch changes, terminal events, clock ticks, results of
//! cluster actions) and draws when it returns true; rendering only reads the model.

use super::feeds::Feeds;
use crate::math;
use crate::status::decide;
use crate::view::verdict::{Decision, PodSummary};
use crate::view::workload::Kind;
use crate::view::{PodView, RolloutView};
use crate::watch::Update;
use kube::api::ApiResource;
use ratatui::crossterm::event::{
    Event as TermEvent, KeyCode, KeyEvent, KeyEventKind, KeyModifiers,
};
use std::collections::BTreeMap;

pub use crate::view::events::{EventRow, event_row, relevant_events};

/// What a key press asks the event loop to do against the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    Quit,
    SetPaused(bool),
    SetPartition(i64),
    Promote,
    /// Recreate the containers of this Pod (its namespace: a SidecarSet's Pods are anywhere).
    Recreate {
        namespace: String,
        pod: String,
    },
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
    /// The nodes the PersistentPodState targeting the StatefulSet recorded, by Pod name.
    Persisted(BTreeMap<String, String>),
    /// The probes of the namespace's PodProbeMarkers.
    Probes(Vec<crate::tui::probes::ProbeRule>),
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
    /// Pod name → the node its PersistentPodState recorded (StatefulSets only).
    pub persisted: BTreeMap<String, String>,
    /// The probes of the namespace's PodProbeMarkers (each Pod shows those that select it).
    pub probes: Vec<crate::tui::probes::ProbeRule>,
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
            persisted: BTreeMap::new(),
            probes: Vec::new(),
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
            Input::Persisted(nodes) => {
                let changed = nodes != self.persisted;
                self.persisted = nodes;
                changed
            }
            Input::Probes(rules) => {
                let changed = rules != self.probes;
                self.probes = rules;
                changed
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
                let before = self.rollout.as_ref().map(|r| (r.kind, r.uid.clone()));
                self.rollout = self
                    .feeds
                    .object_json()
                    .map(|raw| RolloutView::from_json(&raw));
                // Pods that arrived before their workload were read without its kind (owner,
                // revision label): read them again once it is known, or when it changes.
                if self.rollout.as_ref().map(|r| (r.kind, r.uid.clone())) != before
                    && !self.feeds.pods.items.is_empty()
                {
                    self.refresh_pods();
                }
                true
            }
            Update::Pod(ev) => {
                if !self.feeds.pods.apply(*ev) {
                    return false;
                }
                self.refresh_pods();
                true
            }
            Update::Event(ev) => {
                if !self.feeds.events.apply(*ev) {
                    return false;
                }
                let rows = relevant_events(
                    self.feeds.events.items.values(),
                    &self.feeds.name,
                    &self.pods,
                );
                if rows == self.events {
                    return false;
                }
                self.events = rows;
                true
            }
        }
    }

    /// The Pods rows from the watched Pods, as the workload's kind reads them, and the events
    /// that concern them.
    fn refresh_pods(&mut self) {
        // Most kinds own their Pods; for the others every Pod the selector matches counts.
        let owner = self
            .rollout
            .as_ref()
            .filter(|r| r.kind.owns_pods())
            .map(|r| r.uid.clone());
        let mut views = self.feeds.pod_views(owner.as_deref());
        if let Some(kind) = self.rollout.as_ref().map(|r| r.kind) {
            views = views.into_iter().map(|v| v.for_kind(kind)).collect();
        }
        // A SidecarSet's Pods are those it injected (upstream `getMatchingPods` keeps only
        // injected ones): the selector alone also matches Pods of namespaces its
        // namespaceSelector leaves out.
        if let Some(r) = self.rollout.as_ref().filter(|r| r.kind == Kind::SidecarSet) {
            views.retain(|p| p.sidecar_hashes.contains_key(&r.name));
        }
        self.set_pods(views);
        self.events = relevant_events(
            self.feeds.events.items.values(),
            &self.feeds.name,
            &self.pods,
        );
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
                return self.selected_pod().map(|p| Action::Recreate {
                    namespace: p.namespace.clone(),
                    pod: p.name.clone(),
                });
            }
            _ => {}
        }
        None
    }
}

#[cfg(test)]
mod tests;
