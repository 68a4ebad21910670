//! Every well-known name Kruise-rs shares with OpenKruise v1.9: API groups, annotation and label
//! keys, condition types and reasons, finalizers, environment variables and the names of the
//! objects the installation creates.
//!
//! Project rule: each of these strings is spelled exactly once, here. Other crates import the
//! constant; a literal copy elsewhere is a bug waiting for a typo.

// ---------------------------------------------------------------------------------------------
// API groups and versions
// ---------------------------------------------------------------------------------------------

/// API group of the workload and job kinds.
pub const APPS_GROUP: &str = "apps.kruise.io";
/// `apiVersion` prefix of every apps.kruise.io object: the group and a slash.
pub const APPS_GROUP_PREFIX: &str = "apps.kruise.io/";
/// API group of PodUnavailableBudget and deletion protection.
pub const POLICY_GROUP: &str = "policy.kruise.io";
/// `apiVersion` prefix of every policy.kruise.io object: the group and a slash.
pub const POLICY_GROUP_PREFIX: &str = "policy.kruise.io/";
/// The older served version of apps.kruise.io kinds.
pub const VERSION_V1ALPHA1: &str = "v1alpha1";
/// The storage version of apps.kruise.io kinds that have one.
pub const VERSION_V1BETA1: &str = "v1beta1";
/// `apiVersion` of apps.kruise.io v1alpha1 objects.
pub const APPS_V1ALPHA1: &str = "apps.kruise.io/v1alpha1";
/// `apiVersion` of apps.kruise.io v1beta1 objects.
pub const APPS_V1BETA1: &str = "apps.kruise.io/v1beta1";
/// `apiVersion` of policy.kruise.io v1alpha1 objects.
pub const POLICY_V1ALPHA1: &str = "policy.kruise.io/v1alpha1";
/// `apiVersion` of policy.kruise.io v1beta1 objects.
pub const POLICY_V1BETA1: &str = "policy.kruise.io/v1beta1";

// ---------------------------------------------------------------------------------------------
// In-place update (pods)
// ---------------------------------------------------------------------------------------------

/// Pod annotation holding the JSON `InPlaceUpdateState` of the latest in-place update.
pub const INPLACE_UPDATE_STATE_ANNOTATION: &str = "apps.kruise.io/inplace-update-state";
/// Pre-1.0 spelling of the state annotation; upstream still reads it as a fallback.
pub const INPLACE_UPDATE_STATE_ANNOTATION_OLD: &str = "inplace-update-state";
/// Pod annotation holding the JSON `UpdateSpec` to apply once the grace period has ended.
pub const INPLACE_UPDATE_GRACE_ANNOTATION: &str = "apps.kruise.io/inplace-update-grace";
/// Pre-1.0 spelling of the grace annotation; read and removed together with the new one.
pub const INPLACE_UPDATE_GRACE_ANNOTATION_OLD: &str = "inplace-update-grace";
/// Pod annotation the daemon writes with the JSON `RuntimeContainerMetaSet` of the pod.
pub const RUNTIME_CONTAINERS_META_ANNOTATION: &str = "apps.kruise.io/runtime-containers-meta";

/// Pod condition and readiness gate type that is False while an in-place update runs.
pub const INPLACE_UPDATE_READY: &str = "InPlaceUpdateReady";
/// Reason set on `InPlaceUpdateReady=False` when an in-place update starts.
pub const REASON_START_INPLACE_UPDATE: &str = "StartInPlaceUpdate";
/// Reason of the Normal Event a workload (CloneSet, Advanced StatefulSet / DaemonSet,
/// SidecarSet) records when it creates a ControllerRevision.
pub const REASON_REVISION_CREATED: &str = "RevisionCreated";

// ---------------------------------------------------------------------------------------------
// Pod readiness (KruisePodReady)
// ---------------------------------------------------------------------------------------------

/// Pod condition and readiness gate type with many writers; True only when no writer holds a key.
pub const KRUISE_POD_READY: &str = "KruisePodReady";
/// `userAgent` of the not-ready keys written by lifecycle hooks (markPodNotReady).
pub const READINESS_USER_AGENT_LIFECYCLE: &str = "Lifecycle";
/// `userAgent` of the not-ready keys written by the ContainerRecreateRequest controller.
pub const READINESS_USER_AGENT_CRR: &str = "ContainerRecreateRequest";
/// Not-ready `key` the lifecycle writer uses while a pod is PreparingDelete.
pub const READINESS_KEY_PRE_DELETE_HOOK: &str = "preDeleteHook";
/// Not-ready `key` the lifecycle writer uses while a pod is PreparingUpdate.
pub const READINESS_KEY_PRE_UPDATE_HOOK: &str = "preUpdateHook";

// ---------------------------------------------------------------------------------------------
// Lifecycle hooks
// ---------------------------------------------------------------------------------------------

/// Pod label holding the lifecycle state (PreparingNormal, Normal, PreparingUpdate, ...).
pub const LIFECYCLE_STATE_LABEL: &str = "lifecycle.apps.kruise.io/state";
/// Pod annotation with the RFC 3339 time the lifecycle state last changed.
pub const LIFECYCLE_TIMESTAMP_ANNOTATION: &str = "lifecycle.apps.kruise.io/timestamp";

// ---------------------------------------------------------------------------------------------
// Revisions and workload pods
// ---------------------------------------------------------------------------------------------

/// Pod label with the full ControllerRevision name (`{workload}-{hash}`), as in apps/v1.
pub const CONTROLLER_REVISION_HASH_LABEL: &str = "controller-revision-hash";
/// Pod label with the short revision hash, as Deployments use it.
pub const POD_TEMPLATE_HASH_LABEL: &str = "pod-template-hash";
/// Kruise-prefixed revision label (UnitedDeployment subsets, SidecarSet revisions).
pub const KRUISE_CONTROLLER_REVISION_HASH_LABEL: &str = "apps.kruise.io/controller-revision-hash";
/// Label shared by a CloneSet pod and its PVCs: the 5-character instance id.
pub const CLONESET_INSTANCE_ID_LABEL: &str = "apps.kruise.io/cloneset-instance-id";
/// CloneSet label that turns on scaling that ignores pods in PreparingDelete, per object.
pub const CLONESET_SCALING_EXCLUDE_PREPARING_DELETE_LABEL: &str =
    "apps.kruise.io/cloneset-scaling-exclude-preparing-delete";
/// Pod label asking the owning workload to delete (or recreate) this pod.
pub const SPECIFIED_DELETE_LABEL: &str = "apps.kruise.io/specified-delete";
/// Label of a NodeImage made by hand for a node that does not exist: kept, not garbage-collected.
pub const FAKE_NODEIMAGE_LABEL: &str = "apps.kruise.io/fake-nodeimage";
/// PVC annotation with the hash of the volumeClaimTemplate the PVC was made from.
pub const CLONESET_VOLUME_CLAIM_TEMPLATE_HASH_ANNOTATION: &str =
    "kruise.io/cloneset-volumeclaimtemplate-hash";
/// Label prefix: a pod with any label starting with it counts as unavailable.
pub const UNAVAILABLE_POD_LABEL_PREFIX: &str = "unavailable-pod.kruise.io/";
/// Pod label with the UnitedDeployment subset name.
pub const SUBSET_NAME_LABEL: &str = "apps.kruise.io/subset-name";
/// Pod label marking a UnitedDeployment reserved pod.
pub const UNITED_DEPLOYMENT_RESERVED_POD_LABEL: &str =
    "apps.kruise.io/united-deployment-reserved-pod";
