//! Command-line arguments every benchmark binary takes, flattened into each one's own `clap`
//! parser, and the defaults they share.

use std::path::PathBuf;

/// `--runs` and `--append`, as every benchmark has them.
#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
pub struct Common {
    /// Runs of each variant, interleaved; the table reports medians.
    #[arg(long, default_value_t = 3, value_parser = at_least_one)]
    pub runs: usize,
    /// Also append the table to this file (e.g. BENCHMARKS.md).
    #[arg(long, value_name = "FILE")]
    pub append: Option<String>,
}

impl Common {
    /// Prints `out` and, with `--append`, appends it to that file.
    pub fn emit(&self, out: &str) -> std::io::Result<()> {
        print!("{out}");
        match &self.append {
            Some(path) => super::append(path, out),
            None => Ok(()),
        }
    }
}

/// A count that must be at least 1 (`--runs`, `--pods`, ...).
pub fn at_least_one(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(e.to_string()),
    }
}

/// Where cargo puts builds: `$CARGO_TARGET_DIR`, else `target/` at the repository root.
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| crate::repo_root().join("target"))
}

/// The release build of `bin` in [`target_dir`], the default the benchmarks start.
pub fn release_bin(bin: &str) -> PathBuf {
    target_dir().join("release").join(bin)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Bench {
        #[command(flatten)]
        common: Common,
    }

    #[test]
    fn common_arguments() {
        let ok = |args: &[&str]| {
            Bench::try_parse_from(std::iter::once("bench").chain(args.iter().copied()))
                .map(|b| b.common)
        };
        // (arguments, Some((runs, append)) when they parse)
        type Case<'a> = (&'a [&'a str], Option<(usize, Option<&'a str>)>);
        let cases: [Case; 6] = [
            (&[], Some((3, None))),
            (&["--runs", "5"], Some((5, None))),
            (
                &["--append", "B.md", "--runs", "1"],
                Some((1, Some("B.md"))),
            ),
            (&["--runs", "0"], None),
            (&["--runs", "x"], None),
            (&["--bogus"], None),
        ];
        for (args, want) in cases {
            let got = ok(args).ok();
            let got = got.as_ref().map(|c| (c.runs, c.append.as_deref()));
            assert_eq!(got, want, "{args:?}");
        }
    }

    #[test]
    fn counts_start_at_one() {
        assert_eq!(at_least_one("1"), Ok(1));
        assert!(at_least_one("0").is_err());
        assert!(at_least_one("-1").is_err());
    }

    #[test]
    fn release_binaries_live_under_the_target_dir() {
        assert!(release_bin("kruise-manager").ends_with("release/kruise-manager"));
    }
}
