//! `rollout status`: watch until the rollout is really done.

use crate::cli::{Output, StatusArgs};
use crate::ctx::{Ctx, Workload};
use crate::error::{CliError, Result, kube_err};
use crate::status::held::{Budget, Budgets, Reads};
use crate::status::{StatusReport, decide, exit_code};
use crate::view::verdict::{Decision, Outcome, PodSummary};
use crate::view::{PodView, RolloutView};
use crate::watch::{self, Cache, Update};
use futures::StreamExt;
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use k8s_openapi::api::core::v1::{Event as K8sEvent, Pod};
use kruise_api::policy::v1alpha1::PodUnavailableBudget;
use kube::api::{Api, ListParams};
use std::io::{IsTerminal, Write};

/// The three lines shown on a terminal.
struct Bars {
    _multi: MultiProgress,
    updated: ProgressBar,
    ready: ProgressBar,
    msg: ProgressBar,
}

impl Bars {
    fn new() -> Self {
        let multi = MultiProgress::new();
        let style = ProgressStyle::with_template("{prefix:>8} [{bar:40.cyan/blue}] {pos}/{len}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
        let bar = |prefix: &str| {
            let b = multi.add(ProgressBar::new(0));
            b.set_style(style.clone());
            b.set_prefix(prefix.to_string());
            b
        };
        let updated = bar("updated");
        let ready = bar("ready");
        let msg = multi.add(ProgressBar::new_spinner());
        msg.set_style(
            ProgressStyle::with_template("{spinner} {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        msg.enable_steady_tick(std::time::Duration::from_millis(120));
        Bars {
            _multi: multi,
            updated,
            ready,
            msg,
        }
    }
}

/// How each state change is shown.
enum Reporter {
    Plain,
    /// Created on the first report so no empty bars flash before the first real numbers.
    Bars(std::cell::OnceCell<Bars>),
    Doc(Output),
}

impl Reporter {
    fn new(output: Output) -> Self {
        if output != Output::Text {
            return Reporter::Doc(output);
        }
        if !std::io::stdout().is_terminal() || crate::no_color_env() {
            return Reporter::Plain;
        }
        Reporter::Bars(std::cell::OnceCell::new())
    }

    fn show(&self, report: &StatusReport) {
        match self {
            Reporter::Plain => println!("{}", report.message),
            Reporter::Bars(cell) => {
                let bars = cell.get_or_init(Bars::new);
                let expected = report.expected_updated_replicas.max(0) as u64;
                let ready = report
                    .updated_ready_replicas
                    .unwrap_or(report.available_replicas);
                bars.updated.set_length(expected);
                bars.updated
                    .set_position(report.updated_replicas.max(0) as u64);
                bars.ready.set_length(expected);
                bars.ready.set_position(ready.max(0) as u64);
                bars.msg.set_message(report.message.clone());
            }
            Reporter::Doc(fmt) => print_doc(*fmt, report),
        }
    }

    fn finish(&self) {
        if let Reporter::Bars(cell) = self
            && let Some(bars) = cell.get()
        {
            // `abandon` keeps the real numbers; `finish` would jump to 100%.
            bars.updated.abandon();
            bars.ready.abandon();
            bars.msg.finish_and_clear();
        }
    }
}

pub fn print_doc<T: serde::Serialize>(fmt: Output, value: &T) {
    let mut out = std::io::stdout().lock();
    let text = match fmt {
        Output::Yaml => serde_saphyr::to_string(value)
            .map(|y| format!("---\n{}", y.trim_end()))
            .map_err(|e| e.to_string()),
        _ => serde_json::to_string(value).map_err(|e| e.to_string()),
    };
    match text {
        Ok(t) => {
            // A closed pipe (e.g. `| head`) is not worth a panic.
            let _ = writeln!(out, "{t}");
            let _ = out.flush();
        }
        Err(e) => tracing::error!(error = %e, "cannot serialise output"),
    }
}

fn summarize(view: &RolloutView, pods: &Cache<Pod>, reads: &Reads) -> PodSummary {
    let owner = (view.kind.owns_pods() && !view.uid.is_empty()).then_some(view.uid.as_str());
    let views: Vec<PodView> = watch::owned(pods, owner)
        .map(|p| PodView::from_pod(p).for_kind(view.kind))
        .collect();
    let mut summary = PodSummary::from_pods(views.iter());
    summary.held = crate::status::held::held(view, &views, crate::status::HELD_LIMIT, reads);
    summary
}

/// What `held` needs beyond the Pods, read once when the command concludes without the
/// rollout done.
pub(crate) async fn reads(ctx: &Ctx, pods: &Cache<Pod>) -> Reads {
    Reads {
        budgets: budgets(ctx, pods).await,
        pulls: pull_failures(ctx, pods).await,
    }
}

/// For each container in `CrashLoopBackOff`, whether its Pod's Events say the image cannot be
/// pulled now. Best effort, like the budgets: unreadable Events leave the crash loop as it is.
async fn pull_failures(
    ctx: &Ctx,
    pods: &Cache<Pod>,
) -> std::collections::BTreeMap<(String, String), String> {
    let mut out = std::collections::BTreeMap::new();
    for pod in pods.items.values() {
        let looping: Vec<String> = PodView::from_pod(pod)
            .containers
            .into_iter()
            .filter(|c| {
                c.waiting
                    .as_ref()
                    .is_some_and(|(r, _)| r == "CrashLoopBackOff")
            })
            .map(|c| c.name)
            .collect();
        let (Some(ns), Some(name), Some(uid)) = (
            pod.metadata.namespace.as_deref(),
            pod.metadata.name.as_deref(),
            pod.metadata.uid.as_deref(),
        ) else {
            continue;
        };
        if looping.is_empty() {
            continue;
        }
        let api: Api<K8sEvent> = Api::namespaced(ctx.client.clone(), ns);
        let lp = ListParams::default().fields(&format!("involvedObject.uid={uid}"));
        let events = match api.list(&lp).await {
            Ok(l) => l.items,
            Err(e) => {
                tracing::debug!(error = %e, pod = name, "cannot list the Pod's Events");
                continue;
            }
        };
        for c in looping {
            if let Some(m) = crate::view::events::pull_failure(&events, uid, &c) {
                out.insert((name.to_owned(), c), m);
            }
        }
    }
    out
}

/// The PodUnavailableBudgets the Pods name, read once, when the command concludes without the
/// rollout done. One that cannot be read (no such kind, no access, deleted) is left out: the
/// Pod's other reasons still hold.
async fn budgets(ctx: &Ctx, pods: &Cache<Pod>) -> Budgets {
    let named: std::collections::BTreeSet<(String, String)> = pods
        .items
        .values()
        .filter_map(|p| {
            let name = kruise_api::policy::v1alpha1::pubcontrol::related_budget_name(p)?;
            Some((p.metadata.namespace.clone()?, name.to_owned()))
        })
        .collect();
    let mut out = Budgets::new();
    for (ns, name) in named {
        let api: Api<PodUnavailableBudget> = Api::namespaced(ctx.client.clone(), &ns);
        match api.get_opt(&name).await {
            Ok(Some(b)) => {
                let status = b.status.unwrap_or_default();
                let using = status
                    .unavailable_pods
                    .into_keys()
                    .chain(status.disrupted_pods.into_keys())
                    .collect();
                out.insert(
                    name,
                    Budget {
                        allowed: status.unavailable_allowed,
                        using,
                    },
                );
            }
            Ok(None) => {}
            Err(e) => tracing::debug!(error = %e, budget = %name, "cannot read the budget"),
        }
    }
    out
}

/// Prints the final state and turns it into the command's result.
fn conclude(reporter: &Reporter, report: &mut StatusReport, code: i32) -> Result<i32> {
    reporter.finish();
    report.done = true;
    report.exit_code = Some(code);
    match reporter {
        Reporter::Doc(fmt) => {
            print_doc(*fmt, report);
            Ok(code)
        }
        _ if code == 0 => {
            println!("{}", report.message);
            Ok(0)
        }
        _ => {
            // Why it is not done, Pod by Pod, before the one-line error.
            for h in &report.held {
                println!("  {}: {}", h.pod, h.reason);
            }
            let msg = format!(
                "{}/{}: {}",
                report.kind.to_lowercase(),
                report.name,
                report.message
            );
            Err(match report.outcome {
                Outcome::Paused => {
                    CliError::Paused(format!("{msg} (use --success-on-pause to accept)"))
                }
                Outcome::Failed => CliError::Failed(msg),
                Outcome::TimedOut => CliError::Timeout(msg),
                Outcome::Progressing => CliError::Progressing(msg),
                Outcome::Complete => CliError::Failed(msg),
            })
        }
    }
}

pub async fn run(ctx: &Ctx, args: &StatusArgs) -> Result<i32> {
    let wl = Workload::locate(ctx, &args.target).await?;
    let first = wl.view().await?;
    let selector = first.list_selector()?.to_owned();
    let pods_api: Api<Pod> = wl.pods_api(&ctx.client);
    let reporter = Reporter::new(args.output);

    if !args.watch {
        let mut cache = Cache::default();
        let list = pods_api
            .list(&ListParams::default().labels(&selector))
            .await
            .map_err(kube_err)?;
        for p in list.items {
            cache
                .items
                .insert(p.metadata.name.clone().unwrap_or_default(), p);
        }
        let pods = summarize(&first, &cache, &reads(ctx, &cache).await);
        let decision = decide(&first, &pods);
        let mut report = StatusReport::new(&first, &pods, &decision);
        let code = exit_code(decision.outcome, args.success_on_pause, false);
        return conclude(&reporter, &mut report, code);
    }

    let mut updates = watch::stream(wl.api.clone(), &args.target.name, pods_api, &selector, None);
    let mut objects: Cache<kube::api::DynamicObject> = Cache::default();
    let mut pods: Cache<Pod> = Cache::default();
    let mut view = first;
    let mut last: Option<StatusReport> = None;
    let mut synced = (false, false);
    let deadline = (!args.timeout.is_zero()).then(|| tokio::time::Instant::now() + args.timeout);
    let sleep = tokio::time::sleep_until(deadline.unwrap_or_else(|| {
        tokio::time::Instant::now() + std::time::Duration::from_secs(86400 * 365)
    }));
    tokio::pin!(sleep);

    loop {
        tokio::select! {
            _ = &mut sleep => {
                let pods_summary = summarize(&view, &pods, &reads(ctx, &pods).await);
                let decision = decide(&view, &pods_summary);
                let mut report = StatusReport::new(&view, &pods_summary, &Decision {
                    outcome: Outcome::TimedOut,
                    message: format!("timed out after {}s: {}", args.timeout.as_secs(), decision.message),
                });
                return conclude(&reporter, &mut report, exit_code(Outcome::TimedOut, args.success_on_pause, true));
            }
            next = updates.next() => {
                let Some(next) = next else {
                    return Err(CliError::Api("the watch ended unexpectedly".into()));
                };
                match next {
                    Err(e) if watch::is_fatal(&e) => return Err(e),
                    Err(e) => { tracing::warn!(error = %e, "watch error, retrying"); continue; }
                    Ok(Update::Object(ev)) => {
                        if matches!(*ev, kube::runtime::watcher::Event::InitDone) { synced.0 = true; }
                        objects.apply(*ev);
                        match watch::object_json(&objects, &args.target.name, &wl.resource) {
                            Some(raw) => view = RolloutView::from_json(&raw),
                            None if synced.0 => return Err(CliError::Failed(format!("{} was deleted", args.target))),
                            None => {}
                        }
                    }
                    Ok(Update::Pod(ev)) => {
                        if matches!(*ev, kube::runtime::watcher::Event::InitDone) { synced.1 = true; }
                        pods.apply(*ev);
                    }
                    Ok(Update::Event(_)) => {}
                }
                // Decide only on a complete picture: both initial lists must have arrived.
                if !(synced.0 && synced.1) { continue; }
                let pods_summary = summarize(&view, &pods, &Reads::default());
                let decision = decide(&view, &pods_summary);
                let report = StatusReport::new(&view, &pods_summary, &decision);
                if last.as_ref() != Some(&report) {
                    tracing::debug!(outcome = ?decision.outcome, message = %decision.message, "status changed");
                    let terminal = matches!(
                        decision.outcome,
                        Outcome::Complete | Outcome::Failed | Outcome::Paused
                    );
                    if terminal {
                        let mut report = report;
                        if decision.outcome != Outcome::Complete {
                            let r = reads(ctx, &pods).await;
                            report.held = summarize(&view, &pods, &r).held;
                        }
                        let code = exit_code(decision.outcome, args.success_on_pause, true);
                        return conclude(&reporter, &mut report, code);
                    }
                    // Plain text prints a line only when its words change; JSON reports every field change.
                    let same_words = last.as_ref().is_some_and(|l| l.message == report.message);
                    if !(same_words && matches!(reporter, Reporter::Plain)) {
                        reporter.show(&report);
                    }
                    last = Some(report);
                }
            }
        }
    }
}