/// Annotation with the per-subset patch of a UnitedDeployment.
pub const SUBSET_PATCH_ANNOTATION: &str = "apps.kruise.io/subset-patch";
/// Pod annotation naming the WorkloadSpread subset the pod was matched to.
pub const MATCHED_WORKLOADSPREAD_ANNOTATION: &str = "apps.kruise.io/matched-workloadspread";

// ---------------------------------------------------------------------------------------------
// Image pre-download (CloneSet / Advanced DaemonSet / Advanced StatefulSet)
// ---------------------------------------------------------------------------------------------

/// Workload annotation (v1alpha1 form of `inPlaceUpdateStrategy.imagePreDownloadParallelism`).
pub const IMAGE_PREDOWNLOAD_PARALLELISM_ANNOTATION: &str =
    "apps.kruise.io/image-predownload-parallelism";
/// Workload annotation (v1alpha1 form of `imagePreDownloadTimeoutSeconds`).
pub const IMAGE_PREDOWNLOAD_TIMEOUT_SECONDS_ANNOTATION: &str =
    "apps.kruise.io/image-predownload-timeout-seconds";
/// Workload annotation (v1alpha1 form of `imagePreDownloadMinUpdatedReadyPods`).
pub const IMAGE_PREDOWNLOAD_MIN_UPDATED_READY_PODS_ANNOTATION: &str =
    "apps.kruise.io/image-predownload-min-updated-ready-pods";
/// ControllerRevision label: pre-download jobs were created for this revision.
/// (Upstream really spells it `pre-predownload`.)
pub const IMAGE_PREDOWNLOAD_CREATED_LABEL: &str = "apps.kruise.io/pre-predownload-created";
/// ControllerRevision label: this revision was deliberately not pre-downloaded.
pub const IMAGE_PREDOWNLOAD_IGNORED_LABEL: &str = "apps.kruise.io/image-predownload-ignored";
/// Default pre-download pull timeout, seconds, when no annotation or field sets it.
pub const DEFAULT_IMAGE_PREDOWNLOAD_TIMEOUT_SECONDS: i32 = 600;

// ---------------------------------------------------------------------------------------------
// Container launch priority
// ---------------------------------------------------------------------------------------------

/// Container env whose integer value is the container's launch priority.
pub const ENV_CONTAINER_PRIORITY: &str = "KRUISE_CONTAINER_PRIORITY";
/// Container env the webhook injects; a configMapKeyRef into the pod's barrier ConfigMap.
pub const ENV_CONTAINER_BARRIER: &str = "KRUISE_CONTAINER_BARRIER";
/// Pod annotation asking for containers to start in declaration order.
pub const CONTAINER_LAUNCH_PRIORITY_ANNOTATION: &str = "apps.kruise.io/container-launch-priority";
/// The only meaningful value of `CONTAINER_LAUNCH_PRIORITY_ANNOTATION`.
pub const CONTAINER_LAUNCH_PRIORITY_ORDERED: &str = "Ordered";
/// Pod annotation set to "true" once every priority key is in the barrier ConfigMap.
pub const CONTAINER_LAUNCH_PRIORITY_COMPLETED_ANNOTATION: &str =
    "apps.kruise.io/container-launch-priority-completed";
/// Suffix of the barrier ConfigMap name: `{pod}-barrier`.
pub const CONTAINER_LAUNCH_BARRIER_CONFIGMAP_SUFFIX: &str = "-barrier";
/// Prefix of barrier ConfigMap keys: `p_{priority}`.
pub const CONTAINER_LAUNCH_BARRIER_KEY_PREFIX: &str = "p_";

// ---------------------------------------------------------------------------------------------
// AdvancedCronJob
// ---------------------------------------------------------------------------------------------

/// Annotation on each created job: its schedule point, RFC 3339 in the schedule's zone.
pub const ADVANCEDCRONJOB_SCHEDULED_AT_ANNOTATION: &str = "apps.kruise.io/scheduled-at";
/// Kind of the owner reference of the created jobs.
pub const ADVANCEDCRONJOB_KIND: &str = "AdvancedCronJob";
/// Event reason: concurrencyPolicy Forbid held back a run.
pub const ADVANCEDCRONJOB_REASON_JOB_ALREADY_ACTIVE: &str = "JobAlreadyActive";
/// Event reason: the schedule cannot be parsed (the webhook refuses it; seen only if bypassed).
pub const ADVANCEDCRONJOB_REASON_UNPARSEABLE_SCHEDULE: &str = "UnparseableSchedule";
/// Event reason: more than 100 schedule points were missed (upstream's guard).
pub const ADVANCEDCRONJOB_REASON_TOO_MANY_MISSED: &str = "TooManyMissedTimes";
/// Event reason: no template is set (the webhook refuses it; seen only if bypassed).
pub const ADVANCEDCRONJOB_REASON_MISSING_TEMPLATE: &str = "MissingTemplate";

// ---------------------------------------------------------------------------------------------
// BroadcastJob
// ---------------------------------------------------------------------------------------------

/// Pod label with the name of the BroadcastJob that created the Pod.
pub const BROADCASTJOB_NAME_LABEL: &str = "broadcastjob-name";
/// Pod label with the UID of the BroadcastJob that created the Pod.
pub const BROADCASTJOB_CONTROLLER_UID_LABEL: &str = "broadcastjob-controller-uid";
/// Event reason: a paused job (by the user) goes on again.
pub const BROADCASTJOB_REASON_CONTINUE: &str = "Continue";
/// Event reason: a failed Pod paused the job (failurePolicy Pause).
pub const BROADCASTJOB_REASON_PAUSED: &str = "Paused";
/// Event reason and condition reason of FailFast after a failed Pod (upstream's words).
pub const BROADCASTJOB_REASON_FAILED_POD: &str = "failed pod is found";
/// Condition message of FailFast after a failed Pod (upstream's words).
pub const BROADCASTJOB_MESSAGE_FAILED_POD: &str =
    "failure policy is FailurePolicyTypeFailFast and failed pod is found";
/// Event and condition reason: `activeDeadlineSeconds` passed.
pub const BROADCASTJOB_REASON_DEADLINE_EXCEEDED: &str = "DeadlineExceeded";
/// Event reason: every desired node ran its Pod to an end.
pub const BROADCASTJOB_REASON_JOB_COMPLETE: &str = "JobComplete";
/// Event reason: more Pods are active than `parallelism` allows.
pub const BROADCASTJOB_REASON_TOO_MANY_ACTIVE: &str = "TooManyActivePods";
/// Event reason: two Pods of the job are on one node.
pub const BROADCASTJOB_REASON_DUPLICATE_POD: &str = "DuplicatePodCreatedOnSameNode";
/// Event reason of a created Pod (Kubernetes' `SuccessfulCreatePodReason`).
pub const REASON_SUCCESSFUL_CREATE: &str = "SuccessfulCreate";
/// Event reason of a refused Pod creation (Kubernetes' `FailedCreatePodReason`).
pub const REASON_FAILED_CREATE: &str = "FailedCreate";
/// Event reason of a deleted Pod (Kubernetes' `SuccessfulDeletePodReason`).
pub const REASON_SUCCESSFUL_DELETE: &str = "SuccessfulDelete";

