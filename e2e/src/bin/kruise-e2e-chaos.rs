//! The seeded fault campaign (`make chaos`; see RELIABILITY.md and `kruise_e2e::chaos`).
//!
//! Usage: kruise-e2e-chaos [--seed N] [--kills N] [--per-round N] [--faults a,b,…]
//!                         [--max-delay-ms N] [--history FILE]
//!        kruise-e2e-chaos --check-history FILE
//!
//! Without `--seed` a seed is drawn and printed. `--faults` narrows the fault kinds (names as
//! the table prints them); `--max-delay-ms` bounds the pause before each fault (default 8000).
//! `--history` writes the plan, the faults as injected and the whole history as JSON. `KRUISE_CHAOS_FAKE_DUPLICATE=1` breaks an expectation on purpose
//! (the campaign creates a second Pod for one slot) to show that the campaign catches it.
//! `--check-history FILE` checks the history invariants again over such a file, without a
//! cluster (the final checks, which read the cluster, are not repeated).
//! Exits 0 when every fault was repaired, every rollout completed and no invariant broke; 1
//! otherwise (printing the seed, the faults and the history of each broken invariant); 2 on
//! bad arguments.

use std::process::ExitCode;

use kruise_e2e::chaos::{self, Options, report, schedule};
use schedule::Fault;

fn parse(args: &[String]) -> Result<(Options, Option<String>), String> {
    let mut o = Options {
        seed: schedule::fresh_seed(),
        kills: 10,
        per_round: 3,
        faults: Fault::ALL.to_vec(),
        max_delay_ms: schedule::MAX_DELAY_MS,
        fake_duplicate: matches!(
            std::env::var("KRUISE_CHAOS_FAKE_DUPLICATE").as_deref(),
            Ok("1" | "true")
        ),
    };
    let mut history = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut val = || it.next().cloned().ok_or(format!("{a} needs a value"));
        let num = |v: String| v.parse::<u64>().map_err(|e| format!("{a} {v}: {e}"));
        match a.as_str() {
            // An empty value (make's default) draws a seed.
            "--seed" => {
                let v = val()?;
                if !v.is_empty() {
                    o.seed = num(v)?;
                }
            }
            "--kills" => o.kills = usize::try_from(num(val()?)?).map_err(|e| e.to_string())?,
            "--per-round" => {
                o.per_round = usize::try_from(num(val()?)?)
                    .map_err(|e| e.to_string())?
                    .max(1)
            }
            "--faults" => {
                o.faults = val()?
                    .split(',')
                    .map(|f| Fault::parse(f.trim()).ok_or(format!("unknown fault {f}")))
                    .collect::<Result<_, _>>()?
            }
            "--max-delay-ms" => o.max_delay_ms = num(val()?)?.max(1),
            "--history" => history = Some(val()?),
            _ => return Err(format!("unknown argument {a}")),
        }
    }
    if o.faults.is_empty() {
        return Err("--faults names none".into());
    }
    Ok((o, history))
}

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "kruise_e2e=info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let [flag, path] = args.as_slice()
        && flag == "--check-history"
    {
        return check_history(path);
    }
    let (opts, history_file) = match parse(&args) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("kruise-e2e-chaos: {e}");
            return ExitCode::from(2);
        }
    };
    println!(
        "chaos campaign: seed {} kills {} ({} a round, pauses under {} ms) faults {}{}",
        opts.seed,
        opts.kills,
        opts.per_round,
        opts.max_delay_ms,
        opts.faults
            .iter()
            .map(|f| f.name())
            .collect::<Vec<_>>()
            .join(","),
        if opts.fake_duplicate {
            " (fake duplicate on)"
        } else {
            ""
        }
    );
    let client = match kruise_e2e::client().await {
        Ok(c) => c,
        Err(e) => {
            eprintln!("kruise-e2e-chaos: no cluster: {e}");
            return ExitCode::FAILURE;
        }
    };
    let outcome = match chaos::run(&client, &opts).await {
        Ok(o) => o,
        Err(e) => {
            eprintln!(
                "kruise-e2e-chaos: seed {} kills {}: the campaign could not run: {e}",
                opts.seed, opts.kills
            );
            return ExitCode::FAILURE;
        }
    };
    print!("{}", report::table(&outcome));
    if let Some(path) = history_file {
        match serde_json::to_vec_pretty(&outcome) {
            Ok(json) => {
                if let Err(e) = std::fs::write(&path, json) {
                    eprintln!("kruise-e2e-chaos: writing {path}: {e}");
                }
            }
            Err(e) => eprintln!("kruise-e2e-chaos: the history as JSON: {e}"),
        }
    }
    if outcome.passed() {
        println!(
            "chaos campaign passed: seed {} kills {}",
            outcome.seed, outcome.kills
        );
        ExitCode::SUCCESS
    } else {
        print!("{}", report::failure(&outcome));
        ExitCode::FAILURE
    }
}

/// `--check-history FILE`: the invariants over a saved history, without a cluster.
fn check_history(path: &str) -> ExitCode {
    let saved = match std::fs::read(path)
        .map_err(|e| e.to_string())
        .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
    {
        Ok(v) => v,
        Err(e) => {
            eprintln!("kruise-e2e-chaos: {path}: {e}");
            return ExitCode::from(2);
        }
    };
    match chaos::recheck(&saved) {
        Ok(v) if v.is_empty() => {
            println!("{path}: every history invariant holds");
            ExitCode::SUCCESS
        }
        Ok(v) => {
            for x in &v {
                println!(
                    "INVARIANT BROKEN: {} — {} at {}ms: {}",
                    x.invariant, x.subject, x.t_ms, x.detail
                );
            }
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("kruise-e2e-chaos: {path}: {e}");
            ExitCode::from(2)
        }
    }
}
