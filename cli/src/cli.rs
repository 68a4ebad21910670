//! Command-line definition (clap derive).

use crate::ctx::ConnectArgs;
use crate::math::IntOrPercent;
use crate::target::Target;
use crate::view::workload::Kind;
use clap::{ArgAction, Parser, Subcommand, ValueEnum};
use std::time::Duration;

mod create;
mod migrate;
mod top;
pub use create::*;
pub use migrate::*;
pub use top::*;

const EXIT_CODES: &str = "\
Exit codes:
  0  success (rollout complete, or paused with --success-on-pause)
  1  rollout failed (FailedUpdate, ProgressDeadlineExceeded, failed CRR, ImagePullJob or BroadcastJob) or other error
  2  usage error
  3  rollout paused (rollout status without --success-on-pause), or the BroadcastJob waited for is paused
  4  timed out (--timeout)
  5  still progressing (rollout status --watch=false)
  6  object, kind or CRD not found
  7  forbidden or unauthorized
  8  cluster unreachable or kubeconfig unusable";

#[derive(Debug, Parser)]
#[command(
    name = "kubectl-kruise",
    bin_name = "kubectl-kruise",
    version,
    about = "Drive OpenKruise / Kruise-rs rollouts: status, partitions, in-place restarts, a live view",
    after_help = EXIT_CODES
)]
pub struct Cli {
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// Log verbosity: -v debug, -vv trace (logs go to stderr; RUST_LOG overrides).
    #[arg(short = 'v', long = "verbose", global = true, action = ArgAction::Count)]
    pub verbose: u8,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Manage the rollout of a workload: CloneSet, Advanced StatefulSet or DaemonSet, SidecarSet,
    /// or an apps/v1 Deployment, StatefulSet or DaemonSet.
    #[command(subcommand)]
    Rollout(Rollout),
    /// Set fields of a workload.
    #[command(subcommand)]
    Set(SetCmd),
    /// Remove chosen Pods of a CloneSet (podsToDelete) or Advanced StatefulSet
    /// (reserveOrdinals), lowering replicas by as many.
    Scaledown {
        #[arg(value_parser = parse_target)]
        target: Target,
        /// The Pods to remove: NAME[,NAME...].
        #[arg(long, value_delimiter = ',', required = true)]
        pods: Vec<String>,
        /// Only report what would happen.
        #[arg(long)]
        dry_run: bool,
    },
    /// Move a Deployment's replicas to a CloneSet without downtime (kruise-tools' flags):
    /// the CloneSet grows by --max-surge, its new Pods become available, the Deployment shrinks
    /// by as many; rerun to resume.
    Migrate(MigrateArgs),
    /// Restart containers of a Pod in place through a ContainerRecreateRequest.
    RecreateContainer(RecreateArgs),
    /// Run a command in a container; -S SIDECAR enters the working one of a hot-upgrade pair.
    Exec(ExecArgs),
    /// One screen per workload: knobs, revisions, conditions, Pods by revision and in-place
    /// state, what holds them, recent Events.
    Describe {
        #[arg(value_parser = parse_target, value_name = "TYPE/NAME")]
        target: Target,
        #[arg(short = 'o', long, value_enum, default_value_t)]
        output: Output,
    },
    /// CPU and memory of the Kruise workloads' Pods by revision (update vs current), from the
    /// Metrics API (metrics-server).
    Top(TopArgs),
    /// Pre-pull images on nodes through ImagePullJobs.
    #[command(subcommand)]
    Image(ImageCmd),
    /// Where a ResourceDistribution's copies landed and where they failed.
    #[command(subcommand)]
    Distribution(DistributionCmd),
    /// Create an object: a BroadcastJob (one Pod run to completion on every eligible node), or a
    /// Job from an AdvancedCronJob's template.
    #[command(subcommand)]
    Create(CreateCmd),
    /// Pause or resume an AdvancedCronJob (`acj`).
    #[command(subcommand, name = "advancedcronjob", visible_alias = "acj")]
    AdvancedCronJob(AdvancedCronJobCmd),
    /// Follow, pause or resume a BroadcastJob (`bcj`).
    #[command(subcommand, name = "broadcastjob", visible_alias = "bcj")]
    BroadcastJob(BroadcastJobCmd),
    /// Pause or resume an EphemeralJob (`ejob`).
    #[command(subcommand, name = "ephemeraljob", visible_alias = "ejob")]
    EphemeralJob(EphemeralJobCmd),
    /// Show a PodProbeMarker's probe states per Pod (`ppm`).
    #[command(subcommand, name = "podprobemarker", visible_alias = "ppm")]
    PodProbeMarker(PodProbeMarkerCmd),
    /// Run the manager (controllers and webhook) in this process, for a dev cluster.
    Dev(DevArgs),
    /// Install Kruise-rs (the manifests of deploy/, embedded in this binary), server side.
    Install(InstallArgs),
    /// Remove Kruise-rs: webhook configurations first, then workloads, RBAC, CRDs, namespaces.
    Uninstall(UninstallArgs),
    /// Check an installation: one ✔/✖ line per requirement, a fix per ✖; exit 0 when all pass.
    Check(CheckArgs),
    /// Print a shell completion script.
    Completion {
        #[arg(value_enum)]
        shell: Shell,
    },
}

