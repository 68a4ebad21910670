//! The pure decision of one AdvancedCronJob reconcile (upstream `reconcileJob`,
//! `reconcileBroadcastJob` and `reconcileImageListPullJob`, which share one shape): from the
//! object, its runs (the jobs it owns) and the time, what to prune, whether a run is due and how
//! the concurrency policy lets it start, the status, and when to look again. No API calls; the
//! clock is a parameter.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp, Zoned};
use kruise_api::apps::v1beta1::{AdvancedCronJob, ConcurrencyPolicy};
use kruise_api::cron::{self, ScheduleError};
use kube::ResourceExt;

/// Most missed schedule points looked at before giving up (upstream's guard against a wrong
/// clock or a schedule far behind: more than this many is an error, nothing is created).
pub const MAX_MISSED_STARTS: usize = 100;

/// One job the AdvancedCronJob created, as the plan needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Child {
    pub name: String,
    pub state: ChildState,
    /// The `apps.kruise.io/scheduled-at` annotation, when it parses.
    pub scheduled_at: Option<Timestamp>,
    /// `status.startTime`.
    pub started_at: Option<Timestamp>,
    /// Being deleted: not pruned again, not counted as history.
    pub deleting: bool,
}

/// Where a run is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChildState {
    Active,
    Succeeded,
    Failed,
}

/// Why nothing can be scheduled (each is a Warning Event).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    #[error("unparseable schedule {schedule:?}: {source}")]
    Schedule {
        schedule: String,
        source: ScheduleError,
    },
    #[error(
        "too many missed start times (> {MAX_MISSED_STARTS}). Set or decrease \
         .spec.startingDeadlineSeconds or check clock skew"
    )]
    TooManyMissed,
}

/// What this reconcile does about the schedule.
#[derive(Clone, Debug, PartialEq)]
pub enum Run {
    /// Paused, or no point has passed since the last run.
    Idle,
    /// Create the run of `at`, first deleting `replace` (indexes into the children; Replace).
    Create {
        at: Zoned,
        name: String,
        replace: Vec<usize>,
    },
    /// Forbid: a run is active, the run of `at` waits for it.
    Forbidden { at: Zoned },
    /// The run of `at` is past `startingDeadlineSeconds`.
    TooLate { at: Zoned },
    /// The schedule cannot be followed.
    Problem(Problem),
}

/// The writes and status of one reconcile.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// Finished runs beyond the history limits, oldest first (indexes into the children).
    pub prune: Vec<usize>,
    pub run: Run,
    /// The active runs for `status.active`, before the run's own changes.
    pub active: Vec<usize>,
    /// `status.lastScheduleTime` before the run's own change.
    pub last_schedule_time: Option<Timestamp>,
    /// When the next point comes, from now.
    pub requeue: Option<Duration>,
}

/// The name of the run of `at` (upstream: `<name>-<unix seconds>`, the same for a point however
/// often it is tried, so a point never runs twice).
pub fn run_name(acj: &str, at: &Zoned) -> String {
    format!("{acj}-{}", at.timestamp().as_second())
}

/// The plan of one reconcile at `now`.
pub fn plan(acj: &AdvancedCronJob, children: &[Child], now: Timestamp) -> Plan {
    let spec = &acj.spec;
    let active: Vec<usize> = indexes(children, |c| c.state == ChildState::Active);
    let last_schedule_time = last_schedule_time(acj, children);
    let mut prune = history_to_prune(children, ChildState::Failed, spec.failed_jobs_history_limit);
    prune.extend(history_to_prune(
        children,
        ChildState::Succeeded,
        spec.successful_jobs_history_limit,
    ));
    let mut plan = Plan {
        prune,
        run: Run::Idle,
        active,
        last_schedule_time,
        requeue: None,
    };
    if spec.is_paused() {
        return plan;
    }
    let schedule = match cron::for_cron_job(&spec.schedule, spec.time_zone.as_deref()) {
        Ok(s) => s,
        Err(source) => {
            plan.run = Run::Problem(Problem::Schedule {
                schedule: spec.schedule.clone(),
                source,
            });
            return plan;
        }
    };
    plan.requeue = schedule
        .next(now)
        .map(|n| n.timestamp().duration_since(now).unsigned_abs());
    let created = acj
        .metadata
        .creation_timestamp
        .as_ref()
        .map_or(now, |t| t.0);
    let missed = match last_missed(
        &schedule,
        last_schedule_time.unwrap_or(created),
        spec.starting_deadline_seconds,
        now,
    ) {
        Ok(Some(m)) => m,
        Ok(None) => return plan,
        Err(p) => {
            plan.run = Run::Problem(p);
            return plan;
        }
    };
    plan.run = decide(acj, &plan.active, missed, now);
    plan
}

