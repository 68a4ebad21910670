//! `rollout watch` / `rollout tui`: a full-screen view that redraws in place.
//!
//! `model` holds the state and applies every input, `feeds` the watch caches it is built from,
//! `render` draws it (pure), and this module is the event loop: it only selects the next input,
//! hands it to the model, draws after a change, and passes cluster actions to a task so a slow
//! API call never stops the redraws.

pub mod feeds;
pub mod model;
pub mod persisted;
pub mod probes;
pub mod render;

#[cfg(test)]
mod tests;

use crate::cli::WatchArgs;
use crate::cmd::crr::CrrClient;
use crate::ctx::{Ctx, Workload};
use crate::error::{CliError, Result, exit};
use crate::status;
use crate::view::RolloutView;
use crate::view::verdict::{Outcome, PodSummary};
use crate::watch;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Event as K8sEvent, Pod};
use kube::api::Api;
use model::{Action, Input, LiveModel, Request};
use ratatui::crossterm::event::Event as TermEvent;
use serde_json::json;
use std::io::IsTerminal;
use std::time::Duration;
use tokio::sync::mpsc;

/// Carries out one action against the cluster; returns the footer message.
#[tracing::instrument(skip_all, fields(target = %wl.target, action = ?action))]
async fn perform(ctx: &Ctx, wl: &Workload, view: &RolloutView, action: &Action) -> Result<String> {
    let target = &wl.target;
    match action {
        Action::Quit => Ok(String::new()),
        Action::SetPaused(p) => {
            if !target.kind.spec().pause {
                return Ok(format!(
                    "a {} has no pause switch; hold Pods back with the partition (+/-)",
                    target.kind
                ));
            }
            wl.merge_patch(&view.paused_patch(*p)).await?;
            Ok(format!(
                "{target} {}",
                if *p { "paused" } else { "resumed" }
            ))
        }
        Action::SetPartition(n) => {
            if !target.kind.spec().partition {
                return Ok(format!("a {} has no partition", target.kind));
            }
            wl.merge_patch(&view.strategy_patch(json!({"partition": n})))
                .await?;
            Ok(format!("partition set to {n}"))
        }
        Action::Promote => {
            if !target.kind.spec().partition {
                return Ok(format!("a {} has no partition", target.kind));
            }
            let (kept, next) = crate::cmd::rollout::next_partition(view, false, None);
            wl.merge_patch(&crate::cmd::rollout::promote_patch(view, target.kind, next))
                .await?;
            Ok(format!("promoted: partition {kept} -> {next}"))
        }
        Action::Recreate { namespace, pod } => {
            // A SidecarSet's Pods live in any namespace: the row's, not the view's.
            let ns = if namespace.is_empty() {
                &wl.namespace
            } else {
                namespace
            };
            let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), ns);
            let p = pods
                .get(pod)
                .await
                .map_err(|e| CliError::from_kube(e, Some(("Pod", pod, ns))))?;
            let crr = CrrClient::new(ctx, ns).await?;
            let name = crr.create(&p, &[], false).await?;
            Ok(format!("containerrecreaterequest/{name} created for {pod}"))
        }
    }
}

/// How long `--exit-when-done` keeps the final frame on screen.
const EXIT_LINGER: Duration = Duration::from_secs(3);

