//! The arguments of `migrate`, spelled as kruise-tools spells them.

use super::parse_duration;
use clap::ValueEnum;
use std::time::Duration;

/// The workload a migration fills (kruise-tools' `DST_KIND`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MigrateTo {
    CloneSet,
    AdvancedStatefulSet,
    /// Not a workload: every Kruise object rewritten at its CRD's storage version.
    Storage,
}

/// The workload a migration empties (`--from`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MigrateFrom {
    Deployment,
    StatefulSet,
}

fn parse_to(s: &str) -> Result<MigrateTo, String> {
    match s.to_ascii_lowercase().as_str() {
        "cloneset" | "clonesets" | "clone" | "clonesets.apps.kruise.io" => Ok(MigrateTo::CloneSet),
        "advancedstatefulset"
        | "asts"
        | "statefulset.apps.kruise.io"
        | "statefulsets.apps.kruise.io" => Ok(MigrateTo::AdvancedStatefulSet),
        "storage" => Ok(MigrateTo::Storage),
        _ => Err(format!(
            "{s:?} cannot be migrated to: give CloneSet (--from Deployment), AdvancedStatefulSet (--from StatefulSet) or storage"
        )),
    }
}

fn parse_from(s: &str) -> Result<MigrateFrom, String> {
    match s.to_ascii_lowercase().as_str() {
        "deployment" | "deployments" | "deploy" | "deployments.apps" => Ok(MigrateFrom::Deployment),
        "statefulset" | "statefulsets" | "sts" | "statefulsets.apps" => {
            Ok(MigrateFrom::StatefulSet)
        }
        _ => Err(format!(
            "--from {s:?}: give Deployment (to a CloneSet) or StatefulSet (to an Advanced StatefulSet)"
        )),
    }
}

fn parse_max_surge(s: &str) -> Result<i64, String> {
    match s.parse::<i64>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(format!(
            "{s:?} is not a whole number of Pods of at least 1 (the Pods added to the destination before as many leave the source), e.g. --max-surge 2"
        )),
    }
}

fn parse_replicas(s: &str) -> Result<i64, String> {
    match s.parse::<i64>() {
        Ok(n) if n >= -1 => Ok(n),
        _ => Err(format!(
            "{s:?} is not a replica count: give N ≥ 0, or -1 for all of the source's"
        )),
    }
}

/// Output of `--dry-run`'s object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum ObjectFormat {
    #[default]
    Yaml,
    Json,
}

/// `kubectl kruise migrate CloneSet --from Deployment --src-name X [--dst-name Y] ...`,
/// `kubectl kruise migrate AdvancedStatefulSet --from StatefulSet --src-name X`, or
/// `kubectl kruise migrate storage`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  # Create a CloneSet web (0 replicas) from Deployment web, and stop there.
  kubectl kruise migrate CloneSet --from Deployment -n prod --src-name web --create
  # Create it and move every replica over, 2 Pods at a time; the Deployment ends at 0.
  kubectl kruise migrate CloneSet --from Deployment -n prod --src-name web --create --copy --max-surge 2
  # Move 10 replicas into an existing CloneSet.
  kubectl kruise migrate CloneSet --from Deployment -n prod --src-name web --dst-name web-cs --replicas 10
  # Hand StatefulSet db's Pods over to an Advanced StatefulSet db, without recreating them.
  kubectl kruise migrate AdvancedStatefulSet --from StatefulSet -n prod --src-name db
  # Rewrite every Kruise object at its CRD's storage version, then drop the old versions from
  # the CRDs' status.storedVersions (after installing CRDs that store another version).
  kubectl kruise migrate storage

The move keeps the service up: the destination grows by at most --max-surge Pods, and the source
shrinks by as many only once they are available. Interrupted, rerun the same command: it
continues from the live replicas (the move's start is recorded on the destination, annotation
apps.kruise.io/migration). Not moved: HorizontalPodAutoscalers (still scale the source), the
Service (untouched; it serves both sets of Pods) and PodDisruptionBudgets (they select by label,
so they cover both).

A StatefulSet is handed over, not moved (its Pods are NAME-ORDINAL and keep their volumes): it
is deleted with --cascade=orphan and an Advanced StatefulSet of the same name, template and
claims adopts its Pods, claims and revisions; the same template is the same revision, so no Pod
is recreated (the command checks and says so Pod by Pod). Its update strategy stays ReCreate;
switch podUpdatePolicy to InPlaceIfPossible afterwards for in-place updates. --dst-name must be
the source's name, --replicas is refused (all Pods go at once), --create needs --copy.