#[derive(Debug, Subcommand)]
pub enum DistributionCmd {
    /// One row per namespace: distributed, pending, out-of-date, conflict (a same-named object
    /// it does not own), namespace-missing, failed (with the error), removing. Exit 0 when every
    /// targeted namespace holds the current copy, 1 otherwise.
    Status {
        /// The ResourceDistribution (cluster-scoped).
        name: String,
        #[arg(short = 'o', long, value_enum, default_value_t)]
        output: Output,
    },
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum Output {
    #[default]
    Text,
    Json,
    Yaml,
}

// Keeps the typed error so `main` can tell an unknown kind (exit 6) from other usage errors.
fn parse_target(s: &str) -> Result<Target, crate::target::TargetError> {
    s.parse()
}

/// A bare `TYPE` (`asts`, `statefulset.apps.kruise.io`), spelled as in `TYPE/NAME`.
fn parse_kind(s: &str) -> Result<Kind, crate::target::TargetError> {
    crate::target::parse_kind(s)
}

fn parse_partition(s: &str) -> Result<IntOrPercent, String> {
    s.parse()
        .map_err(|e: crate::math::BadIntOrPercent| e.to_string())
}

/// Parses `90s`, `5m`, `1h30m`, `2h` or a bare number of seconds; `0` means no limit.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let bad = || format!("{s:?} is not a duration like 30s, 5m or 1h30m");
    if let Ok(secs) = s.parse::<u64>() {
        return Ok(Duration::from_secs(secs));
    }
    let mut total = 0u64;
    let mut num = String::new();
    for ch in s.chars() {
        if ch.is_ascii_digit() {
            num.push(ch);
            continue;
        }
        let n: u64 = num.parse().map_err(|_| bad())?;
        num.clear();
        total += match ch {
            'h' => n * 3600,
            'm' => n * 60,
            's' => n,
            _ => return Err(bad()),
        };
    }
    if !num.is_empty() || s.is_empty() {
        return Err(bad());
    }
    Ok(Duration::from_secs(total))
}