// ---------------------------------------------------------------------------------------------
// ContainerRecreateRequest
// ---------------------------------------------------------------------------------------------

/// CRR label (immutable) with the UID of the target pod.
pub const CRR_POD_UID_LABEL: &str = "crr.apps.kruise.io/pod-uid";
/// CRR label (immutable) with the node of the target pod; the daemon filters on it.
pub const CRR_NODE_NAME_LABEL: &str = "crr.apps.kruise.io/node-name";
/// CRR label present ("true") until the request completes; keeps the daemon's watch small.
pub const CRR_ACTIVE_LABEL: &str = "crr.apps.kruise.io/active";
/// CRR finalizer held while the controller waits out `unreadyGracePeriodSeconds`.
pub const CRR_UNREADY_ACQUIRED_FINALIZER: &str = "crr.apps.kruise.io/unready-acquired";
/// v1alpha1-era CRR annotation with container statuses; v1beta1 uses `status.containerStatusSnapshot`.
pub const CRR_SYNC_CONTAINER_STATUSES_ANNOTATION: &str =
    "crr.apps.kruise.io/sync-container-statuses";
/// CRR status condition type written when the pod was forced not-ready before recreation.
pub const CRR_CONDITION_PRE_RECREATE_GRACE: &str = "PreRecreateGrace";

// ---------------------------------------------------------------------------------------------
// kruise-daemon's own state (Kruise-rs only: upstream's daemon exits without CRI)
// ---------------------------------------------------------------------------------------------

/// Condition type on each kruise-daemon Pod: True while the daemon reaches its node's CRI runtime.
pub const DAEMON_CONDITION_CRI_AVAILABLE: &str = "kruise.io/CRIAvailable";
/// Condition reason and Normal Event reason (on the Node): the daemon reached the CRI runtime.
pub const DAEMON_REASON_CRI_AVAILABLE: &str = "CRIAvailable";
/// Condition reason and Warning Event reason (on the Node): no usable CRI runtime.
pub const DAEMON_REASON_CRI_UNAVAILABLE: &str = "CRIUnavailable";

// ---------------------------------------------------------------------------------------------
// EphemeralJob (its phase, condition words and reasons sit beside the types)
// ---------------------------------------------------------------------------------------------

/// Env var set on every ephemeral container an EphemeralJob injects, holding the job's UID
/// (upstream `EphemeralContainerEnvKey`): how the job recognises its own containers.
pub const EPHEMERALJOB_ID_ENV: &str = "KRUISE_EJOB_ID";
/// Finalizer an EphemeralJob holds until the controller has seen its deletion (upstream's).
pub const EPHEMERALJOB_FINALIZER: &str = "apps.kruise.io/ephemeralcontainers-cleanup";
/// Finalizer a PodProbeMarker holds until its probes are off every NodePodProbe (upstream
/// `PodProbeMarkerFinalizer`).
pub const PODPROBEMARKER_FINALIZER: &str = "kruise.io/node-pod-probe-cleanup";

// ---------------------------------------------------------------------------------------------
// CloneSet status conditions
// ---------------------------------------------------------------------------------------------

/// CloneSet condition type: creating or deleting pods/PVCs failed.
pub const CLONESET_CONDITION_FAILED_SCALE: &str = "FailedScale";
/// CloneSet condition type: updating pods failed.
pub const CLONESET_CONDITION_FAILED_UPDATE: &str = "FailedUpdate";
/// CloneSet condition type: rollout progress (with progressDeadlineSeconds).
pub const CLONESET_CONDITION_PROGRESSING: &str = "Progressing";
/// Progressing reason: no progress within progressDeadlineSeconds.
pub const CLONESET_REASON_PROGRESS_DEADLINE_EXCEEDED: &str = "ProgressDeadlineExceeded";
/// Progressing reason: the rollout is paused.
pub const CLONESET_REASON_PAUSED: &str = "CloneSetPaused";
/// Progressing reason: the spec changed and a rollout is under way.
pub const CLONESET_REASON_UPDATED: &str = "CloneSetUpdated";
/// Progressing reason: the rollout stopped at the partition with those pods available.
pub const CLONESET_REASON_PROGRESS_PARTITION_AVAILABLE: &str = "ProgressPartitionAvailable";
/// Progressing reason: every pod is updated and available.
pub const CLONESET_REASON_AVAILABLE: &str = "CloneSetAvailable";
/// CloneSet annotation (Kruise-rs only, no upstream equivalent) holding the fields of one
/// version that the other cannot express, so v1alpha1 <-> v1beta1 conversion is lossless.
pub const CLONESET_CONVERSION_ANNOTATION: &str = "apps.kruise.io/conversion-preserved";
/// Default `rollingUpdate.maxUnavailable` of a CloneSet.
pub const DEFAULT_CLONESET_MAX_UNAVAILABLE: &str = "20%";
/// Default `revisionHistoryLimit` of a CloneSet.
pub const DEFAULT_REVISION_HISTORY_LIMIT: i32 = 10;

// ---------------------------------------------------------------------------------------------
// Finalizers
// ---------------------------------------------------------------------------------------------

/// Finalizer ImagePullJob (and others) hold until their side objects are cleaned up.
pub const DELETION_PROTECTION_FINALIZER: &str = "apps.kruise.io/deletion-protection";

// ---------------------------------------------------------------------------------------------
// Deletion protection (policy.kruise.io)
// ---------------------------------------------------------------------------------------------

/// Label on namespaces, CRDs and workloads asking the webhook to block their deletion.
pub const DELETE_PROTECTION_LABEL: &str = "policy.kruise.io/delete-protection";
/// Delete-protection value: never allow deletion.
pub const DELETE_PROTECTION_ALWAYS: &str = "Always";
/// Delete-protection value: allow deletion only when nothing is left underneath.
pub const DELETE_PROTECTION_CASCADING: &str = "Cascading";

// ---------------------------------------------------------------------------------------------
// PodUnavailableBudget
// ---------------------------------------------------------------------------------------------

/// Pod annotation naming the PodUnavailableBudget that covers the pod (OpenKruise v1.9's
/// spelling; later releases moved to `pub.kruise.io/related-pub`).
pub const PUB_RELATED_ANNOTATION: &str = "kruise.io/related-pub";
/// Pod annotation exempting the pod from PodUnavailableBudget protection (value `"true"`).
pub const PUB_NO_PROTECT_ANNOTATION: &str = "pub.kruise.io/no-protect";
/// PUB annotation listing the operations it protects (UPDATE, DELETE, EVICT, RESIZE).
pub const PUB_PROTECT_OPERATIONS_ANNOTATION: &str = "kruise.io/pub-protect-operations";
/// PUB annotation overriding the replica count used for percentages.
pub const PUB_PROTECT_TOTAL_REPLICAS_ANNOTATION: &str = "pub.kruise.io/protect-total-replicas";
/// PUB kind name.
pub const PUB_KIND: &str = "PodUnavailableBudget";
/// PUB validation path (upstream's).
pub const VALIDATE_PUB_PATH: &str = "/validate-policy-kruise-io-podunavailablebudget";
/// Event on a Pod whose delete, eviction or update the budget refused.
pub const PUB_REASON_PREVENT_POD_DELETION: &str = "PubPreventPodDeletion";
/// Note of the [`PUB_REASON_PREVENT_POD_DELETION`] Event, upstream's words for every refused
/// operation.
pub const PUB_PREVENT_POD_DELETION_NOTE: &str = "openkruise pub prevents pod deletion";
/// Event on a PUB that covers no Pod.
pub const PUB_REASON_NO_PODS: &str = "NoPods";
/// Event on a PUB whose expected Pod count cannot be computed.
pub const PUB_REASON_CALCULATE_EXPECTED_FAILED: &str = "CalculateExpectedPodCountFailed";
/// Event on a Pod whose admitted deletion did not happen within the deletion timeout.
pub const PUB_REASON_NOT_DELETED: &str = "NotDeleted";

