//! `kubectl-kruise`: a kubectl plugin for OpenKruise / Kruise-rs workloads.

mod cli;
mod cmd;
mod ctx;
mod error;
mod keys;
mod math;
mod status;
mod target;
mod tui;
mod view;
mod watch;

use clap::{CommandFactory, Parser};
use cli::{Cli, Command, ImageCmd, Rollout, SetCmd};
use error::{CliError, exit};
use tracing_subscriber::EnvFilter;

/// True when the environment asks for no colour (https://no-color.org) or a dumb terminal.
pub fn no_color_env() -> bool {
    std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty())
        || std::env::var("TERM").is_ok_and(|t| t == "dumb")
}

fn init_tracing(verbose: u8) {
    let default = match verbose {
        // The client logs connection failures itself; our error message already says it.
        0 => "warn,kube_client=off",
        1 => "kubectl_kruise=debug,info",
        _ => "trace",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    // Logs go to stderr so stdout stays clean for -o json.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
}

async fn dispatch(cli: Cli) -> Result<i32, CliError> {
    if let Command::Completion { shell } = cli.command {
        cmd::completion::print(shell, &mut Cli::command());
        return Ok(exit::OK);
    }
    let ctx = ctx::Ctx::connect(&cli.connect).await?;
    match cli.command {
        Command::Completion { .. } => Ok(exit::OK),
        Command::Rollout(r) => match r {
            Rollout::Status(args) => cmd::status::run(&ctx, &args).await,
            Rollout::Pause { targets } => cmd::rollout::pause(&ctx, &targets, true).await,
            Rollout::Resume { targets } => cmd::rollout::pause(&ctx, &targets, false).await,
            Rollout::History {
                target,
                revision,
                output,
            } => cmd::history::history(&ctx, &target, revision, output).await,
            Rollout::Undo {
                target,
                to_revision,
                dry_run,
            } => cmd::history::undo(&ctx, &target, to_revision, dry_run).await,
            Rollout::Restart(args) => cmd::restart::run(&ctx, &args).await,
            Rollout::Partition { target, value } => {
                cmd::rollout::partition(&ctx, &target, &value).await
            }
            Rollout::Promote { target, full, step } => {
                cmd::rollout::promote(&ctx, &target, full, step.as_ref()).await
            }
            Rollout::Watch(args) => tui::run(&ctx, &args).await,
            Rollout::List {
                all_namespaces,
                output,
            } => cmd::rollout::list(&ctx, all_namespaces, output).await,
        },
        Command::Set(SetCmd::Image {
            target,
            images,
            dry_run,
        }) => cmd::set_image::run(&ctx, &target, &images, dry_run).await,
        Command::RecreateContainer(args) => cmd::crr::run(&ctx, &args).await,
        Command::Image(ImageCmd::Pull(args)) => cmd::pull::run(&ctx, &args).await,
    }
}

/// Reports a command-line error. An unknown kind is documented as "kind not found" (exit 6) and,
/// like every failure, gets one line; other mistakes keep clap's usage output (exit 2).
fn usage_exit(e: clap::Error) -> ! {
    let unknown_kind = std::error::Error::source(&e)
        .and_then(|s| s.downcast_ref::<target::TargetError>())
        .filter(|t| matches!(t, target::TargetError::UnknownKind(_)));
    if let Some(t) = unknown_kind {
        eprintln!("error: {t}");
        std::process::exit(exit::NOT_FOUND);
    }
    e.exit()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    // Hidden: the live view's render benchmark (`make bench-node`), no cluster involved.
    if args.get(1).is_some_and(|a| a == "__bench-tui") {
        std::process::exit(tui::bench::main(&args[2..]));
    }
    // kubectl's completion protocol: handled before clap, which would reject partial words.
    let completing = args.get(1).is_some_and(|a| a == "__complete");
    let cli = if completing {
        None
    } else {
        Some(Cli::try_parse().unwrap_or_else(|e| usage_exit(e)))
    };
    init_tracing(cli.as_ref().map(|c| c.verbose).unwrap_or(0));
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            std::process::exit(exit::FAILED);
        }
    };
    let Some(cli) = cli else {
        runtime.block_on(cmd::complete::run(&Cli::command(), &args[2..]));
        std::process::exit(exit::OK);
    };
    let code = match runtime.block_on(dispatch(cli)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            e.exit_code()
        }
    };
    std::process::exit(code);
}