#[derive(Debug, Subcommand)]
pub enum Rollout {
    /// Watch a rollout until it is really done (updated, ready, no in-place update pending).
    #[command(after_help = EXIT_CODES)]
    Status(StatusArgs),
    /// Pause the rollout (spec.updateStrategy paused / spec.paused).
    Pause {
        #[arg(value_parser = parse_target, required = true)]
        targets: Vec<Target>,
    },
    /// Resume a paused rollout.
    Resume {
        #[arg(value_parser = parse_target, required = true)]
        targets: Vec<Target>,
    },
    /// List revisions of a workload.
    History {
        #[arg(value_parser = parse_target)]
        target: Target,
        /// Show the pod template of one revision.
        #[arg(long)]
        revision: Option<i64>,
        #[arg(short = 'o', long, value_enum, default_value_t)]
        output: Output,
    },
    /// Roll back to the previous (or a given) revision.
    Undo {
        #[arg(value_parser = parse_target)]
        target: Target,
        /// Revision to roll back to (default: the one before the current).
        #[arg(long = "to-revision")]
        to_revision: Option<i64>,
        /// Print what would change without changing it.
        #[arg(long)]
        dry_run: bool,
    },
    /// Restart every Pod's containers (in place for CloneSets).
    ///
    /// CloneSets restart containers IN PLACE through ContainerRecreateRequests, maxUnavailable
    /// pods per batch (not-ready pods first), waiting for each batch to finish; Deployments get a
    /// restartedAt annotation (a normal rolling replacement).
    Restart(RestartArgs),
    /// Set the partition: the number (or percentage) of pods kept at the old revision.
    ///
    /// A UnitedDeployment keeps one partition per subset: name it with --subset (a percentage
    /// is of that subset's pods).
    Partition {
        #[arg(value_parser = parse_target)]
        target: Target,
        /// An integer or a percentage such as 30%.
        #[arg(value_parser = parse_partition)]
        value: IntOrPercent,
        /// The UnitedDeployment subset whose partition to set.
        #[arg(long)]
        subset: Option<String>,
    },
    /// Lower the partition by one batch (or to 0 with --full) and resume if paused.
    ///
    /// A batch is --step pods (an integer or a percentage of replicas); without --step it is the
    /// CloneSet's maxUnavailable, i.e. as many pods as the controller updates at once.
    Promote {
        #[arg(value_parser = parse_target)]
        target: Target,
        /// Update every remaining pod: partition 0.
        #[arg(long)]
        full: bool,
        /// Pods per batch (integer or percentage of replicas).
        #[arg(long, value_parser = parse_partition, conflicts_with = "full")]
        step: Option<IntOrPercent>,
        /// The UnitedDeployment subset to promote (a batch is then its workload's
        /// maxUnavailable, a --step percentage of its pods).
        #[arg(long)]
        subset: Option<String>,
    },
    /// Full-screen live view of a rollout.
    #[command(visible_alias = "tui")]
    Watch(WatchArgs),
    /// List workloads of one kind (default CloneSets) with their rollout state.
    List {
        /// The kind to list: cloneset, asts, ads, sidecarset, statefulset, daemonset, deployment;
        /// every kind the cluster serves when left out.
        #[arg(value_parser = parse_kind)]
        kind: Option<Kind>,
        /// All namespaces.
        #[arg(short = 'A', long = "all-namespaces")]
        all_namespaces: bool,
        #[arg(short = 'o', long, value_enum, default_value_t)]
        output: Output,
    },
}

#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    #[arg(value_parser = parse_target)]
    pub target: Target,
    /// Give up after this long (e.g. 90s, 5m, 1h30m; 0 = wait forever).
    #[arg(long, value_parser = parse_duration, default_value = "0")]
    pub timeout: Duration,
    /// Keep watching until the rollout ends; --watch=false prints the state once.
    #[arg(short = 'w', long, action = ArgAction::Set, default_value_t = true, num_args = 0..=1, default_missing_value = "true")]
    pub watch: bool,
    /// Treat a paused rollout as success (exit 0), e.g. between canary batches in CI.
    #[arg(long)]
    pub success_on_pause: bool,
    /// text: progress bars on a terminal, one line per change otherwise; json/yaml: one
    /// document per change, the last one has "done": true (schemaVersion 1, see README).
    #[arg(short = 'o', long, value_enum, default_value_t)]
    pub output: Output,
}

#[derive(Debug, clap::Args)]
pub struct RestartArgs {
    #[arg(value_parser = parse_target)]
    pub target: Target,
    /// Restart only these containers (default: all).
    #[arg(short = 'c', long = "container")]
    pub containers: Vec<String>,
    /// Pods per batch (default: the CloneSet's maxUnavailable).
    #[arg(long, value_parser = parse_partition)]
    pub batch: Option<IntOrPercent>,
    /// Give up waiting for a batch after this long.
    #[arg(long, value_parser = parse_duration, default_value = "10m")]
    pub timeout: Duration,
}