/// The exit code once the rollout shown has ended (complete, failed or paused), else None.
fn final_exit_code(model: &LiveModel) -> Option<i32> {
    let view = model.rollout.as_ref()?;
    let decision = status::decide(view, &PodSummary::from_pods(&model.pods));
    match decision.outcome {
        Outcome::Progressing | Outcome::TimedOut => None,
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

/// Runs cluster actions one after another, off the event loop; each result comes back as the
/// footer message. Ends when the loop drops its sender or stops listening.
async fn action_task(
    ctx: Ctx,
    wl: Workload,
    mut requests: mpsc::UnboundedReceiver<Request>,
    results: mpsc::UnboundedSender<String>,
) {
    while let Some(req) = requests.recv().await {
        let msg = match perform(&ctx, &wl, &req.view, &req.action).await {
            Ok(msg) => msg,
            Err(e) => format!("error: {e}"),
        };
        if results.send(msg).is_err() {
            break;
        }
    }
}

/// Stops the action task when the loop returns, however it returns.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The terminal's events. crossterm's reader blocks, so it lives on its own thread and feeds a
/// channel.
fn read_terminal() -> mpsc::UnboundedReceiver<TermEvent> {
    let (key_tx, key_rx) = mpsc::unbounded_channel::<TermEvent>();
    std::thread::spawn(move || {
        while let Ok(ev) = ratatui::crossterm::event::read() {
            if key_tx.send(ev).is_err() {
                break;
            }
        }
    });
    key_rx
}

/// A StatefulSet's Pods show the node their PersistentPodState recorded: sent to `pps_tx` while
/// the task lives (none for other kinds).
fn poll_persisted(
    ctx: &Ctx,
    wl: &Workload,
    args: &WatchArgs,
    pps_tx: mpsc::UnboundedSender<std::collections::BTreeMap<String, String>>,
) -> Option<AbortOnDrop> {
    if matches!(
        args.target.kind,
        crate::view::workload::Kind::StatefulSet | crate::view::workload::Kind::AdvancedStatefulSet
    ) {
        let target = kruise_api::policy::v1alpha1::TargetReference {
            api_version: wl.resource.api_version.clone(),
            kind: wl.resource.kind.clone(),
            name: args.target.name.clone(),
        };
        let api = Api::namespaced(ctx.client.clone(), &wl.namespace);
        Some(AbortOnDrop(tokio::spawn(persisted::poll(
            api, target, pps_tx,
        ))))
    } else {
        None
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
    let selector = first.list_selector()?.to_owned();
    let pods_api: Api<Pod> = wl.pods_api(&ctx.client);
    let events_api: Api<K8sEvent> = Api::namespaced(ctx.client.clone(), &wl.namespace);
    let mut updates = watch::stream(
        wl.api.clone(),
        &args.target.name,
        pods_api,
        &selector,
        Some(events_api),
    );

    let mut key_rx = read_terminal();
    let (req_tx, req_rx) = mpsc::unbounded_channel::<Request>();
    let (done_tx, mut done_rx) = mpsc::unbounded_channel::<String>();
    let _actions = AbortOnDrop(tokio::spawn(action_task(
        ctx.clone(),
        wl.clone(),
        req_rx,
        done_tx,
    )));

    let (pps_tx, mut pps_rx) = mpsc::unbounded_channel();
    let _poll = poll_persisted(ctx, &wl, args, pps_tx.clone());
    // Each Pod shows the state of the PodProbeMarker probes that select it.
    let (probe_tx, mut probe_rx) = mpsc::unbounded_channel();
    let _probes = AbortOnDrop(tokio::spawn(probes::poll(
        Api::namespaced(ctx.client.clone(), &wl.namespace),
        probe_tx,
    )));
    let mut model = LiveModel::new(
        &args.target.to_string(),
        &wl.namespace,
        jiff::Timestamp::now(),
        color,
    )
    .watching(&args.target.name, wl.resource.clone());
    model.rollout = Some(first);
    let mut terminal = ratatui::try_init().map_err(|e| CliError::Other(e.into()))?;
    let _guard = TermGuard;
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let mut dirty = true;
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
        let input = tokio::select! {
            next = updates.next() => match next {
                None => return Err(CliError::Api("the watch ended unexpectedly".into())),
                Some(Err(e)) if watch::is_fatal(&e) => return Err(e),
                Some(Err(e)) => Input::WatchError(e.to_string()),
                Some(Ok(update)) => Input::Watch(update),
            },
            term = key_rx.recv() => match term {
                None => return Ok(exit::OK),
                Some(ev) => Input::Term(ev),
            },
            Some(msg) = done_rx.recv() => Input::ActionDone(msg),
            Some(nodes) = pps_rx.recv() => Input::Persisted(nodes),
            Some(rules) = probe_rx.recv() => Input::Probes(rules),
            _ = tick.tick() => Input::Tick(jiff::Timestamp::now()),
        };
        dirty |= model.apply(input);
        if model.quit {
            return Ok(exit::OK);
        }
        for req in model.outbox.drain(..) {
            // The task only stops with the loop, so a failed send cannot lose a wanted action.
            let _ = req_tx.send(req);
        }
    }
}
