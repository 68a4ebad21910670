//! The panel under the table: the selected Pod (a SidecarSet's sidecars, an in-place update's
//! batches and grace) and the Events about the workload.

use super::{Palette, short_image, short_rev};
use crate::tui::model::LiveModel;
use crate::view::workload::Kind;
use crate::view::{PodView, RolloutView, normalize_image};
use kruise_api::keys::k8s;
use ratatui::style::{Color, Style};
use ratatui::text::{Line, Span};

pub(super) fn ago(now: jiff::Timestamp, t: Option<jiff::Timestamp>) -> String {
    let Some(t) = t else { return "?".to_string() };
    let secs = now.duration_since(t).as_secs().max(0);
    match secs {
        0..=119 => format!("{secs}s"),
        120..=7199 => format!("{}m", secs / 60),
        _ => format!("{}h", secs / 3600),
    }
}

/// The selected Pod of a SidecarSet: owner, the hash it records against the set's, and each
/// sidecar's image as the runtime reports it, with its requests and limits.
pub(super) fn sidecar_lines(pod: &PodView, r: &RolloutView, p: &Palette) -> Vec<Line<'static>> {
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
        let mut text = if normalize_image(&c.spec_image) != normalize_image(image) {
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
        // Computed at injection when the sidecar has a resourcesPolicy.
        if !c.resources.is_empty() {
            text.push_str(" · ");
            text.push_str(&c.resources);
        }
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

pub(super) fn detail_lines(m: &LiveModel, p: &Palette) -> Vec<Line<'static>> {
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
    if let Some(spread) = &pod.spread {
        lines.push(Line::from(format!(
            "workloadspread: {}, subset {}",
            spread.name, spread.subset
        )));
    }
    if let Some(node) = m.persisted.get(&pod.name) {
        let text = if *node == pod.node || pod.node.is_empty() {
            format!("persisted node: {node}")
        } else {
            format!("persisted node: {node} (now on {})", pod.node)
        };
        lines.push(Line::from(text));
    }
    let marks = crate::tui::probes::marks(&m.probes, pod);
    if !marks.is_empty() {
        let text = marks
            .iter()
            .map(|mk| match mk.since {
                Some(t) => format!("{} {} {}", mk.probe, mk.state.as_str(), ago(m.now, Some(t))),
                None => format!("{} {}", mk.probe, mk.state.as_str()),
            })
            .collect::<Vec<_>>()
            .join(" · ");
        lines.push(Line::from(format!("probes: {text}")));
    }
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

pub(super) fn event_lines(m: &LiveModel, p: &Palette, max: usize) -> Vec<Line<'static>> {
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
