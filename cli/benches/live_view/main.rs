//! Live-view cost at scale, without a cluster (see `measure.rs` for what is measured). A bench
//! target rather than a command of the shipped binary; run it with
//!
//! `cargo bench -p kubectl-kruise --bench live_view -- [--pods N] [--iterations N] [--append FILE]`
//!
//! Prints a markdown table (median and p99 per frame, and per model update). Cargo runs benches
//! from the package directory, so give `--append` an absolute path.

mod measure;

use measure::Args;

const USAGE: &str = "usage: cargo bench -p kubectl-kruise --bench live_view -- [--pods N] [--iterations N] [--append FILE]";

fn parse(args: &[String]) -> Result<(Args, Option<String>), String> {
    let mut out = Args {
        pods: 1000,
        iterations: 2000,
    };
    let mut append = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = || it.next().cloned().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--pods" => out.pods = value()?.parse().map_err(|e| format!("--pods: {e}"))?,
            "--iterations" => {
                out.iterations = value()?.parse().map_err(|e| format!("--iterations: {e}"))?
            }
            "--append" => append = Some(value()?),
            // `cargo bench` passes this to every bench target.
            "--bench" => {}
            "-h" | "--help" => return Err(USAGE.into()),
            other => return Err(format!("unknown argument {other}\n{USAGE}")),
        }
    }
    if out.pods == 0 || out.iterations == 0 {
        return Err("--pods and --iterations must be at least 1".into());
    }
    Ok((out, append))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (args, append) = match parse(&args) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let out = match measure::bench(&args) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    };
    print!("{out}");
    if let Some(path) = &append {
        use std::io::Write;
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .and_then(|mut f| f.write_all(out.as_bytes()));
        if let Err(e) = written {
            eprintln!("error: cannot append to {path}: {e}");
            std::process::exit(1);
        }
    }
}
