//! Every admission hook served, declared once ([`HOOKS`], [`Hook`]): its path, how it is
//! registered (kind, rule, failure policy, side effects, selectors, gate) and what answers it.
//! The server routes [`ADMISSION`], [`crate::configuration`] builds the webhook configurations
//! from [`HOOKS`], and [`crate::handle_admission_async`] answers by them. A path's name is a
//! constant here, for the handlers and tests that name it.

mod hook;
mod table;

pub use hook::{ClusterHandler, FailurePolicy, Handler, Hook, Kind, Namespaces, Objects, Rule};
pub use table::HOOKS;

/// Pod CREATE mutation.
pub const MUTATE_POD: &str = kruise_api::keys::MUTATE_POD_PATH;
/// Pod UPDATE/DELETE and `pods/eviction` CREATE validation (upstream's path).
pub const VALIDATE_POD: &str = kruise_api::keys::VALIDATE_POD_PATH;
/// CloneSet defaulting (upstream's path; both versions).
pub const MUTATE_CLONESET: &str = "/mutate-apps-kruise-io-cloneset";
/// CloneSet defaulting, v1alpha1 alias.
pub const MUTATE_CLONESET_V1ALPHA1: &str = "/mutate-apps-kruise-io-v1alpha1-cloneset";
/// CloneSet defaulting, v1beta1 alias.
pub const MUTATE_CLONESET_V1BETA1: &str = "/mutate-apps-kruise-io-v1beta1-cloneset";
/// CloneSet validation (upstream's path; both versions).
pub const VALIDATE_CLONESET: &str = "/validate-apps-kruise-io-cloneset";
/// CloneSet validation, v1alpha1 alias.
pub const VALIDATE_CLONESET_V1ALPHA1: &str = "/validate-apps-kruise-io-v1alpha1-cloneset";
/// CloneSet validation, v1beta1 alias.
pub const VALIDATE_CLONESET_V1BETA1: &str = "/validate-apps-kruise-io-v1beta1-cloneset";
/// Advanced DaemonSet defaulting (upstream's path; both versions).
pub const MUTATE_DAEMONSET: &str = "/mutate-apps-kruise-io-daemonset";
/// Advanced DaemonSet validation (upstream's path; both versions).
pub const VALIDATE_DAEMONSET: &str = "/validate-apps-kruise-io-daemonset";
/// Advanced StatefulSet validation (v1alpha1 and v1beta1).
pub const VALIDATE_STATEFULSET: &str = "/validate-apps-kruise-io-statefulset";
/// Advanced StatefulSet defaulting (both versions).
pub const MUTATE_STATEFULSET: &str = "/mutate-apps-kruise-io-statefulset";
/// Advanced StatefulSet defaulting, v1alpha1 alias (upstream's path).
pub const MUTATE_STATEFULSET_V1ALPHA1: &str = "/mutate-apps-kruise-io-v1alpha1-statefulset";
/// Advanced StatefulSet defaulting, v1beta1 alias (upstream's path).
pub const MUTATE_STATEFULSET_V1BETA1: &str = "/mutate-apps-kruise-io-v1beta1-statefulset";
/// AdvancedCronJob defaulting (upstream's path; both versions).
pub const MUTATE_ADVANCEDCRONJOB: &str = "/mutate-apps-kruise-io-advancedcronjob";
/// AdvancedCronJob validation (upstream's path; both versions).
pub const VALIDATE_ADVANCEDCRONJOB: &str = "/validate-apps-kruise-io-advancedcronjob";
/// BroadcastJob defaulting (upstream's path; both versions).
pub const MUTATE_BROADCASTJOB: &str = "/mutate-apps-kruise-io-broadcastjob";
/// BroadcastJob validation (upstream's path; both versions).
pub const VALIDATE_BROADCASTJOB: &str = "/validate-apps-kruise-io-broadcastjob";
/// EphemeralJob defaulting (Kruise-rs; upstream has no mutating hook for it).
pub const MUTATE_EPHEMERALJOB: &str = "/mutate-apps-kruise-io-v1alpha1-ephemeraljob";
/// EphemeralJob validation (upstream's path).
pub const VALIDATE_EPHEMERALJOB: &str = "/validate-apps-kruise-io-v1alpha1-ephemeraljob";
/// PodProbeMarker defaulting (upstream's path).
pub const MUTATE_PODPROBEMARKER: &str = "/mutate-apps-kruise-io-v1alpha1-podprobemarker";
/// PodProbeMarker validation (upstream's path).
pub const VALIDATE_PODPROBEMARKER: &str = "/validate-apps-kruise-io-v1alpha1-podprobemarker";
/// ImagePullJob defaulting (upstream's path; both versions).
pub const MUTATE_IMAGEPULLJOB: &str = "/mutate-apps-kruise-io-v1alpha1-imagepulljob";
/// ImagePullJob validation (upstream's path; both versions).
pub const VALIDATE_IMAGEPULLJOB: &str = "/validate-apps-kruise-io-v1alpha1-imagepulljob";
/// NodeImage defaulting (upstream's path; both versions).
pub const MUTATE_NODEIMAGE: &str = "/mutate-apps-kruise-io-v1alpha1-nodeimage";
/// NodeImage validation (upstream's path; both versions).
pub const VALIDATE_NODEIMAGE: &str = "/validate-apps-kruise-io-v1alpha1-nodeimage";
/// ImageListPullJob defaulting (upstream's path; both versions).
pub const MUTATE_IMAGELISTPULLJOB: &str = "/mutate-apps-kruise-io-v1alpha1-imagelistpulljob";
/// ImageListPullJob validation (upstream's path; both versions).
pub const VALIDATE_IMAGELISTPULLJOB: &str = "/validate-apps-kruise-io-v1alpha1-imagelistpulljob";
/// ContainerRecreateRequest admission against its Pod (upstream's path; both versions).
/// The only handler that reads the cluster, see [`crate::handle_admission_async`].
pub const MUTATE_CRR: &str = "/mutate-apps-kruise-io-v1alpha1-containerrecreaterequest";
/// ContainerRecreateRequest validation (upstream's path; both versions).
pub const VALIDATE_CRR: &str = "/validate-apps-kruise-io-v1alpha1-containerrecreaterequest";
/// SidecarSet defaulting (upstream's path; both versions).
pub const MUTATE_SIDECARSET: &str = kruise_api::keys::MUTATE_SIDECARSET_PATH;
/// SidecarSet validation with the conflict check (upstream's path; both versions).
pub const VALIDATE_SIDECARSET: &str = kruise_api::keys::VALIDATE_SIDECARSET_PATH;
/// Deletion protection of Namespaces (upstream's path, DELETE only).
pub const VALIDATE_NAMESPACE: &str = "/validate-namespace";
/// Deletion protection of CustomResourceDefinitions (upstream's path, DELETE only).
pub const VALIDATE_CRD: &str = "/validate-customresourcedefinition";
/// Deletion protection of Services (upstream's path, DELETE only).
pub const VALIDATE_SERVICE: &str = "/validate-service";
/// Deletion protection of Ingresses (upstream's path, DELETE only).
pub const VALIDATE_INGRESS: &str = "/validate-ingress";
/// Deletion protection of apps/v1 Deployments (upstream's path, DELETE only).
pub const VALIDATE_APPS_DEPLOYMENT: &str = "/validate-apps-deployment";
/// Deletion protection of apps/v1 ReplicaSets (upstream's path, DELETE only).
pub const VALIDATE_APPS_REPLICASET: &str = "/validate-apps-replicaset";
/// Deletion protection of apps/v1 StatefulSets (upstream's path, DELETE only).
pub const VALIDATE_APPS_STATEFULSET: &str = "/validate-apps-statefulset";
/// PodUnavailableBudget validation (upstream's path).
pub const VALIDATE_PUB: &str = kruise_api::keys::VALIDATE_PUB_PATH;
/// ResourceDistribution validation (upstream's path).
pub const VALIDATE_RESOURCEDISTRIBUTION: &str = kruise_api::keys::VALIDATE_RD_PATH;
/// PersistentPodState validation (upstream's path).
pub const VALIDATE_PPS: &str = kruise_api::keys::VALIDATE_PPS_PATH;
/// WorkloadSpread validation (upstream's path).
pub const VALIDATE_WORKLOADSPREAD: &str = kruise_api::keys::VALIDATE_WORKLOADSPREAD_PATH;
/// UnitedDeployment defaulting (upstream's path).
pub const MUTATE_UNITEDDEPLOYMENT: &str = kruise_api::keys::MUTATE_UNITEDDEPLOYMENT_PATH;
/// UnitedDeployment validation (upstream's path).
pub const VALIDATE_UNITEDDEPLOYMENT: &str = kruise_api::keys::VALIDATE_UNITEDDEPLOYMENT_PATH;
/// Every admission path the server routes: each hook's path and aliases, once.
pub const ADMISSION: &[&str] = &ROUTES;