// ---------------------------------------------------------------------------------------------
// SidecarSet
// ---------------------------------------------------------------------------------------------

/// Pod annotation with the hashes of every injected SidecarSet.
pub const SIDECARSET_HASH_ANNOTATION: &str = "kruise.io/sidecarset-hash";
/// Pod annotation with the image-independent hashes of every injected SidecarSet.
pub const SIDECARSET_HASH_WITHOUT_IMAGE_ANNOTATION: &str =
    "kruise.io/sidecarset-hash-without-image";
/// Pod annotation listing the injected SidecarSets.
pub const SIDECARSET_INJECTED_LIST_ANNOTATION: &str = "kruise.io/sidecarset-injected-list";
/// Pod annotation with the in-place update state of sidecar containers.
pub const SIDECARSET_INPLACE_UPDATE_STATE_ANNOTATION: &str =
    "kruise.io/sidecarset-inplace-update-state";
/// Pod annotation naming the working container of a hot-upgrade pair.
pub const SIDECARSET_WORKING_HOT_UPGRADE_CONTAINER_ANNOTATION: &str =
    "kruise.io/sidecarset-working-hotupgrade-container";
/// ControllerRevision label with a SidecarSet's user-chosen version.
pub const SIDECARSET_CUSTOM_VERSION_LABEL: &str = "apps.kruise.io/sidecarset-custom-version";
/// ControllerRevision label naming the SidecarSet it records (revisions live in the manager's
/// namespace, the SidecarSet being cluster-scoped).
pub const SIDECARSET_NAME_LABEL: &str = "kruise.io/sidecarset-name";
/// Pod annotation prefix (then the container name) with a hot-upgrade container's version.
pub const SIDECARSET_VERSION_ANNOTATION_PREFIX: &str = "version.sidecarset.kruise.io/";
/// Pod annotation prefix (then the container name) with the version of its pair's other one.
pub const SIDECARSET_VERSION_ALT_ANNOTATION_PREFIX: &str = "versionalt.sidecarset.kruise.io/";
/// SidecarSet defaulting (both versions).
pub const MUTATE_SIDECARSET_PATH: &str = "/mutate-apps-kruise-io-v1alpha1-sidecarset";
/// SidecarSet validation (both versions).
pub const VALIDATE_SIDECARSET_PATH: &str = "/validate-apps-kruise-io-v1alpha1-sidecarset";
/// Event reason: a SidecarSet upgraded a Pod's sidecar in place.
pub const SIDECARSET_REASON_UPGRADE: &str = "SidecarUpgrade";
/// Event reason: a SidecarSet could not upgrade a Pod's sidecar.
pub const SIDECARSET_REASON_UPGRADE_FAILED: &str = "SidecarUpgradeFailed";
/// SidecarSet condition: True while the controller cannot upgrade some matched Pods (the
/// message names them and why).
pub const SIDECARSET_CONDITION_POD_UPGRADE_BLOCKED: &str = "PodUpgradeBlocked";
/// KruisePodReady user agent of the SidecarSet controller (earlier builds held the Pod
/// not-ready while a sidecar restarted; the controller now only removes that key, as upstream
/// never holds it).
pub const READINESS_USER_AGENT_SIDECARSET: &str = "SidecarSet";
/// KruisePodReady key earlier builds of the SidecarSet controller added during an in-place
/// sidecar upgrade.
pub const READINESS_KEY_SIDECAR_UPGRADE: &str = "sidecarUpgrade";
/// Env injected into sidecar containers so they know they were injected.
pub const ENV_SIDECAR_IS_INJECTED: &str = "IS_INJECTED";
/// Env with the version of a hot-upgrade sidecar.
pub const ENV_SIDECARSET_VERSION: &str = "SIDECARSET_VERSION";
/// Env with the version of the other container of a hot-upgrade pair.
pub const ENV_SIDECARSET_VERSION_ALT: &str = "SIDECARSET_VERSION_ALT";
/// Container env: "true" asks for the sidecar to be stopped (via a CRR) when the job's main containers exit.
pub const ENV_TERMINATE_SIDECAR_WHEN_JOB_EXIT: &str = "KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT";
/// Container env: image that replaces the sidecar's to stop it by in-place update instead of a CRR.
pub const ENV_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE: &str =
    "KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE";
/// Container env: ignore the sidecar's exit code when judging the job pod's result.
pub const ENV_TERMINATE_SIDECAR_IGNORE_EXIT_CODE: &str =
    "KRUISE_TERMINATE_SIDECAR_IGNORE_EXIT_CODE";
/// Pod condition type the SidecarTerminator writes (with the terminal phase) when it ends a
/// job pod whose sidecars' exit codes are ignored; the CRR webhook admits a request against such
/// a finished pod.
pub const SIDECAR_TERMINATED_CONDITION: &str = "SidecarTerminated";
/// Message of the [`SIDECAR_TERMINATED_CONDITION`] condition.
pub const SIDECAR_TERMINATED_MESSAGE: &str = "Terminated by Sidecar Terminator";
/// Name prefix of the ContainerRecreateRequest that stops a pod's sidecars; the pod's UID
/// follows, so there is one per pod (upstream `getCRRName`).
pub const SIDECAR_TERMINATION_CRR_PREFIX: &str = "sidecar-termination-";
/// Event reason (on the pod) of the SidecarTerminator's actions.
pub const REASON_SIDECAR_TERMINATOR: &str = "SidecarTerminator";
/// Event reason (Warning, on the pod) when the SidecarTerminator cannot act.
pub const REASON_SIDECAR_TERMINATOR_FAILED: &str = "SidecarTerminatorFailed";
/// Node label marking a virtual-kubelet node (upstream `VirtualKubeletLabelKey`), with value
/// [`VIRTUAL_KUBELET_LABEL_VALUE`].
pub const VIRTUAL_KUBELET_LABEL_KEY: &str = "type";
/// Value of [`VIRTUAL_KUBELET_LABEL_KEY`] on a virtual-kubelet node.
pub const VIRTUAL_KUBELET_LABEL_VALUE: &str = "virtual-kubelet";

/// Whether a Node's labels name it a virtual-kubelet (serverless) node.
pub fn is_virtual_kubelet(node_labels: &std::collections::BTreeMap<String, String>) -> bool {
    node_labels
        .get(VIRTUAL_KUBELET_LABEL_KEY)
        .map(String::as_str)
        == Some(VIRTUAL_KUBELET_LABEL_VALUE)
}

