//! Assembles the CustomResourceDefinitions of every kind, all versions merged, in a stable order.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceConversion, CustomResourceDefinition, ServiceReference, WebhookClientConfig,
    WebhookConversion,
};
use kube::CustomResourceExt;
use kube::core::crd::merge_crds;

use crate::apps::{v1alpha1, v1beta1};
use crate::keys;
use crate::policy;

/// Why the CRDs could not be assembled (a programming error in this crate).
#[derive(Debug, thiserror::Error)]
#[error("cannot merge the versions of {crd}: {source}")]
pub struct CrdError {
    crd: &'static str,
    #[source]
    source: kube::core::crd::MergeError,
}

/// How the apiserver converts between served versions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Conversion {
    /// Schemas are JSON-compatible; the apiserver only rewrites apiVersion (upstream does the
    /// same for ImagePullJob, ImageListPullJob and NodeImage).
    None,
    /// Through the manager's `/convert` endpoint; the manager patches in the caBundle.
    Webhook,
}

/// The version each CRD with two versions stores, one line per kind: following an upstream
/// release that moves a kind's storage is a change here (then `crdgen`, and on clusters that
/// ran the old storage `kubectl kruise migrate storage`). As OpenKruise v1.9.0 (the release
/// tag): the seven kinds that release has in v1alpha1 only store v1alpha1; we serve their
/// v1beta1 as well (master's shape), converted through the webhook, never stored.
pub const STORAGE_VERSIONS: &[(&str, &str)] = &[
    ("advancedcronjobs.apps.kruise.io", keys::VERSION_V1BETA1),
    ("broadcastjobs.apps.kruise.io", keys::VERSION_V1BETA1),
    ("clonesets.apps.kruise.io", keys::VERSION_V1ALPHA1),
    (
        "containerrecreaterequests.apps.kruise.io",
        keys::VERSION_V1ALPHA1,
    ),
    ("daemonsets.apps.kruise.io", keys::VERSION_V1BETA1),
    ("imagelistpulljobs.apps.kruise.io", keys::VERSION_V1BETA1),
    ("imagepulljobs.apps.kruise.io", keys::VERSION_V1BETA1),
    ("nodeimages.apps.kruise.io", keys::VERSION_V1BETA1),
    ("persistentpodstates.apps.kruise.io", keys::VERSION_V1ALPHA1),
    (
        "podunavailablebudgets.policy.kruise.io",
        keys::VERSION_V1ALPHA1,
    ),
    (
        "resourcedistributions.apps.kruise.io",
        keys::VERSION_V1ALPHA1,
    ),
    ("sidecarsets.apps.kruise.io", keys::VERSION_V1BETA1),
    ("statefulsets.apps.kruise.io", keys::VERSION_V1BETA1),
    ("uniteddeployments.apps.kruise.io", keys::VERSION_V1ALPHA1),
    ("workloadspreads.apps.kruise.io", keys::VERSION_V1ALPHA1),
];

/// The storage version of the CRD `name` ([`STORAGE_VERSIONS`]; v1alpha1 for the kinds that
/// only have that one).
pub fn storage_version(name: &str) -> &'static str {
    STORAGE_VERSIONS
        .iter()
        .find(|(n, _)| *n == name)
        .map_or(keys::VERSION_V1ALPHA1, |(_, v)| v)
}

fn merged(
    name: &'static str,
    versions: Vec<CustomResourceDefinition>,
    conversion: Conversion,
) -> Result<CustomResourceDefinition, CrdError> {
    let mut crd = if versions.len() == 1 {
        versions.into_iter().next().ok_or(CrdError {
            crd: name,
            source: kube::core::crd::MergeError::MissingCrds,
        })?
    } else {
        merge_crds(versions, storage_version(name))
            .map_err(|source| CrdError { crd: name, source })?
    };
    // merge_crds pops versions in reverse; sort so output is stable and reads like upstream.
    crd.spec.versions.sort_by(|a, b| a.name.cmp(&b.name));
    if conversion == Conversion::Webhook {
        crd.spec.conversion = Some(webhook_conversion());
    }
    Ok(crd)
}

/// The conversion stanza of multi-version CRDs. caBundle is left out: the manager writes it
/// at run time, once it has generated its CA.
pub fn webhook_conversion() -> CustomResourceConversion {
    CustomResourceConversion {
        strategy: "Webhook".into(),
        webhook: Some(WebhookConversion {
            client_config: Some(WebhookClientConfig {
                service: Some(ServiceReference {
                    name: keys::WEBHOOK_SERVICE_NAME.into(),
                    namespace: keys::KRUISE_NAMESPACE.into(),
                    path: Some(keys::CONVERSION_WEBHOOK_PATH.into()),
                    port: Some(keys::WEBHOOK_SERVICE_PORT),
                }),
                ..Default::default()
            }),
            conversion_review_versions: vec!["v1".into(), "v1beta1".into()],
        }),
    }
}

/// Every CRD this project installs, sorted by name.
pub fn all() -> Result<Vec<CustomResourceDefinition>, CrdError> {
    let mut crds = converted()?;
    crds.extend(unconverted()?);
    crds.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    Ok(crds)
}