/// Name of the Pod mutating hook (upstream's).
pub const POD_MUTATING_HOOK: &str = "mpod.kb.io";
/// Name of the hook of Pod updates and deletes (upstream's).
pub const POD_WRITES_HOOK: &str = "vpod.kb.io";
/// Name of the hook of Pod evictions (upstream's).
pub const POD_EVICTIONS_HOOK: &str = "vpodeviction.kb.io";

/// The hook that answers `path` (the first declared, when two hooks share it).
pub fn hook(path: &str) -> Option<&'static Hook> {
    HOOKS.iter().find(|h| h.serves(path))
}

// `ADMISSION` is computed at compile time so that it stays a constant slice.
const ROUTES: [&str; routes_len()] = routes();

const fn str_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// The `n`th path the hooks serve, counting duplicates: each hook's path, then its aliases.
const fn nth_path(n: usize) -> Option<&'static str> {
    let (mut h, mut k) = (0, n);
    while h < HOOKS.len() {
        let hook = &HOOKS[h];
        if k == 0 {
            return Some(hook.path);
        }
        if k <= hook.aliases.len() {
            return Some(hook.aliases[k - 1]);
        }
        k -= 1 + hook.aliases.len();
        h += 1;
    }
    None
}

/// Whether the `n`th path was served by an earlier one already.
const fn seen_before(n: usize, path: &str) -> bool {
    let mut i = 0;
    while i < n {
        if let Some(p) = nth_path(i)
            && str_eq(p, path)
        {
            return true;
        }
        i += 1;
    }
    false
}

const fn routes_len() -> usize {
    let (mut n, mut count) = (0, 0);
    while let Some(p) = nth_path(n) {
        if !seen_before(n, p) {
            count += 1;
        }
        n += 1;
    }
    count
}

const fn routes<const N: usize>() -> [&'static str; N] {
    let mut out = [""; N];
    let (mut n, mut k) = (0, 0);
    while let Some(p) = nth_path(n) {
        if !seen_before(n, p) {
            out[k] = p;
            k += 1;
        }
        n += 1;
    }
    out
}

/// CRD conversion.
pub const CONVERT: &str = kruise_api::keys::CONVERSION_WEBHOOK_PATH;
/// Liveness/readiness.
pub const HEALTHZ: &str = kruise_api::keys::WEBHOOK_HEALTHZ_PATH;