// ---------------------------------------------------------------------------------------------
// Probes, persistent pod state, image pulling (daemon)
// ---------------------------------------------------------------------------------------------

/// Pod annotation: the enhanced (daemon-run) liveness probe is on.
pub const USING_ENHANCED_LIVENESS_ANNOTATION: &str = "apps.kruise.io/using-enhanced-liveness";
/// Pod annotation backing up the native livenessProbe as JSON.
pub const CONTAINER_PROBE_CONTEXT_ANNOTATION: &str = "apps.kruise.io/container-probe-context";
/// Pod annotation (gate `EnablePodProbeMarkerOnServerless`): the PodProbeMarker probes a
/// serverless node's own agent runs, as a JSON list of `spec.probes[]` without `markerPolicy`,
/// written by the Pod webhook at creation (upstream `PodProbeMarkerAnnotationKey`).
pub const POD_PROBE_MARKER_ANNOTATION: &str = "kruise.io/podprobe";
/// Pod annotation: the comma-separated names of the PodProbeMarkers whose probes
/// [`POD_PROBE_MARKER_ANNOTATION`] holds (upstream `PodProbeMarkerListAnnotationKey`).
pub const POD_PROBE_MARKER_LIST_ANNOTATION: &str = "kruise.io/podprobemarker-list";
/// Annotation on the CRI sandbox the daemon creates to pull an image with a sandbox config.
pub const PULLING_IMAGE_BY_ANNOTATION: &str = "apps.kruise.io/pulling-image-by";
/// Secret annotation (kruise-daemon-config copies): how the copy is shared.
pub const IMAGEPULLJOB_SECRET_MODE_ANNOTATION: &str = "imagepulljobs.kruise.io/mode";
/// Secret annotation (kruise-daemon-config copies): the ImagePullJobs that use the copy.
pub const IMAGEPULLJOB_SECRET_REFERENCES_ANNOTATION: &str = "imagepulljobs.kruise.io/references";
/// Secret annotation (kruise-daemon-config copies): `namespace/name` of the source secret.
pub const IMAGEPULLJOB_SECRET_SOURCE_KEY_ANNOTATION: &str = "imagepulljobs.kruise.io/source-key";
/// Secret label (kruise-daemon-config copies): UID of the source secret.
pub const IMAGEPULLJOB_SECRET_SOURCE_UID_LABEL: &str = "imagepulljobs.kruise.io/source-uid";

// ---------------------------------------------------------------------------------------------
// Installation: namespaces, webhook, services
// ---------------------------------------------------------------------------------------------

/// Namespace the manager and daemon run in (overridable by env `POD_NAMESPACE`).
pub const KRUISE_NAMESPACE: &str = "kruise-system";
/// Namespace holding copies of image pull secrets for the daemon (env `KRUISE_DAEMON_CONFIG_NS`).
pub const KRUISE_DAEMON_CONFIG_NAMESPACE: &str = "kruise-daemon-config";
/// Env overriding `KRUISE_NAMESPACE`.
pub const ENV_POD_NAMESPACE: &str = "POD_NAMESPACE";

/// The namespace this process runs in: `$POD_NAMESPACE`, else [`KRUISE_NAMESPACE`] (where the
/// manager keeps its Lease and reads the `kruise-configuration` ConfigMap).
pub fn own_namespace() -> String {
    std::env::var(ENV_POD_NAMESPACE)
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| KRUISE_NAMESPACE.to_owned())
}
/// Env overriding `KRUISE_DAEMON_CONFIG_NAMESPACE`.
pub const ENV_DAEMON_CONFIG_NAMESPACE: &str = "KRUISE_DAEMON_CONFIG_NS";
/// Secret holding the webhook CA and serving certificate (env `SECRET_NAME`).
pub const WEBHOOK_SECRET_NAME: &str = "kruise-webhook-certs";
/// Service in front of the webhook server (env `SERVICE_NAME`); also the CRD conversion target.
pub const WEBHOOK_SERVICE_NAME: &str = "kruise-webhook-service";
/// MutatingWebhookConfiguration whose caBundle the manager keeps current.
pub const MUTATING_WEBHOOK_CONFIGURATION_NAME: &str = "kruise-mutating-webhook-configuration";
/// ValidatingWebhookConfiguration whose caBundle the manager keeps current.
pub const VALIDATING_WEBHOOK_CONFIGURATION_NAME: &str = "kruise-validating-webhook-configuration";
/// The manager's ClusterRole (deploy/manager/rbac.yaml, the Helm chart): the owner of the
/// webhook configurations the manager creates, so they go when Kruise-rs is uninstalled.
pub const MANAGER_CLUSTER_ROLE: &str = "kruise-manager";
/// The ClusterRole and ClusterRoleBinding of deletion protection's one switch (Helm
/// `deletionProtection.listAllResources`, `deploy/overlays/crd-cascading`): `list` on every
/// resource for the manager, as upstream grants, so that a Cascading CRD's objects can be
/// counted whatever its group.
pub const MANAGER_LIST_ALL_CLUSTER_ROLE: &str = "kruise-manager-list-all";
/// The ValidatingAdmissionPolicy (and its binding) that refuses, naming Kruise-rs, a Pod the Pod
/// webhook should have seen but did not (it is down): see the webhook's `configuration::policy`.
pub const POD_WEBHOOK_POLICY_NAME: &str = "kruise-rs-pod-webhook";
/// Set by the Pod webhook on every Pod create it admits; the policy above looks for it.
pub const POD_WEBHOOK_ADMITTED_ANNOTATION: &str = "apps.kruise.io/pod-webhook-admitted";
/// Port the webhook server listens on (env `WEBHOOK_PORT`).
pub const WEBHOOK_PORT: u16 = 9876;
/// Port of `WEBHOOK_SERVICE_NAME` that CRD conversion and admission calls use.
pub const WEBHOOK_SERVICE_PORT: i32 = 443;
/// HTTP path of the CRD conversion webhook.
pub const CONVERSION_WEBHOOK_PATH: &str = "/convert";
/// HTTP path of the pod mutating webhook.
pub const MUTATE_POD_PATH: &str = "/mutate-pod";
/// HTTP path of the pod validating webhook.
pub const VALIDATE_POD_PATH: &str = "/validate-pod";
/// HTTP path of the webhook server's health check.
pub const WEBHOOK_HEALTHZ_PATH: &str = "/healthz";
/// Namespace label: Pods created in a namespace carrying it (any value) skip the Pod webhook, so a
/// manager outage cannot block them (they then get no readiness gate or launch barrier).
pub const WEBHOOK_EXEMPT_NAMESPACE_LABEL: &str = "kruise.io/webhook-exempt";
/// Env overriding `WEBHOOK_SECRET_NAME`.
pub const ENV_WEBHOOK_SECRET_NAME: &str = "SECRET_NAME";
/// Env overriding `WEBHOOK_SERVICE_NAME`.
pub const ENV_WEBHOOK_SERVICE_NAME: &str = "SERVICE_NAME";
/// Env overriding `WEBHOOK_PORT`.
pub const ENV_WEBHOOK_PORT: &str = "WEBHOOK_PORT";
/// Env with a host to call instead of the Service (dev mode, manager outside the cluster).
pub const ENV_WEBHOOK_HOST: &str = "WEBHOOK_HOST";
/// Kruise-rs only: env set to `false` to stop the CloneSet webhook dry-running a Pod from each
/// new template (full Pod validation); on by default.
pub const ENV_WEBHOOK_TEMPLATE_DRY_RUN: &str = "KRUISE_WEBHOOK_TEMPLATE_DRY_RUN";

