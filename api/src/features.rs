//! OpenKruise v1.9's feature gates (upstream `pkg/features/kruise_features.go`): their wire
//! names, defaults and maturity, the `--feature-gates` flag syntax of Kubernetes' component-base
//! (`Name=true,Other=false`, plus `AllAlpha` / `AllBeta`), and upstream's
//! `SetDefaultFeatureGates` rules between gates.
//!
//! A binary parses its flag once ([`FeatureGates::parse`]), installs the result ([`install`])
//! and hands copies to whatever needs them; nothing looks a gate up by its name after start-up.
//!
//! ```
//! use kruise_api::features::{FeatureGates, Gate};
//! let gates = FeatureGates::parse("PreDownloadImageForInPlaceUpdate=true").unwrap();
//! assert!(gates.enabled(Gate::PreDownloadImageForInPlaceUpdate));
//! // Upstream turns the pull-job gate on for pre-download.
//! assert!(gates.enabled(Gate::ImagePullJobGate));
//! assert!(FeatureGates::parse("NoSuchGate=true").is_err());
//! ```

use std::fmt;
use std::sync::OnceLock;

/// How far along upstream says a gate is. component-base's `AllAlpha` / `AllBeta` switch every
/// gate of one maturity at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Maturity {
    Alpha,
    Beta,
}

impl Maturity {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Alpha => "Alpha",
            Self::Beta => "Beta",
        }
    }
}

/// The flag of both binaries that takes the gates (upstream's name).
pub const FLAG: &str = "--feature-gates";

/// The special name that sets every alpha gate not named explicitly (component-base).
pub const ALL_ALPHA: &str = "AllAlpha";
/// The special name that sets every beta gate not named explicitly (component-base).
pub const ALL_BETA: &str = "AllBeta";

/// What a gate does in Kruise-rs. The one list of which gates act here and which are accepted
/// and ignored: the start-up warnings, `kubectl kruise check` and docs/feature-gates.md (written
/// and checked by `api/tests/feature_gates_doc.rs`) all read it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Effect {
    /// Acts here as upstream's gate does; the text says what it changes.
    Implemented(&'static str),
    /// Acts here in part: what it does, then what is missing.
    Partial(&'static str, &'static str),
    /// Accepted and ignored: the text says what is missing.
    Missing(&'static str),
    /// Declared upstream and read nowhere in v1.9, so ignoring it is upstream's behaviour.
    UnusedUpstream,
}

impl Effect {
    /// What is missing, for a gate that does not (or only partly) take effect here.
    pub const fn missing(self) -> Option<&'static str> {
        match self {
            Self::Partial(_, missing) | Self::Missing(missing) => Some(missing),
            Self::Implemented(_) | Self::UnusedUpstream => None,
        }
    }
}

