//! `rollout watch` / `rollout tui`: a full-screen view that redraws in place.
//!
//! `model` holds the state and key handling, `render` draws it (pure), and this module is the
//! event loop: cluster watches and key presses in, actions out, a redraw only after a change.

pub mod bench;
pub mod model;
pub mod render;

#[cfg(test)]
mod tests;

use crate::cli::WatchArgs;
use crate::cmd::crr::CrrClient;
use crate::ctx::{Ctx, Workload};
use crate::error::{CliError, Result, exit};
use crate::status;
use crate::target::Kind;
use crate::view::{PodView, RolloutView};
use crate::watch::{self, Cache, Update};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Event as K8sEvent, Pod};
use kube::api::{Api, DynamicObject};
use model::{Action, EventRow, LiveModel};
use ratatui::crossterm::event::{Event as TermEvent, KeyEventKind};
use serde_json::json;
use std::io::IsTerminal;
use std::time::Duration;

fn event_row(e: &K8sEvent) -> EventRow {
    let time = e
        .last_timestamp
        .as_ref()
        .map(|t| t.0)
        .or_else(|| e.event_time.as_ref().map(|t| t.0))
        .or_else(|| e.metadata.creation_timestamp.as_ref().map(|t| t.0));
    EventRow {
        time,
        type_: e.type_.clone().unwrap_or_default(),
        reason: e.reason.clone().unwrap_or_default(),
        object: format!(
            "{}/{}",
            e.involved_object
                .kind
                .clone()
                .unwrap_or_default()
                .to_lowercase(),
            e.involved_object.name.clone().unwrap_or_default()
        ),
        message: e.message.clone().unwrap_or_default().replace('\n', " "),
    }
}

/// Events about the workload or its pods, newest first, at most 50.
fn relevant_events(events: &Cache<K8sEvent>, name: &str, pods: &[PodView]) -> Vec<EventRow> {
    let names: std::collections::HashSet<&str> = pods.iter().map(|p| p.name.as_str()).collect();
    let mut rows: Vec<EventRow> = events
        .items
        .values()
        .filter(|e| {
            let n = e.involved_object.name.as_deref().unwrap_or_default();
            n == name || names.contains(n)
        })
        .map(event_row)
        .collect();
    rows.sort_by_key(|r| std::cmp::Reverse(r.time));
    rows.truncate(50);
    rows
}

async fn perform(ctx: &Ctx, wl: &Workload, view: &RolloutView, action: &Action) -> Result<String> {
    let target = &wl.target;
    match action {
        Action::Quit => Ok(String::new()),
        Action::SetPaused(p) => {
            wl.merge_patch(&view.paused_patch(*p)).await?;
            Ok(format!(
                "{target} {}",
                if *p { "paused" } else { "resumed" }
            ))
        }
        Action::SetPartition(n) => {
            if target.kind != Kind::CloneSet {
                return Ok("Deployments have no partition".into());
            }
            wl.merge_patch(&view.strategy_patch(json!({"partition": n})))
                .await?;
            Ok(format!("partition set to {n}"))
        }
        Action::Promote => {
            if target.kind != Kind::CloneSet {
                return Ok("Deployments have no partition".into());
            }
            let (kept, next) = crate::cmd::rollout::next_partition(view, false, None);
            wl.merge_patch(&view.strategy_patch(json!({"partition": next, "paused": false})))
                .await?;
            Ok(format!("promoted: partition {kept} -> {next}"))
        }
        Action::Recreate(pod) => {
            let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &wl.namespace);
            let p = pods
                .get(pod)
                .await
                .map_err(|e| CliError::from_kube(e, Some(("Pod", pod, &wl.namespace))))?;
            let crr = CrrClient::new(ctx, &wl.namespace).await?;
            let name = crr.create(&p, &[], false).await?;
            Ok(format!("containerrecreaterequest/{name} created for {pod}"))
        }
    }
}

/// Pod views keyed by name and resourceVersion, so a change to one pod among thousands does not
/// re-parse every pod's annotations.
#[derive(Default)]
struct ViewCache {
    views: std::collections::HashMap<String, (String, PodView)>,
}

impl ViewCache {
    fn get(&mut self, pod: &Pod) -> PodView {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let rv = pod.metadata.resource_version.clone().unwrap_or_default();
        match self.views.get(&name) {
            Some((cached_rv, v)) if *cached_rv == rv && !rv.is_empty() => v.clone(),
            _ => {
                let v = PodView::from_pod(pod);
                self.views.insert(name, (rv, v.clone()));
                v
            }
        }
    }
}

/// How long `--exit-when-done` keeps the final frame on screen.
const EXIT_LINGER: Duration = Duration::from_secs(3);

/// The exit code once the rollout shown has ended (complete, failed or paused), else None.
fn final_exit_code(model: &LiveModel) -> Option<i32> {
    let view = model.rollout.as_ref()?;
    let decision = status::decide(view, &status::PodSummary::from_pods(&model.pods));
    match decision.outcome {
        status::Outcome::Progressing | status::Outcome::TimedOut => None,
        outcome => Some(status::exit_code(outcome, false, true)),
    }
}

/// Restores the terminal even when the loop returns early with an error.
struct TermGuard;

impl Drop for TermGuard {
    fn drop(&mut self) {
        ratatui::restore();
    }
}