// ---- Install, check and dev mode (kubectl kruise install/check/dev, the Helm chart) ----

/// Env of the manager naming the Pod webhook's `failurePolicy` (`Fail` or `Ignore`); the Helm
/// chart's `webhookConfiguration.failurePolicy.pods` sets it.
pub const ENV_WEBHOOK_POD_FAILURE_POLICY: &str = "WEBHOOK_POD_FAILURE_POLICY";

// ---- Migration (kubectl kruise migrate) ----

/// Kruise-rs only: annotation `kubectl kruise migrate` keeps on the destination workload (a
/// CloneSet made from a Deployment) so an interrupted move resumes where the live objects stand:
/// JSON `{"from":"Deployment/web","sourceReplicas":4,"destinationReplicas":0,"replicas":4}` —
/// the source, both replica counts when the move began and how many replicas it moves.
pub const MIGRATION_ANNOTATION: &str = "apps.kruise.io/migration";

// ---- Advanced DaemonSet conditions (CloneSet's types: one string, one definition) ----

/// Annotation on a v1alpha1 Advanced DaemonSet: `"true"` is v1beta1's
/// `spec.scaleStrategy.partitionedScaling` (the conversion maps one to the other).
pub const DAEMONSET_PROGRESSIVE_CREATE_POD_ANNOTATION: &str =
    "daemonset.kruise.io/progressive-create-pod";
/// DaemonSet condition: creating or deleting its Pods failed (or the spec's numbers are invalid).
pub const DAEMONSET_CONDITION_FAILED_SCALE: &str = CLONESET_CONDITION_FAILED_SCALE;
/// DaemonSet condition: updating a Pod in place failed.
pub const DAEMONSET_CONDITION_FAILED_UPDATE: &str = CLONESET_CONDITION_FAILED_UPDATE;

/// Names owned by Kubernetes itself (core condition types and statuses, pod phases, well-known
/// labels and annotations) that Kruise-rs reads or writes. Kept apart from the Kruise names
/// above so a reader can tell which side defines them.
pub mod k8s {
    /// Annotation on a Job created by hand from a CronJob's template (`kubectl create job
    /// --from`); kruise-tools sets it on a Job made from an AdvancedCronJob too.
    pub const CRONJOB_INSTANTIATE_ANNOTATION: &str = "cronjob.kubernetes.io/instantiate";
    /// Pod condition: the pod can serve (all containers and readiness gates ready).
    pub const POD_READY: &str = "Ready";
    /// Event type of an Event reporting a problem (the other type is `Normal`).
    pub const EVENT_TYPE_WARNING: &str = "Warning";
    /// Pod condition: the pod is bound to a node.
    pub const POD_SCHEDULED: &str = "PodScheduled";
    /// Reason of `PodScheduled=False` when no node can take the pod.
    pub const POD_REASON_UNSCHEDULABLE: &str = "Unschedulable";
    /// Pod condition: every container is ready.
    pub const CONTAINERS_READY: &str = "ContainersReady";
    /// Pod condition: every init container has completed.
    pub const POD_INITIALIZED: &str = "Initialized";
    /// Node condition: the kubelet is healthy and ready to accept pods.
    pub const NODE_READY: &str = "Ready";
    /// Condition status True.
    pub const CONDITION_TRUE: &str = "True";
    /// Condition status False.
    pub const CONDITION_FALSE: &str = "False";
    /// Condition status Unknown.
    pub const CONDITION_UNKNOWN: &str = "Unknown";
    /// Reason the kubelet gives on `Ready=False` while a readiness gate is not True.
    pub const REASON_READINESS_GATES_NOT_READY: &str = "ReadinessGatesNotReady";

    /// Pod phase: accepted, not all containers started.
    pub const POD_PENDING: &str = "Pending";
    /// Pod phase: bound and at least one container running.
    pub const POD_RUNNING: &str = "Running";
    /// Pod phase: every container terminated successfully.
    pub const POD_SUCCEEDED: &str = "Succeeded";
    /// Pod phase: every container terminated, at least one in failure.
    pub const POD_FAILED: &str = "Failed";
    /// Pod phase: the state could not be obtained.
    pub const POD_UNKNOWN: &str = "Unknown";

    /// Resource name of CPU in requests and limits.
    pub const RESOURCE_CPU: &str = "cpu";
    /// Resource name of memory in requests and limits.
    pub const RESOURCE_MEMORY: &str = "memory";
    /// Container resize policy that restarts the container when the resource changes.
    pub const RESIZE_RESTART_CONTAINER: &str = "RestartContainer";

    /// Pod annotation ranking pods for deletion by their controller (lower is deleted first).
    pub const POD_DELETION_COST_ANNOTATION: &str = "controller.kubernetes.io/pod-deletion-cost";
    /// ControllerRevision label Kubernetes' controller history puts on every revision.
    pub const CONTROLLER_REVISION_HASH_KEY: &str = "controller.kubernetes.io/hash";
    /// Node label with the node's hostname (topology key of per-node spreading).
    pub const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";
    /// Namespace label the API server sets to the namespace's own name.
    pub const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";
    /// Deployment and ReplicaSet annotation with the rollout revision number.
    pub const DEPLOYMENT_REVISION_ANNOTATION: &str = "deployment.kubernetes.io/revision";
    /// Annotation recording why a revision was made (`kubectl annotate ... change-cause`).
    pub const CHANGE_CAUSE_ANNOTATION: &str = "kubernetes.io/change-cause";
    /// Pod-template annotation `kubectl rollout restart` sets to the restart time.
    pub const KUBECTL_RESTARTED_AT_ANNOTATION: &str = "kubectl.kubernetes.io/restartedAt";

    /// Event reason the kubelet gives when it stops a container (its `events.KillingContainer`);
    /// the daemon uses it too when it stops one for a restart or a recreate.
    pub const EVENT_REASON_KILLING: &str = "Killing";

    /// StatefulSet pod label with the pod's own name (a Service can select one ordinal).
    pub const STATEFULSET_POD_NAME_LABEL: &str = "statefulset.kubernetes.io/pod-name";
    /// StatefulSet pod label with the pod's ordinal.
    pub const POD_INDEX_LABEL: &str = "apps.kubernetes.io/pod-index";
    /// Annotation `kubectl apply` keeps the whole last applied object in (the manager's Pod
    /// cache drops it: nothing reads it, and it can be as large as the Pod).
    pub const LAST_APPLIED_ANNOTATION: &str = "kubectl.kubernetes.io/last-applied-configuration";
    /// Kind of a core Secret.
    pub const SECRET_KIND: &str = "Secret";
    /// Kind of a core ConfigMap.
    pub const CONFIGMAP_KIND: &str = "ConfigMap";
    /// The resource metrics API metrics-server serves (`kubectl top`): its group and the
    /// version the plugin's `top` reads.
    pub const METRICS_GROUP: &str = "metrics.k8s.io";
    pub const METRICS_API_VERSION: &str = "metrics.k8s.io/v1beta1";
    /// The APIService registering [`METRICS_API_VERSION`] with the aggregation layer.
    pub const METRICS_APISERVICE: &str = "v1beta1.metrics.k8s.io";
    /// Kind and plural of a Pod's usage in [`METRICS_API_VERSION`].
    pub const POD_METRICS_KIND: &str = "PodMetrics";
    pub const POD_METRICS_PLURAL: &str = "pods";
}