/// The CRDs whose versions convert through the webhook.
fn converted() -> Result<Vec<CustomResourceDefinition>, CrdError> {
    Ok(vec![
        merged(
            "clonesets.apps.kruise.io",
            vec![v1alpha1::CloneSet::crd(), v1beta1::CloneSet::crd()],
            Conversion::Webhook,
        )?,
        merged(
            "containerrecreaterequests.apps.kruise.io",
            vec![
                v1alpha1::ContainerRecreateRequest::crd(),
                v1beta1::ContainerRecreateRequest::crd(),
            ],
            Conversion::Webhook,
        )?,
        merged(
            "daemonsets.apps.kruise.io",
            vec![v1alpha1::DaemonSet::crd(), v1beta1::DaemonSet::crd()],
            Conversion::Webhook,
        )?,
        merged(
            "sidecarsets.apps.kruise.io",
            vec![v1alpha1::SidecarSet::crd(), v1beta1::SidecarSet::crd()],
            Conversion::Webhook,
        )?,
        merged(
            "persistentpodstates.apps.kruise.io",
            vec![
                v1alpha1::PersistentPodState::crd(),
                v1beta1::PersistentPodState::crd(),
            ],
            Conversion::Webhook,
        )?,
        merged(
            "workloadspreads.apps.kruise.io",
            vec![
                v1alpha1::WorkloadSpread::crd(),
                v1beta1::WorkloadSpread::crd(),
            ],
            Conversion::Webhook,
        )?,
        // Upstream converts through its webhook: v1beta1 keeps each subset's replicas and
        // partition in status.subsetStatuses (v1alpha1: status.subsetReplicas, updateStatus).
        merged(
            "uniteddeployments.apps.kruise.io",
            vec![
                v1alpha1::UnitedDeployment::crd(),
                v1beta1::UnitedDeployment::crd(),
            ],
            Conversion::Webhook,
        )?,
        merged(
            "resourcedistributions.apps.kruise.io",
            vec![
                v1alpha1::ResourceDistribution::crd(),
                v1beta1::ResourceDistribution::crd(),
            ],
            Conversion::Webhook,
        )?,
        // Upstream installs it with a conversion webhook (config/crd/patches/
        // webhook_in_statefulsets.yaml): v1alpha1 is v1beta1 less the fields v1beta1 added,
        // which its v1beta1 → v1alpha1 drops (ours keeps them in the conversion record).
        merged(
            "statefulsets.apps.kruise.io",
            vec![v1alpha1::StatefulSet::crd(), v1beta1::StatefulSet::crd()],
            Conversion::Webhook,
        )?,
        // Upstream converts through a webhook: v1beta1 turns v1alpha1's protect-operations and
        // protect-total-replicas annotations into fields and adds ignoredPodSelector.
        merged(
            "podunavailablebudgets.policy.kruise.io",
            vec![
                policy::v1alpha1::PodUnavailableBudget::crd(),
                policy::v1beta1::PodUnavailableBudget::crd(),
            ],
            Conversion::Webhook,
        )?,
    ])
}

/// The CRDs served in one version, or in two with the same JSON (no conversion).
fn unconverted() -> Result<Vec<CustomResourceDefinition>, CrdError> {
    Ok(vec![
        // Upstream serves both versions without a conversion webhook: v1alpha1's JSON is
        // v1beta1's less `template.imageListPullJobTemplate`.
        merged(
            "advancedcronjobs.apps.kruise.io",
            vec![
                v1alpha1::AdvancedCronJob::crd(),
                v1beta1::AdvancedCronJob::crd(),
            ],
            Conversion::None,
        )?,
        // Upstream serves both versions without a conversion webhook: their JSON is the same.
        merged(
            "broadcastjobs.apps.kruise.io",
            vec![v1alpha1::BroadcastJob::crd(), v1beta1::BroadcastJob::crd()],
            Conversion::None,
        )?,
        // v1alpha1 only, as upstream.
        merged(
            "ephemeraljobs.apps.kruise.io",
            vec![v1alpha1::EphemeralJob::crd()],
            Conversion::None,
        )?,
        merged(
            "imagepulljobs.apps.kruise.io",
            vec![v1alpha1::ImagePullJob::crd(), v1beta1::ImagePullJob::crd()],
            Conversion::None,
        )?,
        merged(
            "imagelistpulljobs.apps.kruise.io",
            vec![
                v1alpha1::ImageListPullJob::crd(),
                v1beta1::ImageListPullJob::crd(),
            ],
            Conversion::None,
        )?,
        // v1alpha1 only, as upstream.
        merged(
            "nodepodprobes.apps.kruise.io",
            vec![v1alpha1::NodePodProbe::crd()],
            Conversion::None,
        )?,
        merged(
            "podprobemarkers.apps.kruise.io",
            vec![v1alpha1::PodProbeMarker::crd()],
            Conversion::None,
        )?,
        merged(
            "nodeimages.apps.kruise.io",
            vec![v1alpha1::NodeImage::crd(), v1beta1::NodeImage::crd()],
            Conversion::None,
        )?,
    ])
}

/// Why a CRD could not be rendered as YAML.
#[derive(Debug, thiserror::Error)]
#[error("cannot render CRD {name} as YAML: {source}")]
pub struct RenderError {
    name: String,
    #[source]
    source: serde_saphyr::SerializeError,
}

/// File name of a CRD in `deploy/crds/`, as upstream names them: `{group}_{plural}.yaml`.
pub fn file_name(crd: &CustomResourceDefinition) -> String {
    format!("{}_{}.yaml", crd.spec.group, crd.spec.names.plural)
}

/// One CRD as a YAML document (starting with `---`), the exact text checked in under
/// `deploy/crds/`.
pub fn to_yaml(crd: &CustomResourceDefinition) -> Result<String, RenderError> {
    let body = serde_saphyr::to_string(crd).map_err(|source| RenderError {
        name: crd.metadata.name.clone().unwrap_or_default(),
        source,
    })?;
    Ok(format!("---\n{body}"))
}
