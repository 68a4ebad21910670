//! The lines above the Pod table: the workload, its outcome, revisions and counts.

use super::{Palette, short_rev, yes_no};
use crate::math;
use crate::tui::model::LiveModel;
use crate::view::RolloutView;
use crate::view::verdict::Outcome;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};

pub(super) fn outcome_icon(o: Outcome) -> (&'static str, Color) {
    match o {
        Outcome::Complete => ("✔", Color::Green),
        Outcome::Progressing => ("◌", Color::Yellow),
        Outcome::Paused => ("‖", Color::Cyan),
        Outcome::Failed => ("✖", Color::Red),
        Outcome::TimedOut => ("⚠", Color::Red),
    }
}

pub(super) fn header(m: &LiveModel, p: &Palette, wide: bool) -> Vec<Line<'static>> {
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
pub(super) fn revisions(r: &RolloutView, max: usize) -> String {
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

pub(super) fn counts(r: &RolloutView, width: usize) -> String {
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