// ---------------------------------------------------------------------------------------------
// Advanced StatefulSet
// ---------------------------------------------------------------------------------------------

/// Advanced StatefulSet condition type: creating a pod or its PVCs failed.
pub const STATEFULSET_CONDITION_FAILED_CREATE_POD: &str = "FailedCreatePod";
/// Advanced StatefulSet condition type: updating a pod failed.
pub const STATEFULSET_CONDITION_FAILED_UPDATE_POD: &str = "FailedUpdatePod";
/// Annotation the Advanced StatefulSet controller writes on a PVC it resizes, naming the set
/// (upstream `PVCOwnedByStsAnnotationKey`).
pub const PVC_OWNED_BY_ASTS_ANNOTATION: &str = "apps.kruise.io/owned-by-asts";
/// Annotation marking the cluster's default StorageClass (a claim template without
/// `storageClassName` gets its volume there).
pub const DEFAULT_STORAGE_CLASS_ANNOTATION: &str = "storageclass.kubernetes.io/is-default-class";
/// Pod condition the SidecarSet controller keeps on the Pods it upgrades or finds it cannot
/// (upstream `sidecarcontrol.SidecarSetUpgradable`); its message is a JSON map SidecarSet
/// name → whether that SidecarSet can upgrade the Pod in place.
pub const SIDECARSET_POD_CONDITION_UPGRADABLE: &str = "SidecarSetUpgradable";
/// Reason of a True [`SIDECARSET_POD_CONDITION_UPGRADABLE`]: every SidecarSet in its message can.
pub const SIDECARSET_REASON_ALL_UPGRADABLE: &str = "AllSidecarsetUpgradable";
/// Reason of a False [`SIDECARSET_POD_CONDITION_UPGRADABLE`]: some SidecarSet changed more than
/// images, which a running Pod cannot take.
pub const SIDECARSET_REASON_UPDATE_IMMUTABLE_FIELD: &str = "UpdateImmutableField";
/// Event reason (Normal): a SidecarSet round found Pods it cannot upgrade in place.
pub const SIDECARSET_REASON_NOT_UPGRADABLE_PODS: &str = "NotUpgradablePods";
/// ConfigMap in the manager's namespace with Kruise's runtime configuration (upstream
/// `configuration.KruiseConfigurationName`).
pub const KRUISE_CONFIGURATION_CONFIGMAP: &str = "kruise-configuration";
/// Key of [`KRUISE_CONFIGURATION_CONFIGMAP`] with the SidecarSet `patchPodMetadata` whitelist:
/// `{"rules": [{"selector": <SidecarSet labels>, "allowedAnnotationKeyExprs": [regex]}]}`.
pub const SIDECARSET_PATCH_METADATA_WHITELIST_KEY: &str = "SidecarSet_PatchPodMetadata_WhiteList";
/// Key of [`KRUISE_CONFIGURATION_CONFIGMAP`] with the workload kinds a WorkloadSpread may target
/// beyond the built-in ones: `{"workloads": [{"Group", "Version", "Kind", "subResources":
/// [{"Group", "Version", "Kind"}], "replicasPath": "spec.replicas"}]}` (upstream
/// `WSWatchCustomWorkloadWhiteList`).
pub const WS_CUSTOM_WORKLOAD_WHITELIST_KEY: &str = "WorkloadSpread_Watch_Custom_Workload_WhiteList";
/// Key of [`KRUISE_CONFIGURATION_CONFIGMAP`] with the workload kinds a PersistentPodState may
/// target beyond the StatefulSets: `{"workloads": [{"Group", "Version", "Kind"}]}` (upstream
/// `PPSWatchCustomWorkloadWhiteList`).
pub const PPS_CUSTOM_WORKLOAD_WHITELIST_KEY: &str = "PPS_Watch_Custom_Workload_WhiteList";

// ---------------------------------------------------------------------------------------------
// ResourceDistribution
// ---------------------------------------------------------------------------------------------

/// Kind name of ResourceDistribution.
pub const RD_KIND: &str = "ResourceDistribution";
/// Annotation on every copy: hex SHA-256 of the distribution's `spec.resource` (upstream
/// `utils.ResourceHashCodeAnnotation`).
pub const RD_RESOURCE_HASH_ANNOTATION: &str = "kruise.io/resourcedistribution.resource.hashcode";
/// Annotation on every copy: the name of the distribution it came from (upstream
/// `utils.SourceResourceDistributionOfResource`).
pub const RD_SOURCE_ANNOTATION: &str = "kruise.io/resourcedistribution.resource.from";
/// ResourceDistribution validation path (upstream's).
pub const VALIDATE_RD_PATH: &str = "/validate-apps-kruise-io-v1alpha1-resourcedistribution";
/// Condition type: reading an existing copy failed.
pub const RD_CONDITION_GET_RESOURCE_FAILED: &str = "GetResourceFailed";
/// Condition type: creating a copy failed.
pub const RD_CONDITION_CREATE_RESOURCE_FAILED: &str = "CreateResourceFailed";
/// Condition type: updating a copy failed.
pub const RD_CONDITION_UPDATE_RESOURCE_FAILED: &str = "UpdateResourceFailed";
/// Condition type: deleting a copy failed.
pub const RD_CONDITION_DELETE_RESOURCE_FAILED: &str = "DeleteResourceFailed";
/// Condition type: a same-named object the distribution does not own is in the way.
pub const RD_CONDITION_CONFLICT_OCCURRED: &str = "ConflictOccurred";
/// Condition type: a listed namespace does not exist or is terminating.
pub const RD_CONDITION_NAMESPACE_NOT_EXISTS: &str = "NamespaceNotExists";
/// Reason of a False condition (upstream `OperationSucceeded`, the same word as the Pod phase).
pub const RD_REASON_SUCCEEDED: &str = k8s::POD_SUCCEEDED;
/// Reason of a True ConflictOccurred condition (upstream's error text).
pub const RD_CONFLICT_MESSAGE: &str =
    "conflict with existing resources because of the same namespace, group, version, kind and name";
/// Reason of a True NamespaceNotExists condition (upstream's error text).
pub const RD_NAMESPACE_NOT_EXISTS_MESSAGE: &str = "namespace not found or is terminating";

// ---------------------------------------------------------------------------------------------
// PersistentPodState
// ---------------------------------------------------------------------------------------------

