//! The arguments of `create`, `broadcastjob`, `advancedcronjob` and `ephemeraljob`.

use super::{parse_duration, parse_partition};
use crate::math::IntOrPercent;
use clap::{Subcommand, ValueEnum};
use std::time::Duration;

#[derive(Debug, Subcommand)]
pub enum CreateCmd {
    /// Create a BroadcastJob running COMMAND in IMAGE on every eligible node.
    #[command(visible_alias = "bcj")]
    Broadcastjob(CreateBroadcastJobArgs),
    /// Create a ContainerRecreateRequest NAME for a Pod, with kruise-tools' defaults.
    #[command(
        name = "crr",
        visible_alias = "containerrecreaterequest",
        alias = "ContainerRecreateRequest"
    )]
    Crr(CreateCrrArgs),
    /// Create a Job NAME from an AdvancedCronJob's Job template, now, outside its schedule.
    Job {
        name: String,
        /// The AdvancedCronJob: advancedcronjob/NAME (or acj/NAME).
        #[arg(long)]
        from: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum AdvancedCronJobCmd {
    /// Stop creating runs (spec.paused).
    Pause { name: String },
    /// Create runs again; the latest point missed while paused runs at once.
    Resume { name: String },
}

/// kruise-tools' `create ContainerRecreateRequest`, its flag spellings kept as aliases.
#[derive(Debug, clap::Args)]
pub struct CreateCrrArgs {
    pub name: String,
    /// The Pod whose containers to recreate.
    #[arg(short = 'p', long)]
    pub pod: String,
    /// Containers to recreate (default: all of the Pod's).
    #[arg(short = 'c', long, value_delimiter = ',')]
    pub containers: Vec<String>,
    /// Seconds the Pod is marked not ready before a container is stopped.
    #[arg(
        short = 'u',
        long,
        alias = "unreadyGracePeriodSeconds",
        default_value_t = 3
    )]
    pub unready_grace_period_seconds: i64,
    /// Seconds a new container must run, started and ready, to count as recreated.
    #[arg(short = 'm', long, alias = "minStartedSeconds", default_value_t = 3)]
    pub min_started_seconds: i32,
    /// Recreate the containers one after another, in the order given.
    #[arg(long)]
    pub ordered: bool,
    /// Print the object instead of creating it.
    #[arg(long)]
    pub dry_run: bool,
    /// Follow the request until it finishes (exit 0 when every container was recreated).
    #[arg(long)]
    pub wait: bool,
    #[arg(long, value_parser = parse_duration, default_value = "5m")]
    pub timeout: Duration,
}

#[derive(Debug, clap::Args)]
pub struct CreateBroadcastJobArgs {
    pub name: String,
    /// The image of the job's one container.
    #[arg(long)]
    pub image: String,
    /// Most Pods running at once: a number or a percentage of the nodes (default: no limit).
    #[arg(long, value_parser = parse_partition)]
    pub parallelism: Option<IntOrPercent>,
    /// Only nodes with these labels (repeatable k=v).
    #[arg(long = "node-selector")]
    pub node_selector: Vec<String>,
    /// The Pod's restartPolicy.
    #[arg(long, value_enum, default_value_t = RestartPolicy::Never)]
    pub restart_policy: RestartPolicy,
    /// What a failed Pod does to the job.
    #[arg(long, value_enum, default_value_t = FailurePolicy::FailFast)]
    pub failure_policy: FailurePolicy,
    /// Restarts of an OnFailure Pod before it counts as failed.
    #[arg(long)]
    pub restart_limit: Option<i32>,
    /// Never complete: keep giving new nodes a Pod.
    #[arg(long)]
    pub never_complete: bool,
    /// Delete the job this long after it finishes.
    #[arg(long, value_parser = parse_duration)]
    pub ttl: Option<Duration>,
    /// Fail the job when it runs longer than this.
    #[arg(long, value_parser = parse_duration)]
    pub active_deadline: Option<Duration>,
    /// Create it paused.
    #[arg(long)]
    pub paused: bool,
    /// Follow the job until it ends (exit 0 completed, 1 failed, 3 paused, 4 timed out).
    #[arg(long)]
    pub wait: bool,
    #[arg(long, value_parser = parse_duration, default_value = "30m")]
    pub timeout: Duration,
    /// The command and its arguments (after `--`); the image's own when omitted.
    #[arg(last = true)]
    pub command: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RestartPolicy {
    Never,
    OnFailure,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FailurePolicy {
    Continue,
    FailFast,
    Pause,
}

#[derive(Debug, Subcommand)]
pub enum BroadcastJobCmd {
    /// Follow the job until it ends: exit 0 completed, 1 failed, 3 paused, 4 timed out.
    Wait {
        name: String,
        #[arg(long, value_parser = parse_duration, default_value = "30m")]
        timeout: Duration,
    },
    /// Stop creating Pods (spec.paused).
    Pause { name: String },
    /// Create Pods again.
    Resume { name: String },
}

#[derive(Debug, Subcommand)]
pub enum EphemeralJobCmd {
    /// Stop injecting into further Pods (spec.paused); injected containers run on.
    Pause { name: String },
    /// Inject again, up to parallelism.
    Resume { name: String },
}

/// `kubectl kruise podprobemarker`.
#[derive(Debug, Subcommand)]
pub enum PodProbeMarkerCmd {
    /// Each matched Pod's probe states (from its node's NodePodProbe) and conditions.
    Status { name: String },
}
