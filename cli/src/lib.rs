//! `kubectl-kruise`: a kubectl plugin for OpenKruise / Kruise-rs workloads.
//!
//! A library so the benchmarks drive the same code the binary ships; `main.rs` only parses the
//! command line and calls [`dispatch`].

pub mod cli;
pub mod cmd;
pub mod ctx;
pub mod dev;
pub mod error;
pub mod math;
pub mod status;
pub mod target;
pub mod tui;
pub mod view;
pub mod watch;

use clap::CommandFactory;
use cli::{
    AdvancedCronJobCmd, BroadcastJobCmd, Cli, Command, CreateCmd, DistributionCmd, EphemeralJobCmd,
    ImageCmd, PodProbeMarkerCmd, Rollout, SetCmd,
};
use error::{CliError, exit};

/// True when the environment asks for no colour (https://no-color.org) or a dumb terminal.
pub fn no_color_env() -> bool {
    std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty())
        || std::env::var("TERM").is_ok_and(|t| t == "dumb")
}

/// Runs one parsed command; returns the process exit code.
pub async fn dispatch(cli: Cli) -> Result<i32, CliError> {
    if let Command::Completion { shell } = cli.command {
        cmd::completion::print(shell, &mut Cli::command());
        return Ok(exit::OK);
    }
    let ctx = ctx::Ctx::connect(&cli.connect).await?;
    match cli.command {
        Command::Completion { .. } => Ok(exit::OK),
        Command::Rollout(r) => rollout(&ctx, r).await,
        Command::Set(cmd) => set(&ctx, cmd).await,
        Command::Scaledown {
            target,
            pods,
            dry_run,
        } => cmd::scaledown::run(&ctx, &target, &pods, dry_run).await,
        Command::Migrate(args) => cmd::migrate::run(&ctx, &args).await,
        Command::RecreateContainer(args) => cmd::crr::run(&ctx, &args).await,
        Command::Exec(args) => cmd::exec::run(&ctx, &args).await,
        Command::Describe { target, output } => cmd::describe::run(&ctx, &target, output).await,
        Command::Top(args) => cmd::top::run(&ctx, &args).await,
        Command::Image(ImageCmd::Pull(args)) => cmd::pull::run(&ctx, &args).await,
        Command::Distribution(DistributionCmd::Status { name, output }) => {
            cmd::distribution::status(&ctx, &name, output).await
        }
        Command::Create(CreateCmd::Crr(args)) => cmd::crr::create(&ctx, &args).await,
        Command::Create(CreateCmd::Broadcastjob(args)) => {
            cmd::broadcastjob::create(&ctx, &args).await
        }
        Command::Create(CreateCmd::Job { name, from }) => {
            cmd::advancedcronjob::create_job(&ctx, &name, &from).await
        }
        Command::AdvancedCronJob(AdvancedCronJobCmd::Pause { name }) => {
            cmd::advancedcronjob::pause(&ctx, &name, true).await
        }
        Command::AdvancedCronJob(AdvancedCronJobCmd::Resume { name }) => {
            cmd::advancedcronjob::pause(&ctx, &name, false).await
        }
        Command::EphemeralJob(EphemeralJobCmd::Pause { name }) => {
            cmd::ephemeraljob::pause(&ctx, &name, true).await
        }
        Command::EphemeralJob(EphemeralJobCmd::Resume { name }) => {
            cmd::ephemeraljob::pause(&ctx, &name, false).await
        }
        Command::PodProbeMarker(PodProbeMarkerCmd::Status { name }) => {
            cmd::podprobemarker::status(&ctx, &name).await
        }
        Command::BroadcastJob(BroadcastJobCmd::Wait { name, timeout }) => {
            cmd::broadcastjob::wait(&ctx, &name, timeout).await
        }
        Command::BroadcastJob(BroadcastJobCmd::Pause { name }) => {
            cmd::broadcastjob::pause(&ctx, &name, true).await
        }
        Command::BroadcastJob(BroadcastJobCmd::Resume { name }) => {
            cmd::broadcastjob::pause(&ctx, &name, false).await
        }
        Command::Dev(args) => cmd::dev::run(&cli.connect, &args).await,
        Command::Install(args) => cmd::install::install(&ctx, &args).await,
        Command::Uninstall(args) => cmd::install::uninstall(&ctx, &args).await,
        Command::Check(args) => cmd::check::run(&ctx, &args).await,
    }
}

/// `rollout …`.
async fn rollout(ctx: &ctx::Ctx, r: Rollout) -> Result<i32, CliError> {
    match r {
        Rollout::Status(args) => cmd::status::run(ctx, &args).await,
        Rollout::Pause { targets } => cmd::rollout::pause(ctx, &targets, true).await,
        Rollout::Resume { targets } => cmd::rollout::pause(ctx, &targets, false).await,
        Rollout::History {
            target,
            revision,
            output,
        } => cmd::history::history(ctx, &target, revision, output).await,
        Rollout::Undo {
            target,
            to_revision,
            dry_run,
        } => cmd::history::undo(ctx, &target, to_revision, dry_run).await,
        Rollout::Restart(args) => cmd::restart::run(ctx, &args).await,
        Rollout::Partition {
            target,
            value,
            subset,
        } => cmd::rollout::partition(ctx, &target, &value, subset.as_deref()).await,
        Rollout::Promote {
            target,
            full,
            step,
            subset,
        } => cmd::rollout::promote(ctx, &target, full, step.as_ref(), subset.as_deref()).await,
        Rollout::Watch(args) => tui::run(ctx, &args).await,
        Rollout::List {
            kind,
            all_namespaces,
            output,
        } => cmd::rollout::list(ctx, kind, all_namespaces, output).await,
    }
}

/// `set …`.
async fn set(ctx: &ctx::Ctx, set: SetCmd) -> Result<i32, CliError> {
    match set {
        SetCmd::Image {
            target,
            images,
            dry_run,
        } => cmd::set_image::run(ctx, &target, &images, dry_run).await,
        SetCmd::Env {
            target,
            env,
            containers,
            dry_run,
        } => {
            let edit = cmd::set_template::parse_env(&env).map_err(CliError::Usage)?;
            cmd::set_template::run(ctx, &target, &containers, &edit, dry_run).await
        }
        SetCmd::Resources {
            target,
            containers,
            limits,
            requests,
            dry_run,
        } => {
            let limits = cmd::set_template::parse_resource_list("limits", limits.as_deref())
                .map_err(CliError::Usage)?;
            let requests = cmd::set_template::parse_resource_list("requests", requests.as_deref())
                .map_err(CliError::Usage)?;
            if limits.is_empty() && requests.is_empty() {
                return Err(CliError::Usage(
                    "nothing to change: give --limits and/or --requests".to_owned(),
                ));
            }
            let edit = cmd::set_template::Edit::Resources { limits, requests };
            cmd::set_template::run(ctx, &target, &containers, &edit, dry_run).await
        }
        SetCmd::Serviceaccount {
            target,
            service_account,
            dry_run,
        } => cmd::set_template::service_account(ctx, &target, &service_account, dry_run).await,
    }
}