`migrate storage` takes no --from: for each CRD of apps.kruise.io and policy.kruise.io whose
status.storedVersions lists more than its storage version, it reads every object and writes it
back unchanged (the API server stores it at the storage version), object by object, then trims
storedVersions to the storage version, so CRDs without the old version (OpenKruise v1.9.0's,
say) can be applied. Rerun after an interruption: it starts that CRD again; a CRD already
trimmed is left alone. With --dry-run it lists what it would rewrite.")]
pub struct MigrateArgs {
    /// The destination's kind: CloneSet (--from Deployment) or AdvancedStatefulSet (--from
    /// StatefulSet).
    #[arg(value_parser = parse_to, value_name = "DST_KIND")]
    pub to: MigrateTo,
    /// The source's kind: Deployment (or StatefulSet); required but for `storage`.
    #[arg(long, value_parser = parse_from, value_name = "SRC_KIND")]
    pub from: Option<MigrateFrom>,
    /// The source workload; required but for `storage`.
    #[arg(long)]
    pub src_name: Option<String>,
    /// The destination workload (default: the source's name).
    #[arg(long)]
    pub dst_name: Option<String>,
    /// Create the destination from the source (its labels, selector and Pod template) with 0
    /// replicas.
    #[arg(long)]
    pub create: bool,
    /// With --create: move the source's replicas to it (without, --create only creates).
    #[arg(long)]
    pub copy: bool,
    /// Replicas to move; -1 (default): all of the source's.
    #[arg(long, value_parser = parse_replicas, default_value_t = -1, allow_negative_numbers = true)]
    pub replicas: i64,
    /// Pods added to the destination at a time, each batch available before as many leave the
    /// source.
    #[arg(long, value_parser = parse_max_surge, default_value_t = 1)]
    pub max_surge: i64,
    /// Give up after this long (e.g. 90s, 10m; 0 = no limit); rerun to continue.
    #[arg(long, value_parser = parse_duration, default_value = "0", conflicts_with = "timeout_seconds")]
    pub timeout: Duration,
    /// kruise-tools' spelling of --timeout, in seconds (-1: no limit).
    #[arg(long, allow_negative_numbers = true)]
    pub timeout_seconds: Option<i64>,
    /// Print the destination that --create would make (YAML) and the steps of the move; change
    /// nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Format of --dry-run's object.
    #[arg(short = 'o', long, value_enum, default_value_t)]
    pub output: ObjectFormat,
}

impl MigrateArgs {
    /// The time limit, 0 for none.
    pub fn limit(&self) -> Duration {
        match self.timeout_seconds {
            Some(s) if s > 0 => Duration::from_secs(s.unsigned_abs()),
            Some(_) => Duration::ZERO,
            None => self.timeout,
        }
    }

    /// The source workload's name (empty for `storage`, which has none).
    pub fn src(&self) -> &str {
        self.src_name.as_deref().unwrap_or_default()
    }

    /// The destination's name.
    pub fn dst(&self) -> &str {
        self.dst_name.as_deref().unwrap_or(self.src())
    }

    /// `--replicas`, `None` for all.
    pub fn replicas(&self) -> Option<i64> {
        (self.replicas >= 0).then_some(self.replicas)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use clap::Parser;

    fn parse(extra: &[&str]) -> Result<MigrateArgs, String> {
        let mut argv = vec!["kubectl-kruise", "migrate"];
        argv.extend_from_slice(extra);
        match Cli::try_parse_from(argv).map(|c| c.command) {
            Ok(Command::Migrate(m)) => Ok(m),
            Ok(_) => panic!("not migrate"),
            Err(e) => Err(e.to_string()),
        }
    }

    /// kruise-tools' spellings parse; the defaults are its defaults.
    #[test]
    fn kruise_tools_flags() {
        let m = parse(&[
            "CloneSet",
            "--from",
            "Deployment",
            "--src-name",
            "web",
            "--create",
            "--copy",
        ])
        .expect("parses");
        assert_eq!(
            (m.to, m.from),
            (MigrateTo::CloneSet, Some(MigrateFrom::Deployment))
        );
        assert_eq!((m.dst(), m.replicas(), m.max_surge), ("web", None, 1));
        assert_eq!(m.limit(), Duration::ZERO);
        let m = parse(&[
            "cloneset",
            "--from",
            "deployment",
            "--src-name",
            "a",
            "--dst-name",
            "b",
            "--replicas",
            "3",
            "--max-surge=2",
            "--timeout-seconds",
            "90",
        ])
        .expect("parses");
        assert_eq!((m.dst(), m.replicas(), m.max_surge), ("b", Some(3), 2));
        assert_eq!(m.limit(), Duration::from_secs(90));
        let m = parse(&[
            "asts",
            "--from",
            "sts",
            "--src-name",
            "db",
            "--timeout-seconds",
            "-1",
        ])
        .expect("parses");
        assert_eq!(m.to, MigrateTo::AdvancedStatefulSet);
        assert_eq!(m.limit(), Duration::ZERO);
        let m = parse(&["storage", "--dry-run"]).expect("parses");
        assert_eq!((m.to, m.from, m.dry_run), (MigrateTo::Storage, None, true));
    }

    #[test]
    fn refusals_name_the_flag() {
        let base = ["CloneSet", "--from", "Deployment", "--src-name", "web"];
        let with = |extra: &[&str]| {
            let mut v = base.to_vec();
            v.extend_from_slice(extra);
            parse(&v).expect_err("refused")
        };
        let e = with(&["--max-surge", "0"]);
        assert!(e.contains("--max-surge") && e.contains("at least 1"), "{e}");
        let e = with(&["--replicas", "-2"]);
        assert!(e.contains("--replicas"), "{e}");
        let e = with(&["--timeout", "1m", "--timeout-seconds", "5"]);
        assert!(e.contains("--timeout"), "{e}");
        let e = parse(&["Job", "--from", "Deployment", "--src-name", "x"]).expect_err("refused");
        assert!(e.contains("give CloneSet"), "{e}");
        let e = parse(&["CloneSet", "--from", "Pod", "--src-name", "x"]).expect_err("refused");
        assert!(e.contains("give Deployment"), "{e}");
    }
}
