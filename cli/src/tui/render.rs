//! Drawing the live view. `render` is a pure function of `LiveModel`: the same model always
//! draws the same screen, which is what the snapshot tests rely on.

use super::model::LiveModel;
use crate::math;
use crate::status::Outcome;
use crate::view::{PodView, RolloutView, normalize_image};
use crate::workload::{self, Kind};
use kruise_api::keys::k8s;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Cell, Clear, Paragraph, Row, Table, Wrap};

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

fn outcome_icon(o: Outcome) -> (&'static str, Color) {
    match o {
        Outcome::Complete => ("✔", Color::Green),
        Outcome::Progressing => ("◌", Color::Yellow),
        Outcome::Paused => ("‖", Color::Cyan),
        Outcome::Failed => ("✖", Color::Red),
        Outcome::TimedOut => ("⚠", Color::Red),
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

fn ago(now: jiff::Timestamp, t: Option<jiff::Timestamp>) -> String {
    let Some(t) = t else { return "?".to_string() };
    let secs = now.duration_since(t).as_secs().max(0);
    match secs {
        0..=119 => format!("{secs}s"),
        120..=7199 => format!("{}m", secs / 60),
        _ => format!("{}h", secs / 3600),
    }
}

fn header(m: &LiveModel, p: &Palette, wide: bool) -> Vec<Line<'static>> {
    let Some(r) = &m.rollout else {
        let msg = if m.connected {
            "waiting for the object…"
        } else {
            "connecting…"
        };
        return vec![Line::from(vec![
            Span::styled(format!(" {} ", m.target), p.bold()),
            Span::raw(msg.to_string()),
        ])];
    };
    let decision = m.decision();
    let (icon, color) = decision
        .as_ref()
        .map(|d| outcome_icon(d.outcome))
        .unwrap_or(("?", Color::Gray));
    let msg = decision.map(|d| d.message).unwrap_or_default();
    let kept = math::partition_pods(r.partition.as_ref(), r.replicas);
    let partition = match &r.partition {
        Some(math::IntOrPercent::Percent(pc)) => format!("{kept} ({pc}%)"),
        _ => kept.to_string(),
    };
    let mu = match &r.max_unavailable {
        Some(math::IntOrPercent::Percent(pc)) => format!("{} ({pc}%)", r.max_unavailable_pods()),
        Some(v) => v.to_string(),
        None => format!("{} (20%)", r.max_unavailable_pods()),
    };
    let paused_style = if r.paused {
        p.fg(Color::Cyan).add_modifier(Modifier::BOLD)
    } else {
        Style::new()
    };
    let grace = if r.grace_period_seconds > 0 {
        format!(" grace {}s", r.grace_period_seconds)
    } else {
        String::new()
    };
    vec![
        Line::from(vec![
            Span::styled(format!(" {} ", m.target), p.bold()),
            Span::styled(format!("{icon} {msg}"), p.fg(color)),
        ]),
        Line::from(format!(
            " {} · {} · gen {}/{} · {}",
            if r.kind.spec().namespaced {
                format!("ns {}", m.namespace)
            } else {
                "cluster-scoped".to_string()
            },
            r.api_version,
            r.observed_generation,
            r.generation,
            revisions(r, if wide { 10 } else { 7 }),
        )),
        Line::from(vec![
            Span::raw(format!(
                " {}{grace} │ partition {partition} │ maxUnavailable {mu} │ ",
                r.pod_update_policy
            )),
            Span::styled(format!("paused {}", yes_no(r.paused)), paused_style),
        ]),
        Line::from(counts(r, if wide { 20 } else { 8 })),
    ]
}

/// `current A → update B`; only the update revision for kinds that report no current one
/// (Advanced DaemonSet, SidecarSet).
fn revisions(r: &RolloutView, max: usize) -> String {
    let update = short_rev(&r.update_revision, max);
    if r.current_revision.is_empty() {
        format!("update {update}")
    } else {
        format!(
            "current {} → update {update}",
            short_rev(&r.current_revision, max)
        )
    }
}

fn counts(r: &RolloutView, width: usize) -> String {
    let expected = r.expected_updated();
    let filled = if expected > 0 {
        (r.updated_replicas.clamp(0, expected) as usize * width) / expected as usize
    } else {
        width
    };
    // With a partition the goal is fewer than all Pods; counting against it would read
    // `3/2` when every Pod already runs the update revision (a new StatefulSet).
    let kept = r.replicas - expected;
    let updated = if kept > 0 {
        format!(
            "updated {}/{} (partition keeps {kept})",
            r.updated_replicas, r.replicas
        )
    } else {
        format!("updated {}/{}", r.updated_replicas, expected)
    };
    // Kinds that do not report updated-ready Pods show no made-up 0.
    let updated_ready = r
        .updated_ready_replicas
        .map(|n| format!(" · updated-ready {n}"))
        .unwrap_or_default();
    format!(
        " [{}{}] {updated}{updated_ready} · ready {}/{} · available {}",
        "█".repeat(filled),
        "░".repeat(width - filled),
        r.ready_replicas,
        r.replicas,
        r.available_replicas
    )
}

/// The last path segment of an image reference (`nginx:1.27` of `docker.io/library/nginx:1.27`).
fn short_image(image: &str) -> &str {
    image.rsplit('/').next().unwrap_or(image)
}

/// An image's repository and tag (or digest), split at the first `:` or `@` of its last segment.
fn repo_and_tag(image: &str) -> (&str, &str) {
    let last = short_image(image);
    last.find(['@', ':'])
        .map_or((last, ""), |p| (&last[..p], &last[p + 1..]))
}

/// `to` as shown after `from →`: only its tag (or digest) when the repository is the same.
fn target_image<'a>(from: &str, to: &'a str) -> &'a str {
    match repo_and_tag(to) {
        (repo, tag) if repo == repo_and_tag(from).0 && !tag.is_empty() => tag,
        _ => short_image(to),
    }
}

