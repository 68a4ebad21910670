//! Drawing the live view. `render` is a pure function of `LiveModel`: the same model always
//! draws the same screen, which is what the snapshot tests rely on.
//!
//! This module splits the screen and draws the footer and help; `header` draws the workload's
//! lines, `table` the Pod table, `detail` the selected Pod and the Events. What more than one of
//! them uses (the palette, short revisions and images) stays here.

mod detail;
mod header;
mod table;

use super::model::LiveModel;
use crate::view::workload::Kind;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Clear, Paragraph, Wrap};
/// Rows the header takes.
const HEADER: u16 = 4;

/// Splits the screen; shared with the event loop so PgUp/PgDn move by what is really visible.
pub fn areas(area: Rect) -> [Rect; 4] {
    // The detail/events panel grows with the terminal but never starves the pod table.
    let bottom = if area.height >= 36 {
        12
    } else if area.height >= 20 {
        7
    } else {
        0
    };
    Layout::vertical([
        Constraint::Length(HEADER),
        Constraint::Min(3),
        Constraint::Length(bottom),
        Constraint::Length(1),
    ])
    .areas(area)
}

/// Pod rows the table can show (its area minus the column header).
pub fn table_rows(area: Rect) -> usize {
    areas(area)[1].height.saturating_sub(1) as usize
}

struct Palette {
    color: bool,
}

impl Palette {
    fn fg(&self, c: Color) -> Style {
        if self.color {
            Style::new().fg(c)
        } else {
            Style::new()
        }
    }
    fn bold(&self) -> Style {
        Style::new().add_modifier(Modifier::BOLD)
    }
    fn selected(&self) -> Style {
        // Reverse video works without colour too.
        Style::new().add_modifier(Modifier::REVERSED)
    }
    fn dim(&self) -> Style {
        if self.color {
            Style::new().fg(Color::DarkGray)
        } else {
            Style::new()
        }
    }
}

/// The hash part of a revision name (`web-7c9a8b6d5` → `7c9a8b6d5`), at most `max` characters.
fn short_rev(rev: &str, max: usize) -> &str {
    let h = rev.rsplit('-').next().unwrap_or(rev);
    match h.char_indices().nth(max) {
        Some((i, _)) => &h[..i],
        None => h,
    }
}

fn yes_no(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

/// The last path segment of an image reference (`nginx:1.27` of `docker.io/library/nginx:1.27`).
fn short_image(image: &str) -> &str {
    image.rsplit('/').next().unwrap_or(image)
}

fn footer(m: &LiveModel, p: &Palette) -> Line<'static> {
    if m.editing_filter {
        return Line::from(vec![
            Span::styled(" filter: ", p.bold()),
            Span::raw(format!("{}▏", m.filter)),
        ]);
    }
    let n = m.visible().len();
    let pos = if n == 0 {
        "0/0".to_string()
    } else {
        format!("{}/{}", m.selected + 1, n)
    };
    let filt = if m.filter.is_empty() {
        String::new()
    } else {
        format!(" filter {:?}", m.filter)
    };
    let left = format!(" {pos}{filt} ");
    let text = if m.flash.is_empty() {
        "p pause  +/- partition  P promote  r recreate  / filter  ? help  q quit".to_string()
    } else {
        m.flash.clone()
    };
    Line::from(vec![
        Span::styled(left, p.selected()),
        Span::raw(format!(" {text}")),
    ])
}

const HELP: &[(&str, &str)] = &[
    ("p", "pause or resume the rollout"),
    ("+ / -", "hold one pod more / fewer (partition)"),
    ("P", "promote one batch (maxUnavailable) and resume"),
    ("r", "restart the selected pod's containers (CRR)"),
    ("/", "filter pods by name, node, revision or state"),
    ("↑ ↓ PgUp PgDn", "move; Home/End jump"),
    ("Esc", "clear the filter"),
    ("q", "quit"),
];

fn help(f: &mut Frame, area: Rect) {
    let w = area.width.min(64);
    let h = (HELP.len() as u16 + 4).min(area.height);
    let popup = Rect {
        x: area.x + (area.width - w) / 2,
        y: area.y + (area.height - h) / 2,
        width: w,
        height: h,
    };
    let mut lines: Vec<Line> = HELP
        .iter()
        .map(|(k, v)| Line::from(format!("{k:>13}  {v}")))
        .collect();
    lines.push(Line::from(""));
    lines.push(Line::from(
        "  IPR = InPlaceUpdateReady, REV * = update revision",
    ));
    f.render_widget(Clear, popup);
    f.render_widget(
        Paragraph::new(lines).block(Block::bordered().title(" keys ")),
        popup,
    );
}

pub fn render(f: &mut Frame, m: &LiveModel) {
    let p = Palette { color: m.color };

    let [head, table, bottom, foot] = areas(f.area());
    f.render_widget(
        Paragraph::new(header::header(m, &p, f.area().width >= 120)),
        head,
    );
    table::pod_table(f, table, m, &p);
    if bottom.height > 0 {
        let [left, right] =
            Layout::horizontal([Constraint::Percentage(45), Constraint::Percentage(55)])
                .areas(bottom);
        let title = if m
            .rollout
            .as_ref()
            .is_some_and(|r| r.kind == Kind::SidecarSet)
        {
            " pod sidecars "
        } else {
            " pod in-place batches "
        };
        let pod_block = Block::bordered().title(title);
        f.render_widget(
            Paragraph::new(detail::detail_lines(m, &p))
                .block(pod_block)
                .wrap(Wrap { trim: true }),
            left,
        );
        let ev_block = Block::bordered().title(" events ");
        let max = right.height.saturating_sub(2) as usize;
        f.render_widget(
            Paragraph::new(detail::event_lines(m, &p, max)).block(ev_block),
            right,
        );
    }
    f.render_widget(Paragraph::new(footer(m, &p)), foot);
    if m.show_help {
        help(f, f.area());
    }
}