macro_rules! gates {
    ($( $(#[$doc:meta])* $variant:ident = $wire:literal, $default:literal, $maturity:ident, $effect:expr; )*) => {
        /// One OpenKruise v1.9 feature gate. The variant is upstream's Go identifier where it
        /// matches the registered name; [`Gate::name`] is what goes on the wire.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Gate {
            $( $(#[$doc])* $variant, )*
        }

        impl Gate {
            /// Every gate, in upstream's declaration order.
            pub const ALL: &'static [Gate] = &[$(Gate::$variant),*];

            /// The name upstream registers (what `--feature-gates` and Helm values use).
            pub const fn name(self) -> &'static str {
                match self { $(Gate::$variant => $wire,)* }
            }

            /// Upstream's default.
            pub const fn upstream_default(self) -> bool {
                match self { $(Gate::$variant => $default,)* }
            }

            pub const fn maturity(self) -> Maturity {
                match self { $(Gate::$variant => Maturity::$maturity,)* }
            }

            /// What the gate does here ([`Effect`]).
            pub const fn effect(self) -> Effect {
                match self { $(Gate::$variant => $effect,)* }
            }
        }
    };
}

gates! {
    /// Features that need kruise-daemon (image pulls, container restarts, probes).
    KruiseDaemon = "KruiseDaemon", true, Beta,
        Effect::Implemented("without it the controllers and webhook paths that hand work to kruise-daemon (pull jobs, container recreation, probes, SidecarTerminator) do not run, and the gates needing the daemon are off");
    /// The Pod webhook (SidecarSet injection, readiness gate, PUB, WorkloadSpread...).
    PodWebhook = "PodWebhook", true, Beta,
        Effect::Implemented("without it no Pod webhook is registered, and the gates acting through it are off");
    /// CloneSet puts only the short revision hash in the Pod's revision label.
    CloneSetShortHash = "CloneSetShortHash", false, Alpha,
        Effect::Implemented("CloneSet writes only the short hash in its Pods' `controller-revision-hash`; Pods labelled with either form count as the same revision, so turning it on restarts nothing");
    /// The Pod webhook adds the `KruisePodReady` readiness gate to every Pod, not only to
    /// Pods of Kruise workloads.
    KruisePodReadinessGate = "KruisePodReadinessGate", false, Alpha,
        Effect::Implemented("the Pod webhook gives every Pod it admits the `KruisePodReady` readiness gate, not only Kruise workloads' Pods");
    /// CloneSet / Advanced StatefulSet create ImagePullJobs to pull a new image before an
    /// in-place update.
    PreDownloadImageForInPlaceUpdate = "PreDownloadImageForInPlaceUpdate", false, Alpha,
        Effect::Implemented("CloneSet and Advanced StatefulSet create ImagePullJobs for the new images before an in-place update");
    /// CloneSet moves Pods back to the current revision when more than replicas - partition
    /// run the update revision.
    CloneSetPartitionRollback = "CloneSetPartitionRollback", false, Alpha,
        Effect::Implemented("a raised partition moves updated CloneSet Pods back to the current revision, in place when possible");
    /// Deletion protection for namespaces, services, CRDs and workloads.
    ResourcesDeletionProtection = "ResourcesDeletionProtection", false, Beta,
        Effect::Implemented("the `policy.kruise.io/delete-protection` label protects Namespaces, CRDs, Services, Ingresses and workloads from deletion");
    /// PodUnavailableBudget guards Pod deletion and eviction.
    PodUnavailableBudgetDeleteGate = "PodUnavailableBudgetDeleteGate", true, Beta,
        Effect::Implemented("Pod deletes and evictions are charged to PodUnavailableBudgets");
    /// PodUnavailableBudget guards in-place updates.
    PodUnavailableBudgetUpdateGate = "PodUnavailableBudgetUpdateGate", false, Alpha,
        Effect::Implemented("in-place updates are charged to PodUnavailableBudgets, by the webhook and by CloneSet; with both budget gates off, budgets are refused and their controller does not run");
    /// WorkloadSpread.
    WorkloadSpread = "WorkloadSpread", true, Beta,
        Effect::Implemented("WorkloadSpreads are admitted, new Pods spread over their subsets, and the controller runs");
    /// kruise-daemon watches the Pods of its node.
    DaemonWatchingPod = "DaemonWatchingPod", true, Beta,
        Effect::Implemented("kruise-daemon runs its containermeta duty (`apps.kruise.io/runtime-containers-meta`)");
    /// The webhook does not default the fields of workload Pod templates.
    TemplateNoDefaults = "TemplateNoDefaults", false, Alpha,
        Effect::Implemented("the CloneSet, Advanced StatefulSet, BroadcastJob, AdvancedCronJob and UnitedDeployment webhooks leave the Pod template as sent (no `imagePullPolicy`, `terminationMessagePath`, ... filled in); their other defaults still apply, Advanced DaemonSet still defaults its template");
    /// A changed label or annotation read by an env var (downward API) is applied in place by
    /// restarting the containers reading it.
    InPlaceUpdateEnvFromMetadata = "InPlaceUpdateEnvFromMetadata", true, Beta,
        Effect::Implemented("a changed label or annotation read by an env var is applied in place, restarting the containers reading it");
    /// Advanced StatefulSet `persistentVolumeClaimRetentionPolicy`.
    StatefulSetAutoDeletePVC = "StatefulSetAutoDeletePVC", true, Beta,
        Effect::Implemented("Advanced StatefulSet honours `persistentVolumeClaimRetentionPolicy`");
    /// SidecarSet `patchPodMetadata` may patch any key, not only whitelisted ones.
    SidecarSetPatchPodMetadataDefaultsAllowed = "SidecarSetPatchPodMetadataDefaultsAllowed", false, Alpha,
        Effect::Implemented("a SidecarSet's `patchPodMetadata` is admitted without the `kruise-configuration` whitelist");
    /// SidecarTerminator stops sidecars once the main containers of a Job-like Pod exited.
    SidecarTerminator = "SidecarTerminator", false, Alpha,
        Effect::Implemented("a job Pod's sidecars carrying `KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT=true` are stopped once its main containers exit");
    /// PodProbeMarker custom probes.
    PodProbeMarkerGate = "PodProbeMarkerGate", true, Beta,
        Effect::Implemented("PodProbeMarkers are admitted; their controllers and kruise-daemon's `podprobe` duty run");
    /// Advanced DaemonSet creates ImagePullJobs to pull a new image before an update.
    PreDownloadImageForDaemonSetUpdate = "PreDownloadImageForDaemonSetUpdate", false, Alpha,
        Effect::Implemented("while an Advanced DaemonSet rollout is pending (partition or maxUnavailable below all its Pods), it creates an ImagePullJob per changed image for the nodes of the Pods not updated yet");
    /// CloneSet ignores Pod updates that cannot change its decisions.
    CloneSetEventHandlerOptimization = "CloneSetEventHandlerOptimization", false, Alpha,
        Effect::UnusedUpstream;
    /// A Pod held in PreparingUpdate counts as updated when a workload scales.
    PreparingUpdateAsUpdate = "PreparingUpdateAsUpdate", false, Alpha,
        Effect::Implemented("a Pod held in PreparingUpdate counts as updated when a CloneSet scales, in an Advanced StatefulSet's unordered update order and when it picks a new Pod's revision");
    /// ImagePullJob and ImageListPullJob are served and run.
    ImagePullJobGate = "ImagePullJobGate", false, Alpha,
        Effect::Implemented("ImagePullJobs and ImageListPullJobs are admitted and their controllers run");
    /// ResourceDistribution.
    ResourceDistributionGate = "ResourceDistributionGate", false, Alpha,
        Effect::Implemented("ResourceDistributions are admitted and their controller runs");
    /// Deletion protection of CRDs also counts their custom resources.
    DeletionProtectionForCRDCascadingGate = "DeletionProtectionForCRDCascadingGate", false, Alpha,
        Effect::Implemented("a CRD labelled `Cascading` is refused while it has objects (without it, until the label goes)");
    /// The enhanced liveness probe. Upstream's Go name is `EnhancedLivenessProbeGate`; the
    /// registered name has no `Gate` suffix.
    EnhancedLivenessProbe = "EnhancedLivenessProbe", false, Alpha,
        Effect::Implemented("a new Pod of a Kruise workload annotated `apps.kruise.io/using-enhanced-liveness: \"true\"` has its containers' `livenessProbe` removed and kept as JSON in `apps.kruise.io/container-probe-context` (the release's whole effect: nothing probes them again unless another component reads that annotation)");
    /// A CloneSet recreates its Pods when its volumeClaimTemplates change.
    RecreatePodWhenChangeVCTInCloneSetGate = "RecreatePodWhenChangeVCTInCloneSetGate", false, Alpha,
        Effect::Implemented("a CloneSet whose image change comes with changed `volumeClaimTemplates` recreates its Pods and their claims");
    /// Advanced StatefulSet `ordinals.start`.
    StatefulSetStartOrdinal = "StatefulSetStartOrdinal", false, Alpha,
        Effect::Implemented("Advanced StatefulSet honours `ordinals.start`");
    /// Advanced StatefulSet labels each Pod with its ordinal.
    PodIndexLabel = "PodIndexLabel", true, Beta,
        Effect::Implemented("Advanced StatefulSet labels each Pod with its ordinal");
    /// The webhook serves certificates provisioned by someone else.
    EnableExternalCerts = "EnableExternalCerts", false, Alpha,
        Effect::Implemented("the manager serves `ca.crt`, `tls.crt` and `tls.key` from its certificate Secret as someone else (cert-manager) keeps them, reloading them on change; it never writes the Secret, the configurations it applies carry no `caBundle` and the CRDs' conversion is not patched (docs/external-certs.md)");
    /// Advanced StatefulSet resizes its PVCs when volumeClaimTemplates grow.
    StatefulSetAutoResizePVCGate = "StatefulSetAutoResizePVCGate", false, Alpha,
        Effect::Implemented("an unset `volumeClaimUpdateStrategy.type` defaults to OnDelete; with OnPodRollingUpdate an Advanced StatefulSet's `volumeClaimTemplates` may change only in storage size (refused where the StorageClass disallows expansion) and each Pod's smaller claims are resized to the template before the Pod is updated");
    /// CloneSet stops waiting for a deletion it expects after a timeout. Upstream's Go name is
    /// `ForceDeleteTimeoutExpectationFeatureGate`; the registered name is shorter.
    ForceDeleteTimeoutExpectationGate = "ForceDeleteTimeoutExpectationGate", false, Alpha,
        Effect::UnusedUpstream;
    /// CloneSet / Advanced StatefulSet resize cpu and memory in place instead of recreating.
    InPlaceWorkloadVerticalScaling = "InPlaceWorkloadVerticalScaling", false, Alpha,
        Effect::Implemented("CloneSet and Advanced StatefulSet resize cpu and memory in place instead of recreating the Pod");
    /// PodProbeMarker on serverless (virtual-kubelet) Pods.
    EnablePodProbeMarkerOnServerless = "EnablePodProbeMarkerOnServerless", false, Alpha,
        Effect::Implemented("the Pod webhook writes the probes of the PodProbeMarkers selecting a new Pod into its `kruise.io/podprobe` annotation (their names in `kruise.io/podprobemarker-list`) for a serverless node's own agent to run; on a virtual-kubelet node (label `type: virtual-kubelet`) the manager turns the Pod conditions that agent reports into the markers' labels and annotations");
    /// SidecarSet injects its containers sorted by name.
    EnableSortSidecarContainerByName = "EnableSortSidecarContainerByName", false, Alpha,
        Effect::Implemented("SidecarSet injection sorts the injected containers by name");
    /// The cluster resizes Pods in place; PodUnavailableBudget then guards resizes.
    InPlacePodVerticalScaling = "InPlacePodVerticalScaling", false, Alpha,
        Effect::Implemented("PodUnavailableBudgets also charge in-place resizes, by the webhook and by CloneSet");
}

impl Gate {
    /// The gate upstream registers under `name` (exact, case-sensitive as component-base).
    pub fn from_name(name: &str) -> Option<Gate> {
        Gate::ALL.iter().copied().find(|g| g.name() == name)
    }

    fn bit(self) -> u64 {
        1 << (self as u32)
    }
}

impl fmt::Display for Gate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A `--feature-gates` value that cannot be applied. Each message names the entry and how to
/// fix it, since it ends a process at start-up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FeatureGateError {
    #[error(
        "unknown feature gate {name:?}{hint}: remove it or use one of OpenKruise v1.9's gates \
         (names are case-sensitive): {known}"
    )]
    Unknown {
        name: String,
        /// `", did you mean X"` when only the case differs, else empty.
        hint: String,
        known: String,
    },
    #[error("feature gate {name:?} has no value: write {name}=true or {name}=false")]
    MissingValue { name: String },
    #[error("feature gate {name}={value:?}: the value must be true or false")]
    BadValue { name: String, value: String },
}