/// Each container's image: `✓` once the runtime runs the spec image; `⧗` with `old→new` while
/// the update has yet to reach it: the runtime still on another image, or a new image the grace
/// period (with its time left) or a later batch has not patched into the spec yet. Narrow
/// terminals drop the repository of a pending tag change so the time left still fits.
fn image_cell(pod: &PodView, now: jiff::Timestamp, wide: bool) -> String {
    let inplace = pod.inplace.as_ref();
    let grace_left = inplace.and_then(|ip| ip.grace_left(now));
    pod.containers
        .iter()
        .map(|c| {
            let spec = c.spec_image.as_str();
            let pending = inplace
                .and_then(|ip| ip.pending_images.get(&c.name))
                .filter(|next| normalize_image(next) != normalize_image(spec));
            if let Some(next) = pending {
                let left = grace_left.map(|s| format!("{s}s")).unwrap_or_default();
                let to = target_image(spec, next);
                let from = match repo_and_tag(spec) {
                    (_, tag) if !wide && to != short_image(next) && !tag.is_empty() => tag,
                    _ => short_image(spec),
                };
                format!("{}={from}→{to}⧗{left}", c.name)
            } else if c.status_image.is_empty() {
                format!("{}={}?", c.name, short_image(spec))
            } else if c.runtime_has_spec_image() {
                format!("{}={}✓", c.name, short_image(spec))
            } else {
                format!(
                    "{}={}→{}⧗",
                    c.name,
                    short_image(&c.status_image),
                    target_image(&c.status_image, spec)
                )
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn pod_table(f: &mut Frame, area: Rect, m: &LiveModel, p: &Palette) {
    let visible = m.visible();
    let rows_h = area.height.saturating_sub(1) as usize;
    let (start, end) = m.window(rows_h);
    let wide = area.width >= 120;
    // Leave room for the `*` update marker inside the REV column.
    let rev_len = if wide { 10 } else { 7 };
    let update_rev = m
        .rollout
        .as_ref()
        .map(|r| r.update_revision.as_str())
        .unwrap_or_default();
    let kind = m.rollout.as_ref().map(|r| r.kind);
    let sidecars = kind == Some(Kind::SidecarSet);
    // StatefulSets keep the ordinals below the partition: a line marks where updates start.
    let boundary = m
        .rollout
        .as_ref()
        .filter(|r| r.kind.spec().ordered && r.partition.is_some())
        .map(|r| math::partition_pods(r.partition.as_ref(), r.replicas))
        .filter(|kept| *kept > 0);
    // A cluster-scoped SidecarSet may match Pods of several namespaces: names alone are
    // ambiguous then.
    let many_namespaces = sidecars
        && visible
            .first()
            .is_some_and(|first| visible.iter().any(|p| p.namespace != first.namespace));
    let daemons = kind == Some(Kind::AdvancedDaemonSet) || kind == Some(Kind::DaemonSet);
    let below = |pod: &PodView, kept: i64| workload::ordinal(&pod.name).is_some_and(|o| o < kept);
    // Only the visible slice is turned into rows: thousands of pods cost nothing extra.
    let mut rows: Vec<Row> = Vec::with_capacity(end - start + 1);
    // The widest cell of each column among the rows shown, to size the columns below.
    let mut need = [0usize; 8];
    for (i, pod) in visible[start..end].iter().enumerate() {
        let at = start + i;
        if let Some(kept) = boundary
            && at > 0
            && below(visible[at - 1], kept)
            && !below(pod, kept)
        {
            rows.push(partition_row(kept, p));
            // The rule's label (`── partition N `) must stay readable in the NAME column.
            need[0] = need[0].max(partition_label(kept).chars().count() + 1);
        }
        // A SidecarSet's Pod is on the update once it records the set's hash; it is done
        // once its sidecars also run the set's images.
        let sidecar_rev = m
            .rollout
            .as_ref()
            .filter(|_| sidecars)
            .and_then(|r| pod.sidecar_hashes.get(&r.name).map(|h| (r, h)));
        let marked = match sidecar_rev {
            Some((r, h)) => !r.sidecar_hash.is_empty() && *h == r.sidecar_hash,
            None if sidecars => false,
            None => pod.is_updated(update_rev),
        };
        let updated = match sidecar_rev {
            Some((r, _)) => marked && runs_sidecars(pod, r),
            None => marked,
        };
        let busy = pod.in_place_in_progress();
        let state = if pod.terminating {
            "Terminating".to_string()
        } else if !pod.lifecycle.is_empty() {
            pod.lifecycle.clone()
        } else {
            pod.phase.clone()
        };
        let ipr = match pod.inplace_ready {
            Some(true) => "yes",
            Some(false) => "no",
            None => "-",
        };
        // The pod's own revision belongs to its workload; a SidecarSet's row shows the hash
        // of the sidecars the pod was given or last upgraded to.
        let rev = match (sidecars, sidecar_rev) {
            (true, Some((_, h))) => {
                format!("{}{}", short_rev(h, rev_len), if marked { "*" } else { "" })
            }
            (true, None) => "-".to_string(),
            (false, _) => format!(
                "{}{}",
                short_rev(&pod.revision, rev_len),
                if marked { "*" } else { "" }
            ),
        };
        let mut style = if !pod.ready {
            p.fg(Color::Red)
        } else if busy {
            p.fg(Color::Yellow)
        } else if updated {
            p.fg(Color::Green)
        } else {
            Style::new()
        };
        if at == m.selected {
            style = style.patch(p.selected());
        }
        let place = if sidecars {
            pod.owner.clone()
        } else {
            pod.node.clone()
        };
        let name = if many_namespaces {
            format!("{}/{}", pod.namespace, pod.name)
        } else {
            pod.name.clone()
        };
        let cells = [
            name,
            place,
            rev,
            state,
            yes_no(pod.ready).to_string(),
            ipr.to_string(),
            pod.restarts.to_string(),
            image_cell(pod, m.now, wide),
        ];
        for (n, cell) in need.iter_mut().zip(&cells) {
            *n = (*n).max(Line::from(cell.as_str()).width());
        }
        rows.push(Row::new(cells.map(Cell::from)).style(style));
    }
    let base = if wide {
        // Owners (`ReplicaSet/web-5d9f7c`) need more room than node names.
        [28, if sidecars { 24 } else { 16 }, 11, 12, 5, 5, 4, 10]
    } else if daemons {
        // A DaemonSet's rows are its nodes and a SidecarSet's are told apart by owner: those
        // columns get the room names and states can spare.
        [14, 12, 8, 9, 5, 4, 3, 8]
    } else if sidecars {
        [16, 13, 8, 8, 5, 4, 3, 8]
    } else {
        [16, 8, 8, 9, 5, 4, 3, 8]
    };
    let w = fit_place(base, need, area.width as usize);
    let widths = [
        Constraint::Length(w[0]),
        Constraint::Length(w[1]),
        Constraint::Length(w[2]),
        Constraint::Length(w[3]),
        Constraint::Length(w[4]),
        Constraint::Length(w[5]),
        Constraint::Length(w[6]),
        Constraint::Min(w[7]),
    ];
    let head = Row::new(vec![
        "NAME",
        if sidecars { "OWNER" } else { "NODE" },
        "REV",
        "STATE",
        if w[4] < 5 { "RDY" } else { "READY" },
        "IPR",
        "RST",
        if wide {
            "IMAGES (✓ ok: runs the spec image · ⧗ pending: old→new, grace left)"
        } else {
            "IMAGES ✓ok ⧗pending"
        },
    ])
    .style(p.bold().patch(p.dim()));
    let table = Table::new(rows, widths).header(head).column_spacing(1);
    f.render_widget(table, area);
    if visible.is_empty() {
        let msg = if m.filter.is_empty() {
            "no pods"
        } else {
            "no pods match the filter"
        };
        if area.height > 1 {
            f.render_widget(
                Paragraph::new(format!("  {msg}")),
                Rect {
                    y: area.y + 1,
                    height: 1,
                    ..area
                },
            );
        }
    }
}

/// The line between the ordinals a partition keeps and those it updates.
/// The table's column widths: `base`, except that a place column (NODE or OWNER) narrower
/// than its longest cell (`need`) grows to show it whole, so that a node is named as kubectl
/// names it (kind's `kruise-rs-control-plane` is 23 characters). The room comes first from the
/// images column beyond what its cells need, then from columns wider than their cells; the
/// READY column's header shrinks to `RDY` as a last resort.
fn fit_place(base: [u16; 8], need: [usize; 8], width: usize) -> [u16; 8] {
    let mut w = base.map(usize::from);
    let mut short = need[1].saturating_sub(w[1]);
    if short == 0 {
        return base;
    }
    const HEADERS: [usize; 8] = [4, 5, 3, 5, 3, 3, 3, 6];
    let spacing = w.len() - 1;
    // The images column is `Min(w[7])`: it gets whatever the others leave.
    let images = width.saturating_sub(w[..7].iter().sum::<usize>() + spacing);
    let spare = images.saturating_sub(need[7].max(w[7]));
    let mut grow = spare.min(short);
    short -= grow;
    for col in [0, 3, 5, 4] {
        let floor = need[col].max(HEADERS[col]);
        let take = w[col].saturating_sub(floor).min(short);
        w[col] -= take;
        grow += take;
        short -= take;
    }
    w[1] += grow;
    w.map(|x| u16::try_from(x).unwrap_or(u16::MAX))
}

fn partition_label(kept: i64) -> String {
    format!("── partition {kept}")
}

fn partition_row(kept: i64, p: &Palette) -> Row<'static> {
    let rule = || Cell::from("─".repeat(30));
    Row::new(vec![
        Cell::from(format!("{} {}", partition_label(kept), "─".repeat(30))),
        rule(),
        rule(),
        rule(),
        rule(),
        rule(),
        rule(),
        Cell::from(format!(
            "── ordinals below {kept} kept, from {kept} up updated ──"
        )),
    ])
    .style(p.dim())
}

/// Whether the pod runs every container of the SidecarSet at the SidecarSet's image.
fn runs_sidecars(pod: &PodView, r: &RolloutView) -> bool {
    !r.images.is_empty()
        && r.images.iter().all(|(name, image)| {
            pod.containers.iter().any(|c| {
                // Hot-upgraded sidecars run as NAME-1 / NAME-2; either may be the working one.
                let same = c.name == *name
                    || c.name
                        .strip_prefix(name.as_str())
                        .is_some_and(|rest| rest == "-1" || rest == "-2");
                same && normalize_image(&c.spec_image) == normalize_image(image)
                    && c.runtime_has_spec_image()
            })
        })
}

/// The selected Pod of a SidecarSet: owner, the hash it records against the set's, and each
/// sidecar's image as the runtime reports it.
fn sidecar_lines(pod: &PodView, r: &RolloutView, p: &Palette) -> Vec<Line<'static>> {
    let mut lines = vec![Line::from(format!(
        "owner: {}",
        if pod.owner.is_empty() {
            "-"
        } else {
            pod.owner.as_str()
        }
    ))];
    let recorded = pod.sidecar_hashes.get(&r.name).map(String::as_str);
    let version = match recorded {
        Some(h) if !r.sidecar_hash.is_empty() && h == r.sidecar_hash => {
            format!("sidecar version {} (the set's)", short_rev(h, 10))
        }
        Some(h) => format!(
            "sidecar version {} (the set is at {})",
            short_rev(h, 10),
            short_rev(&r.sidecar_hash, 10)
        ),
        None => "not injected by this SidecarSet".to_string(),
    };
    lines.push(Line::from(version));
    for (name, image) in &r.images {
        let Some(c) = pod.containers.iter().find(|c| {
            c.name == *name
                || c.name
                    .strip_prefix(name.as_str())
                    .is_some_and(|rest| rest == "-1" || rest == "-2")
        }) else {
            continue;
        };
        let text = if normalize_image(&c.spec_image) != normalize_image(image) {
            format!(
                "{}: {} (set: {})",
                c.name,
                short_image(&c.spec_image),
                short_image(image)
            )
        } else if c.runtime_has_spec_image() {
            format!("{}: runs {}", c.name, short_image(image))
        } else {
            format!("{}: restarting into {}", c.name, short_image(image))
        };
        let style = if c.runtime_has_spec_image()
            && normalize_image(&c.spec_image) == normalize_image(image)
        {
            Style::new()
        } else {
            p.fg(Color::Yellow)
        };
        lines.push(Line::from(Span::styled(text, style)));
    }
    lines
}

fn detail_lines(m: &LiveModel, p: &Palette) -> Vec<Line<'static>> {
    let Some(pod) = m.selected_pod() else {
        return vec![Line::from("no pod selected")];
    };
    let mut lines = vec![Line::from(vec![
        Span::styled(pod.name.clone(), p.bold()),
        Span::raw(format!(
            " {} · {}",
            if pod.node.is_empty() {
                "unscheduled"
            } else {
                pod.node.as_str()
            },
            if pod.lifecycle.is_empty() {
                pod.phase.as_str()
            } else {
                pod.lifecycle.as_str()
            }
        )),
    ])];
    // A SidecarSet upgrades sidecars only: what matters is the version the pod records and
    // whether its sidecars run the set's images yet.
    if let Some(r) = m.rollout.as_ref().filter(|r| r.kind == Kind::SidecarSet) {
        lines.extend(sidecar_lines(pod, r, p));
        return lines;
    }
    let Some(ip) = &pod.inplace else {
        lines.push(Line::from("no in-place update recorded"));
        return lines;
    };
    let done: Vec<String> = ip
        .done_batches
        .iter()
        .enumerate()
        .map(|(i, b)| format!("#{} {}", i + 1, b.join(",")))
        .collect();
    lines.push(Line::from(format!(
        "done: {}",
        if done.is_empty() {
            "-".to_string()
        } else {
            done.join("  ")
        }
    )));
    let now = if let Some(left) = ip.grace_left(m.now) {
        format!("grace {left}s left (of {}s)", ip.grace_seconds)
    } else if pod.in_place_in_progress() {
        if ip.waiting_on.is_empty() {
            "updating: waiting for containers to run the new image".to_string()
        } else {
            format!("updating: waiting for {} ready", ip.waiting_on.join(","))
        }
    } else {
        "complete".to_string()
    };
    lines.push(Line::from(Span::styled(
        format!("now:  {now}"),
        p.fg(Color::Yellow),
    )));
    lines.push(Line::from(format!(
        "next: {}",
        if ip.next_batch.is_empty() {
            "-".to_string()
        } else {
            ip.next_batch.join(",")
        }
    )));
    lines
}

fn event_lines(m: &LiveModel, p: &Palette, max: usize) -> Vec<Line<'static>> {
    if m.events.is_empty() {
        return vec![Line::from("no events")];
    }
    m.events
        .iter()
        .take(max)
        .map(|e| {
            let style = if e.type_ == k8s::EVENT_TYPE_WARNING {
                p.fg(Color::Red)
            } else {
                Style::new()
            };
            Line::from(vec![
                Span::styled(format!("{:>4} ", ago(m.now, e.time)), p.dim()),
                Span::styled(format!("{} ", e.reason), style),
                Span::raw(format!("{}: {}", e.object, e.message)),
            ])
        })
        .collect()
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
    f.render_widget(Paragraph::new(header(m, &p, f.area().width >= 120)), head);
    pod_table(f, table, m, &p);
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
            Paragraph::new(detail_lines(m, &p))
                .block(pod_block)
                .wrap(Wrap { trim: true }),
            left,
        );
        let ev_block = Block::bordered().title(" events ");
        let max = right.height.saturating_sub(2) as usize;
        f.render_widget(
            Paragraph::new(event_lines(m, &p, max)).block(ev_block),
            right,
        );
    }
    f.render_widget(Paragraph::new(footer(m, &p)), foot);
    if m.show_help {
        help(f, f.area());
    }
}