/// Deadline, then concurrency policy, for the latest missed point.
fn decide(acj: &AdvancedCronJob, active: &[usize], at: Zoned, now: Timestamp) -> Run {
    let spec = &acj.spec;
    if let Some(sds) = spec.starting_deadline_seconds
        && at
            .timestamp()
            .checked_add(SignedDuration::from_secs(sds))
            .is_ok_and(|deadline| deadline < now)
    {
        return Run::TooLate { at };
    }
    match spec.concurrency() {
        ConcurrencyPolicy::Forbid if !active.is_empty() => Run::Forbidden { at },
        policy => Run::Create {
            name: run_name(&acj.name_any(), &at),
            replace: if policy == ConcurrencyPolicy::Replace {
                active.to_vec()
            } else {
                Vec::new()
            },
            at,
        },
    }
}

/// upstream `getNextSchedule`: the latest point in `(earliest, now]`, where `earliest` is the
/// last run (or the creation) moved up to `now - startingDeadlineSeconds`; more than
/// [`MAX_MISSED_STARTS`] points is an error.
pub fn last_missed(
    schedule: &cron::Schedule,
    earliest: Timestamp,
    starting_deadline_seconds: Option<i64>,
    now: Timestamp,
) -> Result<Option<Zoned>, Problem> {
    let mut earliest = earliest;
    if let Some(sds) = starting_deadline_seconds
        && let Ok(deadline) = now.checked_sub(SignedDuration::from_secs(sds))
        && deadline > earliest
    {
        earliest = deadline;
    }
    if earliest > now {
        return Ok(None);
    }
    let mut last = None;
    let mut starts = 0;
    let mut t = schedule.next(earliest);
    while let Some(point) = t.filter(|p| p.timestamp() <= now) {
        starts += 1;
        if starts > MAX_MISSED_STARTS {
            return Err(Problem::TooManyMissed);
        }
        t = schedule.next(point.timestamp());
        last = Some(point);
    }
    Ok(last)
}

/// The latest point a run was created for: the newest `scheduled-at` of the runs, never older
/// than the status already says (upstream reads the runs only, so a history limit that deleted
/// every run would make it schedule the last point again).
fn last_schedule_time(acj: &AdvancedCronJob, children: &[Child]) -> Option<Timestamp> {
    let recorded = acj
        .status
        .as_ref()
        .and_then(|s| s.last_schedule_time.as_ref())
        .map(|t| t.0);
    children
        .iter()
        .filter_map(|c| c.scheduled_at)
        .chain(recorded)
        .max()
}

/// The oldest finished runs of one kind beyond `limit` (upstream: sorted by start time, unset
/// first; nothing when the limit is unset).
fn history_to_prune(children: &[Child], state: ChildState, limit: Option<i32>) -> Vec<usize> {
    let Some(limit) = limit else {
        return Vec::new();
    };
    let mut finished = indexes(children, |c| c.state == state && !c.deleting);
    finished.sort_by_key(|&i| (children[i].started_at.is_some(), children[i].started_at));
    let keep = usize::try_from(limit.max(0)).unwrap_or(0);
    let excess = finished.len().saturating_sub(keep);
    finished.truncate(excess);
    finished
}

fn indexes(children: &[Child], f: impl Fn(&Child) -> bool) -> Vec<usize> {
    children
        .iter()
        .enumerate()
        .filter(|(_, c)| f(c))
        .map(|(i, _)| i)
        .collect()
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