/// Go's `strconv.ParseBool`, which component-base uses for each value.
fn parse_go_bool(v: &str) -> Option<bool> {
    match v {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

fn unknown(name: &str) -> FeatureGateError {
    let specials = [ALL_ALPHA, ALL_BETA];
    let hint = Gate::ALL
        .iter()
        .map(|g| g.name())
        .chain(specials)
        .find(|n| n.eq_ignore_ascii_case(name))
        .map(|n| format!(", did you mean {n}"))
        .unwrap_or_default();
    let known = Gate::ALL
        .iter()
        .map(|g| g.name())
        .chain(specials)
        .collect::<Vec<_>>()
        .join(", ");
    FeatureGateError::Unknown {
        name: name.to_owned(),
        hint,
        known,
    }
}

/// The on/off value of every gate, after upstream's rules between gates. Small and `Copy`, so
/// contexts hold their own copy.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct FeatureGates {
    on: u64,
}

impl Default for FeatureGates {
    /// Upstream's defaults.
    fn default() -> Self {
        let on = Gate::ALL
            .iter()
            .filter(|g| g.upstream_default())
            .fold(0, |acc, g| acc | g.bit());
        Self { on }
    }
}

impl FeatureGates {
    /// Parses a `--feature-gates` value as component-base does (entries split on `,`, blanks
    /// skipped, `AllAlpha` / `AllBeta` set every gate of that maturity not named explicitly),
    /// then applies upstream's rules between gates ([`FeatureGates::with_dependencies`]).
    pub fn parse(flag: &str) -> Result<Self, FeatureGateError> {
        let mut explicit: Vec<(Gate, bool)> = Vec::new();
        let (mut all_alpha, mut all_beta) = (None, None);
        for entry in flag.split(',') {
            if entry.trim().is_empty() {
                continue;
            }
            let (name, value) = match entry.split_once('=') {
                Some((n, v)) => (n.trim(), v.trim()),
                None => {
                    return Err(FeatureGateError::MissingValue {
                        name: entry.trim().to_owned(),
                    });
                }
            };
            let on = parse_go_bool(value).ok_or_else(|| FeatureGateError::BadValue {
                name: name.to_owned(),
                value: value.to_owned(),
            })?;
            match name {
                ALL_ALPHA => all_alpha = Some(on),
                ALL_BETA => all_beta = Some(on),
                _ => {
                    let gate = Gate::from_name(name).ok_or_else(|| unknown(name))?;
                    // A later entry wins, as in component-base's map.
                    explicit.retain(|(g, _)| *g != gate);
                    explicit.push((gate, on));
                }
            }
        }
        let mut gates = Self::default();
        for &g in Gate::ALL {
            let by_maturity = match g.maturity() {
                Maturity::Alpha => all_alpha,
                Maturity::Beta => all_beta,
            };
            if let Some(on) = by_maturity {
                gates.set(g, on);
            }
        }
        for (g, on) in explicit {
            gates.set(g, on);
        }
        Ok(gates.with_dependencies())
    }

    /// Upstream's `SetDefaultFeatureGates`, in its order; these override what the flag said
    /// (upstream re-`Set`s the gates after parsing):
    /// 1. `PodWebhook` off turns off the gates that act through the Pod webhook;
    /// 2. `KruiseDaemon` off turns off the gates that need the daemon;
    /// 3. pre-download (either gate) turns `ImagePullJobGate` on, since it works by creating
    ///    ImagePullJobs;
    /// 4. `ResourcesDeletionProtection` off turns off its CRD cascading variant.
    pub fn with_dependencies(mut self) -> Self {
        use Gate::*;
        if !self.enabled(PodWebhook) {
            for g in [
                KruisePodReadinessGate,
                PodUnavailableBudgetDeleteGate,
                PodUnavailableBudgetUpdateGate,
                WorkloadSpread,
                SidecarSetPatchPodMetadataDefaultsAllowed,
                EnhancedLivenessProbe,
                EnablePodProbeMarkerOnServerless,
            ] {
                self.set(g, false);
            }
        }
        if !self.enabled(KruiseDaemon) {
            for g in [
                PreDownloadImageForInPlaceUpdate,
                DaemonWatchingPod,
                InPlaceUpdateEnvFromMetadata,
                PreDownloadImageForDaemonSetUpdate,
                PodProbeMarkerGate,
                SidecarTerminator,
                ImagePullJobGate,
                EnhancedLivenessProbe,
            ] {
                self.set(g, false);
            }
        }
        if self.enabled(PreDownloadImageForInPlaceUpdate)
            || self.enabled(PreDownloadImageForDaemonSetUpdate)
        {
            self.set(ImagePullJobGate, true);
        }
        if !self.enabled(ResourcesDeletionProtection) {
            self.set(DeletionProtectionForCRDCascadingGate, false);
        }
        self
    }

    pub fn enabled(&self, gate: Gate) -> bool {
        self.on & gate.bit() != 0
    }

    /// Sets one gate, without the rules between gates (tests and [`FeatureGates::parse`]).
    pub fn set(&mut self, gate: Gate, on: bool) {
        if on {
            self.on |= gate.bit();
        } else {
            self.on &= !gate.bit();
        }
    }

    /// These gates with `gate` set (no rules applied); handy in tests.
    #[must_use]
    pub fn with(mut self, gate: Gate, on: bool) -> Self {
        self.set(gate, on);
        self
    }

    /// The gates whose value differs from upstream's default, in upstream's order.
    pub fn differences(&self) -> Vec<(Gate, bool)> {
        Gate::ALL
            .iter()
            .filter(|g| self.enabled(**g) != g.upstream_default())
            .map(|g| (*g, self.enabled(*g)))
            .collect()
    }

    /// The gates turned on that Kruise-rs accepts but does not (or only partly) implement, with
    /// what is missing, in upstream's order. The binaries warn about each at start and
    /// `kubectl kruise check` lists them.
    pub fn without_effect(&self) -> Vec<(Gate, &'static str)> {
        Gate::ALL
            .iter()
            .filter(|g| self.enabled(**g))
            .filter_map(|g| g.effect().missing().map(|m| (*g, m)))
            .collect()
    }

    /// The differences as a `--feature-gates` value (`Name=true,Other=false`; empty when these
    /// are upstream's defaults). Parsing it gives these gates back.
    pub fn to_flag(&self) -> String {
        self.differences()
            .iter()
            .map(|(g, on)| format!("{}={on}", g.name()))
            .collect::<Vec<_>>()
            .join(",")
    }
}

impl fmt::Debug for FeatureGates {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FeatureGates({:?})", self.to_flag())
    }
}

