//! HTTP paths served.

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
pub const VALIDATE_WORKLOADSPREAD: &str = kruise_api::keys::VALIDATE_WORKLOADSPREAD_PATH; // upstream's
/// UnitedDeployment defaulting (upstream's path).
pub const MUTATE_UNITEDDEPLOYMENT: &str = kruise_api::keys::MUTATE_UNITEDDEPLOYMENT_PATH;
/// UnitedDeployment validation (upstream's path).
pub const VALIDATE_UNITEDDEPLOYMENT: &str = kruise_api::keys::VALIDATE_UNITEDDEPLOYMENT_PATH;
/// Every admission path the server routes; each is served by `handle_admission_async`.
pub const ADMISSION: &[&str] = &[
    MUTATE_POD,
    VALIDATE_POD,
    MUTATE_CLONESET,
    MUTATE_CLONESET_V1ALPHA1,
    MUTATE_CLONESET_V1BETA1,
    VALIDATE_CLONESET,
    VALIDATE_CLONESET_V1ALPHA1,
    VALIDATE_CLONESET_V1BETA1,
    VALIDATE_STATEFULSET,
    MUTATE_STATEFULSET,
    MUTATE_STATEFULSET_V1ALPHA1,
    MUTATE_STATEFULSET_V1BETA1,
    MUTATE_DAEMONSET,
    VALIDATE_DAEMONSET,
    MUTATE_IMAGEPULLJOB,
    VALIDATE_IMAGEPULLJOB,
    MUTATE_BROADCASTJOB,
    VALIDATE_BROADCASTJOB,
    MUTATE_ADVANCEDCRONJOB,
    VALIDATE_ADVANCEDCRONJOB,
    MUTATE_NODEIMAGE,
    VALIDATE_NODEIMAGE,
    MUTATE_IMAGELISTPULLJOB,
    VALIDATE_IMAGELISTPULLJOB,
    MUTATE_CRR,
    VALIDATE_CRR,
    MUTATE_SIDECARSET,
    VALIDATE_SIDECARSET,
    VALIDATE_NAMESPACE,
    VALIDATE_CRD,
    VALIDATE_SERVICE,
    VALIDATE_INGRESS,
    VALIDATE_APPS_DEPLOYMENT,
    VALIDATE_APPS_REPLICASET,
    VALIDATE_APPS_STATEFULSET,
    VALIDATE_PUB,
    VALIDATE_RESOURCEDISTRIBUTION,
    MUTATE_EPHEMERALJOB,
    VALIDATE_EPHEMERALJOB,
    VALIDATE_PPS,
    MUTATE_PODPROBEMARKER,
    VALIDATE_PODPROBEMARKER,
    VALIDATE_WORKLOADSPREAD,
    MUTATE_UNITEDDEPLOYMENT,
    VALIDATE_UNITEDDEPLOYMENT,
];
/// CRD conversion.
pub const CONVERT: &str = kruise_api::keys::CONVERSION_WEBHOOK_PATH;
/// Liveness/readiness.
pub const HEALTHZ: &str = kruise_api::keys::WEBHOOK_HEALTHZ_PATH;
