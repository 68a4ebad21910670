//! `kubectl-kruise`: a kubectl plugin for OpenKruise / Kruise-rs workloads. The binary parses
//! the command line, starts logging and the runtime, and hands over to the library.

use clap::{CommandFactory, Parser};
use kubectl_kruise::cli::Cli;
use kubectl_kruise::error::exit;
use kubectl_kruise::{cmd, dispatch, target};
use tracing_subscriber::EnvFilter;

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
