//! Turns the gated phase's feature gates on in the installed manager, or back off.
//!
//! `hack/test.sh` runs `kruise-e2e-gates on` before the gated phase and `kruise-e2e-gates off`
//! after it: one manager rollout each way for all the tests of gates that are off by default,
//! which then run in parallel. The gates are `kruise_e2e::manager::GATED_PHASE`.
//!
//! Usage: kruise-e2e-gates on|off

use std::process::ExitCode;

use kruise_e2e::manager::{GATED_PHASE, gated_phase_off, gated_phase_on};

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let arg = std::env::args().nth(1).unwrap_or_default();
    let client = match kruise_e2e::client().await {
        Ok(c) => c,
        Err(e) => {
            eprintln!("kruise-e2e-gates: no cluster: {e}");
            return ExitCode::FAILURE;
        }
    };
    let names: Vec<&str> = GATED_PHASE.iter().map(|g| g.name()).collect();
    let done = match arg.as_str() {
        "on" => gated_phase_on(&client).await,
        "off" => gated_phase_off(&client).await,
        _ => {
            eprintln!("usage: kruise-e2e-gates on|off");
            return ExitCode::from(2);
        }
    };
    match done {
        Ok(()) => {
            println!("manager gates {arg}: {}", names.join(","));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("kruise-e2e-gates {arg}: {e}");
            ExitCode::FAILURE
        }
    }
}