/// Kind name of PersistentPodState.
pub const PPS_KIND: &str = "PersistentPodState";
/// StatefulSet annotation: `"true"` asks for a PersistentPodState generated from the two
/// topology annotations below (upstream `AnnotationAutoGeneratePersistentPodState`).
pub const PPS_AUTO_GENERATE_ANNOTATION: &str = "kruise.io/auto-generate-persistent-pod-state";
/// StatefulSet annotation: comma-separated node label keys a recreated Pod must keep.
pub const PPS_REQUIRED_TOPOLOGY_ANNOTATION: &str = "kruise.io/required-persistent-topology";
/// StatefulSet annotation: comma-separated node label keys a recreated Pod prefers to keep
/// (weight 100).
pub const PPS_PREFERRED_TOPOLOGY_ANNOTATION: &str = "kruise.io/preferred-persistent-topology";
/// StatefulSet annotation: comma-separated Pod annotation keys to record.
pub const PPS_PERSISTENT_POD_ANNOTATIONS_ANNOTATION: &str = "kruise.io/persistent-pod-annotations";
/// Pod annotation: the PersistentPodState whose recorded topology the webhook injected.
pub const PPS_INJECTED_ANNOTATION: &str = "kruise.io/injected-persistent-pod-state";
/// `spec.persistentPodStateRetentionPolicy`: drop a Pod's state when the workload scales it
/// away (the default).
pub const PPS_RETENTION_WHEN_SCALED: &str = "WhenScaled";
/// `spec.persistentPodStateRetentionPolicy`: keep every state until the workload is deleted.
pub const PPS_RETENTION_WHEN_DELETED: &str = "WhenDeleted";
/// Validation path (upstream's).
pub const VALIDATE_PPS_PATH: &str = "/validate-apps-kruise-io-persistentpodstate";
/// Event reason (Warning, on the PersistentPodState) when its workload cannot be read.
pub const PPS_REASON_WORKLOAD_UNREADABLE: &str = "WorkloadUnreadable";

// ---------------------------------------------------------------------------------------------
// WorkloadSpread
// ---------------------------------------------------------------------------------------------

/// Validation path (upstream's).
pub const VALIDATE_WORKLOADSPREAD_PATH: &str = "/validate-apps-kruise-io-v1alpha1-workloadspread";
/// Deletion cost of a Pod of a subset under its cap: `100 × (subsets − index)` (upstream
/// `PodDeletionCostPositive`).
pub const WS_DELETION_COST_POSITIVE: i32 = 100;
/// Deletion cost of a Pod over its subset's cap: `-100 × (index + 1)` (upstream
/// `PodDeletionCostNegative`).
pub const WS_DELETION_COST_NEGATIVE: i32 = -100;
/// Seconds a `creatingPods` entry waits for its Pod (upstream `CreatPodTimeout`).
pub const WS_CREATE_POD_TIMEOUT_SECS: i64 = 30;
/// Seconds a `deletingPods` entry waits for its Pod to go (upstream `DeletePodTimeout`).
pub const WS_DELETE_POD_TIMEOUT_SECS: i64 = 15;
/// The key of `versionedSubsetStatuses` for Pods not counted per revision (upstream
/// `VersionIgnored`): those of every kind but Deployments and ReplicaSets.
pub const WS_VERSION_IGNORED: &str = "versionIgnored";
/// Seconds a subset stays `Schedulable=False` under `Adaptive` before new Pods are tried there
/// again (upstream `MaxScheduledFailedDuration`).
pub const WS_MAX_SCHEDULED_FAILED_SECS: i64 = 300;
/// WorkloadSpread annotation: `"true"` keeps the controller from applying a subset's patch
/// (labels, annotations) to a Pod created before the WorkloadSpread that it adopts into the
/// subset (upstream `IgnorePatchExistingPodsAnnotation`).
pub const WS_IGNORE_PATCH_EXISTING_PODS_ANNOTATION: &str =
    "workloadspread.kruise.io/ignore-patch-existing-pods-metadata";
/// Event reason (Normal, on the WorkloadSpread) when an unschedulable subset is opened again.
pub const WS_REASON_RECOVER_SCHEDULABLE: &str = "RecoverSchedulable";
/// Event reason (Warning, on the WorkloadSpread) when an unschedulable Pod cannot be deleted.
pub const WS_REASON_DELETE_POD_FAILED: &str = "DeletePodFailed";
/// Kruise-rs only: Event reason (Warning, on the WorkloadSpread) when the manager may not read
/// its target (a custom kind it has no RBAC for).
pub const WS_REASON_TARGET_UNREADABLE: &str = "TargetUnreadable";

// ---------------------------------------------------------------------------------------------
// UnitedDeployment
// ---------------------------------------------------------------------------------------------

/// Defaulting path (upstream's).
pub const MUTATE_UNITEDDEPLOYMENT_PATH: &str = "/mutate-apps-kruise-io-v1alpha1-uniteddeployment";
/// Validation path (upstream's).
pub const VALIDATE_UNITEDDEPLOYMENT_PATH: &str =
    "/validate-apps-kruise-io-v1alpha1-uniteddeployment";
/// Event reason (Warning): the revision could not be made (upstream `FailedRevisionProvision`).
pub const UD_REASON_FAILED_REVISION: &str = "FailedRevisionProvision";
/// Event reason (Warning): the subsets' workloads could not be read.
pub const UD_REASON_FAILED_FIND_SUBSETS: &str = "FailedFindSubsets";
/// Event reason (Warning): the subsets' replicas cannot be allocated.
pub const UD_REASON_FAILED_SPECIFY_REPLICAS: &str = "FailedSpecifySubsetReplicas";
/// Event reason (Warning): a subset's workload could not be created, updated or deleted.
pub const UD_REASON_FAILED_UPDATE_SUBSET: &str = "FailedUpdateSubset";
/// Event reason (Normal): subsets' workloads were created or deleted.
pub const UD_REASON_SUCCESSFUL_UPDATE_SUBSET: &str = "SuccessfulUpdateSubset";

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    /// Two constants with one value would mean one name is spelled twice under two names.
    #[test]
    fn string_values_are_unique() {
        let mut seen: BTreeMap<String, &str> = BTreeMap::new();
        // rustfmt may wrap a long value onto the next line, so read up to the `;`.
        for item in include_str!("keys.rs").split("\npub const ").skip(1) {
            let Some((decl, _)) = item.split_once(';') else {
                continue;
            };
            let Some((name, value)) = decl.split_once(": &str =") else {
                continue;
            };
            let value = value.trim().to_owned();
            if let Some(other) = seen.insert(value.clone(), name) {
                panic!("{name} and {other} both hold {value}");
            }
        }
        assert!(seen.len() > 50, "parsed {} constants", seen.len());
    }

    /// A Kubernetes-owned name spelled like a Kruise one would mean one of them sits in the
    /// wrong part of this file. (Inside `k8s`, one string may name two things, e.g. the Pod and
    /// the Node `Ready` condition.)
    #[test]
    fn kubernetes_names_are_apart_from_kruise_names() {
        let src = include_str!("keys.rs");
        let (kruise, rest) = src.split_once("\npub mod k8s {").expect("k8s module");
        let values = |text: &str, marker: &str| -> Vec<String> {
            text.split(marker)
                .skip(1)
                .filter_map(|item| item.split_once(';'))
                .filter_map(|(decl, _)| decl.split_once(": &str ="))
                .map(|(_, v)| v.trim().to_owned())
                .collect()
        };
        let kruise = values(kruise, "\npub const ");
        let k8s = values(rest, "\n    pub const ");
        assert!(k8s.len() > 15, "parsed {} Kubernetes names", k8s.len());
        for v in &k8s {
            assert!(
                !kruise.contains(v),
                "{v} is both a Kruise and a Kubernetes name"
            );
        }
    }
}
