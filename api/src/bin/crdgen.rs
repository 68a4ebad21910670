//! Prints every Kruise-rs CustomResourceDefinition as YAML, or with `--write DIR` writes one
//! file per CRD into DIR (the repository keeps them in `deploy/crds/`).

use std::path::PathBuf;
use std::process::ExitCode;

use kruise_api::crds;

const USAGE: &str = "usage: crdgen [--write DIR]\n  without arguments, print every CRD to stdout";

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let out_dir = match args.as_slice() {
        [] => None,
        [flag, dir] if flag == "--write" => Some(PathBuf::from(dir)),
        [flag] if flag == "-h" || flag == "--help" => {
            println!("{USAGE}");
            return Ok(());
        }
        _ => return Err(USAGE.into()),
    };
    let all = crds::all()?;
    match out_dir {
        None => {
            for crd in &all {
                print!("{}", crds::to_yaml(crd)?);
            }
        }
        Some(dir) => {
            std::fs::create_dir_all(&dir)?;
            for crd in &all {
                let path = dir.join(crds::file_name(crd));
                std::fs::write(&path, crds::to_yaml(crd)?)?;
                eprintln!("wrote {}", path.display());
            }
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("crdgen: {err}");
            ExitCode::FAILURE
        }
    }
}
