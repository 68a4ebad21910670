//! The Pod table: one row per Pod (its revision, readiness, images), the partition line, and
//! the column widths that fit the longest node name.

use super::{Palette, short_image, short_rev, yes_no};
use crate::math;
use crate::tui::model::LiveModel;
use crate::tui::probes::{self, ProbeRule};
use crate::view::workload::{self, Kind};
use crate::view::{PodView, RolloutView, normalize_image};
use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::style::{Color, Style};
use ratatui::text::Line;
use ratatui::widgets::{Cell, Paragraph, Row, Table};

/// An image's repository and tag (or digest), split at the first `:` or `@` of its last segment.
pub(super) fn repo_and_tag(image: &str) -> (&str, &str) {
    let last = short_image(image);
    last.find(['@', ':'])
        .map_or((last, ""), |p| (&last[..p], &last[p + 1..]))
}

/// `to` as shown after `from →`: only its tag (or digest) when the repository is the same.
pub(super) fn target_image<'a>(from: &str, to: &'a str) -> &'a str {
    match repo_and_tag(to) {
        (repo, tag) if repo == repo_and_tag(from).0 && !tag.is_empty() => tag,
        _ => short_image(to),
    }
}

/// Each container's image: `✓` once the runtime runs the spec image; `⧗` with `old→new` while
/// the update has yet to reach it: the runtime still on another image, or a new image the grace
/// period (with its time left) or a later batch has not patched into the spec yet. Narrow
/// terminals drop the repository of a pending tag change so the time left still fits.
pub(super) fn image_cell(pod: &PodView, now: jiff::Timestamp, wide: bool) -> String {
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

/// The images cell followed by the WorkloadSpread subset the Pod was placed in (`· @zone-a`)
/// and its PodProbeMarker probes (`· healthy✓ tcp✗`), each if any.
fn with_probes(images: String, rules: &[ProbeRule], pod: &PodView) -> String {
    let mut cell = images;
    if let Some(spread) = &pod.spread {
        cell = format!("{cell} · @{}", spread.subset);
    }
    let marks = probes::marks(rules, pod);
    if !marks.is_empty() {
        cell = format!("{cell} · {}", probes::row_text(&marks));
    }
    cell
}

/// How the rows are shown: what every row's cells depend on besides its Pod.
struct Shown<'a> {
    update_rev: &'a str,
    sidecars: bool,
    many_namespaces: bool,
    rev_len: usize,
    wide: bool,
}

/// One Pod's cells (NAME, NODE or OWNER, REV, STATE, READY, IPR, RST, IMAGES) and its style.
fn pod_cells(
    pod: &PodView,
    selected: bool,
    m: &LiveModel,
    p: &Palette,
    shown: &Shown<'_>,
) -> ([String; 8], Style) {
    // A SidecarSet's Pod is on the update once it records the set's hash; it is done
    // once its sidecars also run the set's images.
    let sidecar_rev = m
        .rollout
        .as_ref()
        .filter(|_| shown.sidecars)
        .and_then(|r| pod.sidecar_hashes.get(&r.name).map(|h| (r, h)));
    let marked = match sidecar_rev {
        Some((r, h)) => !r.sidecar_hash.is_empty() && *h == r.sidecar_hash,
        None if shown.sidecars => false,
        None => pod.is_updated(shown.update_rev),
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
    let rev = match (shown.sidecars, sidecar_rev) {
        (true, Some((_, h))) => {
            format!(
                "{}{}",
                short_rev(h, shown.rev_len),
                if marked { "*" } else { "" }
            )
        }
        (true, None) => "-".to_string(),
        (false, _) => format!(
            "{}{}",
            short_rev(&pod.revision, shown.rev_len),
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
    if selected {
        style = style.patch(p.selected());
    }
    let place = if shown.sidecars {
        pod.owner.clone()
    } else {
        pod.node.clone()
    };
    let name = if shown.many_namespaces {
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
        with_probes(image_cell(pod, m.now, shown.wide), &m.probes, pod),
    ];
    (cells, style)
}

pub(super) fn pod_table(f: &mut Frame, area: Rect, m: &LiveModel, p: &Palette) {
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
    let shown = Shown {
        update_rev,
        sidecars,
        many_namespaces,
        rev_len,
        wide,
    };
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
        let (cells, style) = pod_cells(pod, at == m.selected, m, p, &shown);
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

/// The table's column widths: `base`, except that a place column (NODE or OWNER) narrower
/// than its longest cell (`need`) grows to show it whole, so that a node is named as kubectl
/// names it (kind's `kruise-rs-control-plane` is 23 characters). The room comes first from the
/// images column beyond what its cells need, then from columns wider than their cells; the
/// READY column's header shrinks to `RDY` as a last resort.
pub(super) fn fit_place(base: [u16; 8], need: [usize; 8], width: usize) -> [u16; 8] {
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

/// The line between the ordinals a partition keeps and those it updates.
pub(super) fn partition_row(kept: i64, p: &Palette) -> Row<'static> {
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
pub(super) fn runs_sidecars(pod: &PodView, r: &RolloutView) -> bool {
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