pub async fn run(ctx: &Ctx, args: &WatchArgs) -> Result<i32> {
    if !std::io::stdout().is_terminal() {
        return Err(CliError::Usage(format!(
            "rollout watch needs an interactive terminal; in scripts use `kubectl kruise rollout status {}` (add -o json for machine-readable output)",
            args.target
        )));
    }
    let color = !(args.no_color || crate::no_color_env());
    let wl = Workload::locate(ctx, &args.target).await?;
    let first = wl.view().await?;
    let pods_api: Api<Pod> = Api::namespaced(ctx.client.clone(), &wl.namespace);
    let events_api: Api<K8sEvent> = Api::namespaced(ctx.client.clone(), &wl.namespace);
    let mut updates = watch::stream(
        wl.api.clone(),
        &args.target.name,
        pods_api,
        &first.selector,
        Some(events_api),
    );

    // crossterm's reader blocks, so it lives on its own thread and feeds a channel.
    let (key_tx, mut key_rx) = tokio::sync::mpsc::unbounded_channel::<TermEvent>();
    std::thread::spawn(move || {
        while let Ok(ev) = ratatui::crossterm::event::read() {
            if key_tx.send(ev).is_err() {
                break;
            }
        }
    });

    let mut model = LiveModel::new(
        &args.target.to_string(),
        &wl.namespace,
        jiff::Timestamp::now(),
        color,
    );
    model.rollout = Some(first);
    let mut objects: Cache<DynamicObject> = Cache::default();
    let mut pods: Cache<Pod> = Cache::default();
    let mut events: Cache<K8sEvent> = Cache::default();
    let mut terminal = ratatui::try_init().map_err(|e| CliError::Other(e.into()))?;
    let _guard = TermGuard;
    let mut views = ViewCache::default();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let mut dirty = true;
    let mut ticks: u64 = 0;
    // With --exit-when-done: when the rollout ended and with which exit code; the view stays up
    // a moment so the final state can be read.
    let mut ended: Option<(tokio::time::Instant, i32)> = None;

    loop {
        if args.exit_when_done {
            match (ended, final_exit_code(&model)) {
                (None, Some(code)) => ended = Some((tokio::time::Instant::now(), code)),
                (Some(_), None) => ended = None,
                (Some((at, code)), Some(_)) if at.elapsed() >= EXIT_LINGER => return Ok(code),
                _ => {}
            }
        }
        if dirty {
            let size = terminal.size().map_err(|e| CliError::Other(e.into()))?;
            model.page =
                render::table_rows(ratatui::layout::Rect::new(0, 0, size.width, size.height));
            terminal
                .draw(|f| render::render(f, &model))
                .map_err(|e| CliError::Other(e.into()))?;
            dirty = false;
        }
        tokio::select! {
            next = updates.next() => {
                let Some(next) = next else { return Err(CliError::Api("the watch ended unexpectedly".into())) };
                match next {
                    Err(e) if watch::is_fatal(&e) => return Err(e),
                    Err(e) => { model.flash = format!("watch error (retrying): {e}"); model.connected = false; dirty = true; }
                    Ok(Update::Object(ev)) => {
                        if objects.apply(*ev) {
                            model.connected = true;
                            model.rollout = watch::object_json(&objects, &args.target.name, &wl.resource).map(|raw| RolloutView::from_json(&raw));
                            dirty = true;
                        }
                    }
                    Ok(Update::Pod(ev)) => {
                        if pods.apply(*ev) {
                            let owner = model.rollout.as_ref().filter(|r| r.kind == Kind::CloneSet).map(|r| r.uid.clone());
                            model.set_pods(watch::owned(&pods, owner.as_deref()).map(|p| views.get(p)).collect());
                            // Forget pods that are gone once the cache has grown well past the live set.
                            if views.views.len() > pods.items.len() * 2 + 64 { views.views.retain(|n, _| pods.items.contains_key(n)); }
                            model.events = relevant_events(&events, &args.target.name, &model.pods);
                            dirty = true;
                        }
                    }
                    Ok(Update::Event(ev)) => {
                        if events.apply(*ev) {
                            let rows = relevant_events(&events, &args.target.name, &model.pods);
                            if rows != model.events { model.events = rows; dirty = true; }
                        }
                    }
                }
            }
            key = key_rx.recv() => {
                let Some(ev) = key else { return Ok(exit::OK) };
                match ev {
                    TermEvent::Key(k) if k.kind == KeyEventKind::Press => {
                        dirty = true;
                        model.flash.clear();
                        match model.on_key(k) {
                            Some(Action::Quit) => return Ok(exit::OK),
                            Some(action) => {
                                let Some(view) = model.rollout.clone() else { continue };
                                model.flash = match perform(ctx, &wl, &view, &action).await {
                                    Ok(msg) => msg,
                                    Err(e) => format!("error: {e}"),
                                };
                            }
                            None => {}
                        }
                    }
                    TermEvent::Resize(..) => dirty = true,
                    _ => {}
                }
            }
            _ = tick.tick() => {
                // Ages and grace countdowns change with time alone; redraw only when one is shown.
                model.now = jiff::Timestamp::now();
                ticks += 1;
                // Event ages are coarse, so they refresh every 10 s; a grace countdown every second.
                if model.has_countdown() || (ticks.is_multiple_of(10) && !model.events.is_empty()) { dirty = true; }
            }
        }
    }
}