#[derive(Debug, clap::Args)]
pub struct WatchArgs {
    #[arg(value_parser = parse_target)]
    pub target: Target,
    /// No colours (also NO_COLOR or TERM=dumb).
    #[arg(long)]
    pub no_color: bool,
    /// Leave the view a few seconds after the rollout ends, with `rollout status`'s exit code
    /// (0 complete, 1 failed, 3 paused), e.g. for demos and recordings.
    #[arg(long)]
    pub exit_when_done: bool,
}

#[derive(Debug, Subcommand)]
pub enum SetCmd {
    /// Change container images; says first whether the change will go in place.
    Image {
        #[arg(value_parser = parse_target)]
        target: Target,
        /// CONTAINER=IMAGE pairs (`*=IMAGE` sets every container).
        #[arg(required = true)]
        images: Vec<String>,
        /// Only report what would happen.
        #[arg(long)]
        dry_run: bool,
    },
    /// Set or remove environment variables of the template's containers (KEY=VALUE sets,
    /// KEY- removes); says first whether the change will go in place.
    Env {
        #[arg(value_parser = parse_target)]
        target: Target,
        /// KEY=VALUE to set, KEY- to remove.
        #[arg(required = true)]
        env: Vec<String>,
        /// Containers to change (default: all).
        #[arg(short = 'c', long = "containers", value_delimiter = ',')]
        containers: Vec<String>,
        /// Only report what would happen.
        #[arg(long)]
        dry_run: bool,
    },
    /// Set cpu/memory (or other) requests and limits of the template's containers; says first
    /// whether the Pods will be resized in place.
    Resources {
        #[arg(value_parser = parse_target)]
        target: Target,
        /// Containers to change (default: all).
        #[arg(short = 'c', long = "containers", value_delimiter = ',')]
        containers: Vec<String>,
        /// Limits as NAME=QUANTITY,… (e.g. cpu=200m,memory=512Mi).
        #[arg(long)]
        limits: Option<String>,
        /// Requests as NAME=QUANTITY,….
        #[arg(long)]
        requests: Option<String>,
        /// Only report what would happen.
        #[arg(long)]
        dry_run: bool,
    },
    /// Set the Pod template's serviceAccountName (kubectl's `set serviceaccount`); says first
    /// what the Pods will do (a new service account cannot go in place: they are recreated).
    #[command(visible_alias = "sa")]
    Serviceaccount {
        #[arg(value_parser = parse_target)]
        target: Target,
        /// The service account's name.
        service_account: String,
        /// Only report what would happen.
        #[arg(long)]
        dry_run: bool,
    },
}

#[derive(Debug, clap::Args)]
pub struct RecreateArgs {
    /// The Pod whose containers to restart.
    pub pod: String,
    /// Containers to restart (default: all).
    #[arg(short = 'c', long = "container")]
    pub containers: Vec<String>,
    /// Restart the containers one after another, in the order given.
    #[arg(long)]
    pub ordered: bool,
    /// Follow the request until it finishes (default true; --wait=false returns at once).
    #[arg(long, action = ArgAction::Set, default_value_t = true, num_args = 0..=1, default_missing_value = "true")]
    pub wait: bool,
    #[arg(long, value_parser = parse_duration, default_value = "5m")]
    pub timeout: Duration,
}

#[derive(Debug, clap::Args)]
pub struct ExecArgs {
    /// POD, or TYPE/NAME for a running Pod of that workload (ready ones first, then by name).
    pub pod: String,
    /// Container name (default: the first container).
    #[arg(short = 'c', long)]
    pub container: Option<String>,
    /// A SidecarSet sidecar: with hot upgrade, the container of its pair that serves now.
    #[arg(short = 'S', long)]
    pub sidecar: Option<String>,
    /// Pass stdin to the container.
    #[arg(short = 'i', long)]
    pub stdin: bool,
    /// Stdin is a TTY.
    #[arg(short = 't', long)]
    pub tty: bool,
    /// The command and its arguments, after `--`.
    #[arg(last = true)]
    pub command: Vec<String>,
}

