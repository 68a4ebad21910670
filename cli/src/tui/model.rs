//! The live view's state and its key handling. Everything here is pure: the event loop feeds it
//! cluster changes and key presses, and rendering only reads it.

use crate::math;
use crate::status::{Decision, PodSummary, decide};
use crate::view::{PodView, RolloutView};
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

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
        }
    }

    pub fn set_pods(&mut self, mut pods: Vec<PodView>) {
        let keep = self.selected_pod().map(|p| p.name.clone());
        pods.sort_by(|a, b| a.name.cmp(&b.name));
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
}