impl fmt::Display for FeatureGates {
    /// [`FeatureGates::to_flag`], so that `parse(&g.to_string()) == Ok(g)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_flag())
    }
}

/// The gates Kruise-rs ships turned on (`deploy/`, the Helm chart's default values,
/// `kubectl kruise install` and `dev`): the features this project is about, which act only on
/// objects a user creates or labels for them (ImagePullJobs, a workload's resources change, the
/// `policy.kruise.io/delete-protection` label, a PodUnavailableBudget that should also cover
/// in-place updates, a ResourceDistribution, a job Pod's sidecar carrying
/// `KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT=true`). The binaries themselves keep upstream's
/// defaults.
pub const SHIPPED_ON: &[Gate] = &[
    Gate::ResourcesDeletionProtection,
    Gate::PodUnavailableBudgetUpdateGate,
    Gate::ImagePullJobGate,
    Gate::InPlaceWorkloadVerticalScaling,
    Gate::ResourceDistributionGate,
    Gate::SidecarTerminator,
];

/// Upstream's defaults with [`SHIPPED_ON`] turned on.
pub fn shipped() -> FeatureGates {
    SHIPPED_ON
        .iter()
        .fold(FeatureGates::default(), |g, gate| g.with(*gate, true))
        .with_dependencies()
}