#[derive(Debug, Subcommand)]
pub enum ImageCmd {
    /// Create an ImagePullJob and follow it node by node.
    Pull(PullArgs),
}

#[derive(Debug, clap::Args)]
pub struct PullArgs {
    pub image: String,
    /// Only nodes with these labels (repeatable k=v).
    #[arg(long = "node-selector")]
    pub node_selector: Vec<String>,
    /// Nodes pulling at the same time.
    #[arg(long, default_value_t = 1)]
    pub parallelism: i64,
    /// Name of the ImagePullJob (default: derived from the image).
    #[arg(long)]
    pub name: Option<String>,
    /// Follow the job until it completes (default true).
    #[arg(long, action = ArgAction::Set, default_value_t = true, num_args = 0..=1, default_missing_value = "true")]
    pub wait: bool,
    #[arg(long, value_parser = parse_duration, default_value = "30m")]
    pub timeout: Duration,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("90"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert!(parse_duration("5x").is_err());
        assert!(parse_duration("5m3").is_err());
    }

    #[test]
    fn status_flags() {
        let cli = Cli::try_parse_from([
            "kubectl-kruise",
            "rollout",
            "status",
            "clone/web",
            "--watch=false",
            "--timeout",
            "2m",
            "-o",
            "json",
            "-n",
            "prod",
        ])
        .unwrap();
        assert_eq!(cli.connect.namespace.as_deref(), Some("prod"));
        let Command::Rollout(Rollout::Status(s)) = cli.command else {
            panic!("not status")
        };
        assert!(!s.watch);
        assert_eq!(s.timeout, Duration::from_secs(120));
        assert_eq!(s.output, Output::Json);
        assert!(Cli::try_parse_from(["kubectl-kruise", "rollout", "status", "rs/web"]).is_err());
        assert!(Cli::try_parse_from(["kubectl-kruise", "rollout", "status", "asts/web"]).is_ok());
        assert!(
            Cli::try_parse_from([
                "kubectl-kruise",
                "rollout",
                "promote",
                "clone/x",
                "--full",
                "--step",
                "2"
            ])
            .is_err()
        );
        let tui = Cli::try_parse_from(["kubectl-kruise", "rollout", "tui", "clone/web"]).unwrap();
        assert!(matches!(tui.command, Command::Rollout(Rollout::Watch(_))));
    }

    /// The exit codes `rollout watch --help` promises are the ones the view exits with.
    #[test]
    fn watch_help_names_the_real_exit_codes() {
        use crate::error::exit;
        let mut cmd = Cli::command();
        let watch = cmd
            .find_subcommand_mut("rollout")
            .and_then(|r| r.find_subcommand_mut("watch"))
            .expect("rollout watch");
        // Words only: clap wraps and indents the text.
        let help = watch
            .render_long_help()
            .to_string()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        let promised = format!(
            "({} complete, {} failed, {} paused)",
            exit::OK,
            exit::FAILED,
            exit::PAUSED
        );
        assert!(help.contains(&promised), "{help}");
    }

    #[test]
    fn partition_over_100_percent_says_so() {
        let err = Cli::try_parse_from([
            "kubectl-kruise",
            "rollout",
            "partition",
            "clone/web",
            "150%",
        ])
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("a percentage must be between 0% and 100%"),
            "{err}"
        );
    }

    #[test]
    fn dev_ships_our_gates_unless_told_otherwise() {
        use kruise_api::features::{FeatureGates, shipped};
        let gates = |extra: &[&str]| {
            let mut argv = vec!["kubectl-kruise", "dev"];
            argv.extend_from_slice(extra);
            match Cli::try_parse_from(argv).map(|c| c.command) {
                Ok(Command::Dev(d)) => Ok(d.feature_gates),
                Ok(_) => panic!("not dev"),
                Err(e) => Err(e.to_string()),
            }
        };
        assert_eq!(gates(&[]), Ok(shipped()));
        assert_eq!(gates(&["--feature-gates", ""]), Ok(FeatureGates::default()));
        let err = gates(&["--feature-gates", "NoSuchGate=true"]).expect_err("unknown");
        assert!(err.contains("NoSuchGate"), "{err}");
    }
}