impl std::str::FromStr for FeatureGates {
    type Err = FeatureGateError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

static INSTALLED: OnceLock<FeatureGates> = OnceLock::new();

/// Records the process's gates, once, at start-up. A second call keeps the first value and
/// returns `false`: gates never change while a process runs.
pub fn install(gates: FeatureGates) -> bool {
    INSTALLED.set(gates).is_ok()
}

/// The gates [`install`]ed for this process, or upstream's defaults when none were.
pub fn installed() -> FeatureGates {
    INSTALLED.get().copied().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::Gate::*;
    use super::*;

    /// Upstream v1.9's `defaultFeatureGates`, by registered name.
    const UPSTREAM: &[(&str, bool, Maturity)] = &[
        ("PodWebhook", true, Maturity::Beta),
        ("KruiseDaemon", true, Maturity::Beta),
        ("DaemonWatchingPod", true, Maturity::Beta),
        ("CloneSetShortHash", false, Maturity::Alpha),
        ("KruisePodReadinessGate", false, Maturity::Alpha),
        ("PreDownloadImageForInPlaceUpdate", false, Maturity::Alpha),
        ("CloneSetPartitionRollback", false, Maturity::Alpha),
        ("ResourcesDeletionProtection", false, Maturity::Beta),
        ("WorkloadSpread", true, Maturity::Beta),
        ("PodUnavailableBudgetDeleteGate", true, Maturity::Beta),
        ("PodUnavailableBudgetUpdateGate", false, Maturity::Alpha),
        ("TemplateNoDefaults", false, Maturity::Alpha),
        ("InPlaceUpdateEnvFromMetadata", true, Maturity::Beta),
        ("StatefulSetAutoDeletePVC", true, Maturity::Beta),
        (
            "SidecarSetPatchPodMetadataDefaultsAllowed",
            false,
            Maturity::Alpha,
        ),
        ("SidecarTerminator", false, Maturity::Alpha),
        ("PodProbeMarkerGate", true, Maturity::Beta),
        ("PreDownloadImageForDaemonSetUpdate", false, Maturity::Alpha),
        ("CloneSetEventHandlerOptimization", false, Maturity::Alpha),
        ("PreparingUpdateAsUpdate", false, Maturity::Alpha),
        ("ImagePullJobGate", false, Maturity::Alpha),
        ("ResourceDistributionGate", false, Maturity::Alpha),
        (
            "DeletionProtectionForCRDCascadingGate",
            false,
            Maturity::Alpha,
        ),
        ("EnhancedLivenessProbe", false, Maturity::Alpha),
        (
            "RecreatePodWhenChangeVCTInCloneSetGate",
            false,
            Maturity::Alpha,
        ),
        ("StatefulSetStartOrdinal", false, Maturity::Alpha),
        ("PodIndexLabel", true, Maturity::Beta),
        ("EnableExternalCerts", false, Maturity::Alpha),
        ("StatefulSetAutoResizePVCGate", false, Maturity::Alpha),
        ("ForceDeleteTimeoutExpectationGate", false, Maturity::Alpha),
        ("InPlaceWorkloadVerticalScaling", false, Maturity::Alpha),
        ("EnablePodProbeMarkerOnServerless", false, Maturity::Alpha),
        ("EnableSortSidecarContainerByName", false, Maturity::Alpha),
        ("InPlacePodVerticalScaling", false, Maturity::Alpha),
    ];

    #[test]
    fn every_gate_has_upstreams_name_default_and_maturity() {
        assert_eq!(Gate::ALL.len(), UPSTREAM.len());
        assert!(Gate::ALL.len() <= 64, "the set is a u64");
        for &(name, default, maturity) in UPSTREAM {
            let g = Gate::from_name(name).unwrap_or_else(|| panic!("{name} is not registered"));
            assert_eq!(g.name(), name);
            assert_eq!(g.upstream_default(), default, "{name}");
            assert_eq!(g.maturity(), maturity, "{name}");
            assert_eq!(FeatureGates::default().enabled(g), default, "{name}");
        }
        assert!(FeatureGates::default().differences().is_empty());
        // Upstream's defaults already satisfy its rules.
        assert_eq!(
            FeatureGates::default().with_dependencies(),
            FeatureGates::default()
        );
    }

    #[test]
    fn wire_names_that_differ_from_go_identifiers() {
        assert_eq!(EnhancedLivenessProbe.name(), "EnhancedLivenessProbe");
        assert_eq!(Gate::from_name("EnhancedLivenessProbeGate"), None);
        assert_eq!(
            ForceDeleteTimeoutExpectationGate.name(),
            "ForceDeleteTimeoutExpectationGate"
        );
        assert_eq!(
            Gate::from_name("ForceDeleteTimeoutExpectationFeatureGate"),
            None
        );
    }

    #[test]
    fn parse_sets_named_gates_and_keeps_the_rest() {
        let g = FeatureGates::parse(" PreparingUpdateAsUpdate=true, PodIndexLabel=False ,")
            .expect("valid");
        assert!(g.enabled(PreparingUpdateAsUpdate));
        assert!(!g.enabled(PodIndexLabel));
        assert_eq!(
            g.differences(),
            vec![(PreparingUpdateAsUpdate, true), (PodIndexLabel, false)]
        );
        assert_eq!(
            FeatureGates::parse("").expect("empty"),
            FeatureGates::default()
        );
        // Later entries win; Go's bool spellings are accepted.
        let g = FeatureGates::parse("CloneSetShortHash=1,CloneSetShortHash=F").expect("valid");
        assert!(!g.enabled(CloneSetShortHash));
    }

    #[test]
    fn flag_round_trips() {
        let g = FeatureGates::parse("ImagePullJobGate=true,InPlaceWorkloadVerticalScaling=true")
            .expect("valid");
        assert_eq!(
            g.to_flag(),
            "ImagePullJobGate=true,InPlaceWorkloadVerticalScaling=true"
        );
        assert_eq!(FeatureGates::parse(&g.to_flag()), Ok(g));
        assert_eq!(FeatureGates::default().to_string(), "");
        assert_eq!(FeatureGates::parse(&shipped().to_string()), Ok(shipped()));
        assert_eq!(
            shipped().to_flag(),
            "ResourcesDeletionProtection=true,PodUnavailableBudgetUpdateGate=true,SidecarTerminator=true,ImagePullJobGate=true,ResourceDistributionGate=true,InPlaceWorkloadVerticalScaling=true"
        );
    }

    #[test]
    fn all_alpha_and_all_beta_yield_to_explicit_entries() {
        // OpenKruise's own kustomize manifest uses this form.
        let g = FeatureGates::parse("AllAlpha=true,AllBeta=true,EnableExternalCerts=false")
            .expect("valid");
        assert!(g.enabled(CloneSetShortHash));
        assert!(g.enabled(ResourcesDeletionProtection));
        assert!(!g.enabled(EnableExternalCerts));
        let g = FeatureGates::parse("PodWebhook=true,AllBeta=false").expect("valid");
        assert!(g.enabled(PodWebhook), "an explicit entry wins over AllBeta");
        assert!(!g.enabled(KruiseDaemon));
    }

    #[test]
    fn dependency_rules_follow_set_default_feature_gates() {
        struct Case {
            flag: &'static str,
            on: &'static [Gate],
            off: &'static [Gate],
        }
        let cases = [
            Case {
                flag: "PodWebhook=false,WorkloadSpread=true,KruisePodReadinessGate=true",
                on: &[KruiseDaemon],
                off: &[
                    KruisePodReadinessGate,
                    PodUnavailableBudgetDeleteGate,
                    PodUnavailableBudgetUpdateGate,
                    WorkloadSpread,
                    SidecarSetPatchPodMetadataDefaultsAllowed,
                    EnhancedLivenessProbe,
                    EnablePodProbeMarkerOnServerless,
                ],
            },
            Case {
                flag: "KruiseDaemon=false,ImagePullJobGate=true,PreDownloadImageForInPlaceUpdate=true",
                on: &[PodWebhook],
                off: &[
                    PreDownloadImageForInPlaceUpdate,
                    DaemonWatchingPod,
                    InPlaceUpdateEnvFromMetadata,
                    PreDownloadImageForDaemonSetUpdate,
                    PodProbeMarkerGate,
                    SidecarTerminator,
                    ImagePullJobGate,
                    EnhancedLivenessProbe,
                ],
            },
            Case {
                flag: "PreDownloadImageForInPlaceUpdate=true,ImagePullJobGate=false",
                on: &[PreDownloadImageForInPlaceUpdate, ImagePullJobGate],
                off: &[],
            },
            Case {
                flag: "PreDownloadImageForDaemonSetUpdate=true",
                on: &[PreDownloadImageForDaemonSetUpdate, ImagePullJobGate],
                off: &[PreDownloadImageForInPlaceUpdate],
            },
            Case {
                flag: "DeletionProtectionForCRDCascadingGate=true",
                on: &[],
                off: &[DeletionProtectionForCRDCascadingGate],
            },
            Case {
                flag: "ResourcesDeletionProtection=true,DeletionProtectionForCRDCascadingGate=true",
                on: &[
                    ResourcesDeletionProtection,
                    DeletionProtectionForCRDCascadingGate,
                ],
                off: &[],
            },
        ];
        for c in cases {
            let g = FeatureGates::parse(c.flag).expect(c.flag);
            for &on in c.on {
                assert!(g.enabled(on), "{}: {on} should be on", c.flag);
            }
            for &off in c.off {
                assert!(!g.enabled(off), "{}: {off} should be off", c.flag);
            }
        }
    }

    #[test]
    fn parse_errors_name_the_entry_and_the_fix() {
        let err =
            FeatureGates::parse("ImagePullJobGate=true,NoSuchGate=true").expect_err("unknown");
        assert!(matches!(&err, FeatureGateError::Unknown { name, .. } if name == "NoSuchGate"));
        let msg = err.to_string();
        assert!(msg.contains("\"NoSuchGate\""), "{msg}");
        assert!(
            msg.contains("PreparingUpdateAsUpdate"),
            "lists the known gates: {msg}"
        );

        let msg = FeatureGates::parse("imagepulljobgate=true")
            .expect_err("case matters")
            .to_string();
        assert!(msg.contains("did you mean ImagePullJobGate"), "{msg}");

        assert_eq!(
            FeatureGates::parse("ImagePullJobGate"),
            Err(FeatureGateError::MissingValue {
                name: "ImagePullJobGate".into()
            })
        );
        let err = FeatureGates::parse("ImagePullJobGate=yes").expect_err("bad value");
        assert_eq!(
            err,
            FeatureGateError::BadValue {
                name: "ImagePullJobGate".into(),
                value: "yes".into()
            }
        );
        assert!(err.to_string().contains("must be true or false"));
    }

    #[test]
    fn gates_without_effect_are_listed_only_when_on() {
        assert!(FeatureGates::default().without_effect().is_empty());
        assert!(
            shipped().without_effect().is_empty(),
            "we ship no ignored gate"
        );
        // Gates that gain an effect leave the list, so the gate ignored here is read from the
        // table rather than named.
        let ignored = Gate::ALL
            .iter()
            .copied()
            .find(|g| g.effect().missing().is_some());
        let flag = |g: Option<Gate>| {
            g.map_or(String::new(), |g| format!("{}=true,", g.name()))
                + "CloneSetEventHandlerOptimization=true,PodIndexLabel=true"
        };
        let g = FeatureGates::parse(&flag(ignored)).expect("valid");
        // Upstream's unused gate is a no-op there too; PodIndexLabel acts here.
        let listed: Vec<(Gate, &str)> = g.without_effect();
        assert_eq!(
            listed,
            ignored
                .map(|g| (g, g.effect().missing().unwrap_or_default()))
                .into_iter()
                .collect::<Vec<_>>()
        );
        // A gate that acts in full is never listed.
        let g = FeatureGates::parse("PreDownloadImageForInPlaceUpdate=true").expect("valid");
        assert!(g.without_effect().is_empty());
    }

    #[test]
    fn installed_defaults_to_upstream() {
        // Tests never install: every reader sees upstream's defaults.
        assert_eq!(installed(), FeatureGates::default());
    }
}