/// `kubectl kruise dev`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
The API server calls the webhook at https://<--webhook-host>:<--webhook-port>; the default,
127.0.0.1, works when the API server runs on this host (our local cluster). On kind the API
server runs in a container: pass the kind network's gateway, e.g.
  --webhook-host $(docker network inspect kind -f '{{(index .IPAM.Config 0).Gateway}}')
The certificate is self-signed and names that host.")]
pub struct DevArgs {
    /// Host (name or IP) the cluster's API server reaches this machine at.
    #[arg(long, default_value = "127.0.0.1", env = "WEBHOOK_HOST")]
    pub webhook_host: String,
    /// Port the webhook listens on.
    #[arg(long, default_value_t = kruise_api::keys::WEBHOOK_PORT)]
    pub webhook_port: u16,
    /// Local address the webhook binds.
    #[arg(long, default_value_t = DEFAULT_LISTEN)]
    pub listen: std::net::IpAddr,
    /// Feature gates of the embedded manager (OpenKruise's names). The default is what
    /// `install` ships; "" gives OpenKruise's defaults.
    #[arg(
        long,
        default_value_t = kruise_api::features::shipped(),
        value_parser = kruise_api::features::FeatureGates::parse
    )]
    pub feature_gates: kruise_api::features::FeatureGates,
}

/// Default `dev --listen` address: every interface, so the API server reaches the webhook
/// wherever it runs.
pub const DEFAULT_LISTEN: std::net::IpAddr = std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED);

/// Output of `install`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ManifestFormat {
    Yaml,
}

/// `kubectl kruise install`.
#[derive(Debug, clap::Args)]
pub struct InstallArgs {
    /// Ask the API server to validate everything without persisting it.
    #[arg(long)]
    pub dry_run: bool,
    /// Print the manifests instead of applying them (`... -o yaml | kubectl apply -f -`).
    #[arg(short = 'o', long, value_enum)]
    pub output: Option<ManifestFormat>,
    /// Registry and path of the images (REPO/kruise-manager:VERSION); default kruise-rs.
    #[arg(long)]
    pub image_repo: Option<String>,
    /// Image tag; default dev.
    #[arg(long)]
    pub version: Option<String>,
    /// Wait until the manager and the daemon are ready.
    #[arg(long)]
    pub wait: bool,
    /// How long --wait waits.
    #[arg(long, value_parser = parse_duration, default_value = "5m")]
    pub timeout: Duration,
}

/// `kubectl kruise uninstall`.
#[derive(Debug, clap::Args)]
pub struct UninstallArgs {
    /// Remove Kruise-rs (manager, daemon, webhook configurations, RBAC, namespace) but keep the
    /// CRDs and every Kruise object, with their Pods: to reinstall, or to hand over to OpenKruise.
    #[arg(long, conflicts_with = "delete_user_objects")]
    pub keep_crds: bool,
    /// Delete the Kruise objects users made (CloneSets, SidecarSets, ...) and so their Pods;
    /// without it, uninstall refuses while any exist and lists them.
    #[arg(long)]
    pub delete_user_objects: bool,
    /// Wait until every object is gone (default true).
    #[arg(long, default_value_t = true, action = ArgAction::Set)]
    pub wait: bool,
    /// How long to wait for each step.
    #[arg(long, value_parser = parse_duration, default_value = "3m")]
    pub timeout: Duration,
}

/// `kubectl kruise check`.
#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// Output format (text or json).
    #[arg(short = 'o', long, value_enum)]
    pub output: Option<Output>,
}
