//! The MutatingWebhookConfiguration we register: every defaulting path and the Pod hook.

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhook, MutatingWebhookConfiguration, RuleWithOperations,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kruise_api::features::Gate;
use kube::api::ObjectMeta;

use super::{CLONESET_VERSIONS, Endpoint, excluded_namespaces, rule};
use crate::{WebhookConfig, paths};
use kruise_api::keys;

/// Name of the Pod mutating hook (upstream's).
pub(super) const POD_HOOK: &str = "mpod.kb.io";

/// The mutating configuration.
pub fn mutating_configuration(cfg: &WebhookConfig, ca_pem: &str) -> MutatingWebhookConfiguration {
    let ep = Endpoint::from_config(cfg);
    let pod_webhook = cfg.feature_gates.enabled(Gate::PodWebhook);
    let hook =
        |name: &str, path: &str, rules: Vec<RuleWithOperations>, ns: Option<LabelSelector>| {
            MutatingWebhook {
                name: name.to_owned(),
                client_config: ep.client_config(path, ca_pem),
                rules: Some(rules),
                // Only the Pod hook's policy is a setting (the chart's webhookConfiguration.failurePolicy.pods).
                failure_policy: Some(if path == paths::MUTATE_POD {
                    cfg.pod_failure_policy.clone()
                } else {
                    "Fail".to_owned()
                }),
                side_effects: "None".to_owned(),
                admission_review_versions: vec!["v1".to_owned()],
                timeout_seconds: Some(cfg.timeout_seconds),
                match_policy: Some("Equivalent".to_owned()),
                namespace_selector: ns,
                reinvocation_policy: Some("Never".to_owned()),
                ..Default::default()
            }
        };
    MutatingWebhookConfiguration {
        metadata: ObjectMeta {
            name: Some(keys::MUTATING_WEBHOOK_CONFIGURATION_NAME.to_owned()),
            ..Default::default()
        },
        webhooks: Some(
            vec![
                hook(
                    POD_HOOK,
                    paths::MUTATE_POD,
                    vec![rule(&[""], &["v1"], &["CREATE"], &["pods"])],
                    Some(excluded_namespaces(cfg)),
                ),
                hook(
                    "mcloneset.kb.io",
                    paths::MUTATE_CLONESET,
                    vec![rule(
                        &[keys::APPS_GROUP],
                        CLONESET_VERSIONS,
                        &["CREATE", "UPDATE"],
                        &["clonesets"],
                    )],
                    None,
                ),
                hook(
                    "mstatefulset.kb.io",
                    paths::MUTATE_STATEFULSET,
                    vec![rule(
                        &[keys::APPS_GROUP],
                        CLONESET_VERSIONS,
                        &["CREATE", "UPDATE"],
                        &["statefulsets"],
                    )],
                    None,
                ),
                hook(
                    "mdaemonset.kb.io",
                    paths::MUTATE_DAEMONSET,
                    vec![rule(
                        &[keys::APPS_GROUP],
                        CLONESET_VERSIONS,
                        &["CREATE", "UPDATE"],
                        &["daemonsets"],
                    )],
                    None,
                ),
                hook(
                    "madvancedcronjob.kb.io",
                    paths::MUTATE_ADVANCEDCRONJOB,
                    vec![rule(
                        &[keys::APPS_GROUP],
                        CLONESET_VERSIONS,
                        &["CREATE", "UPDATE"],
                        &["advancedcronjobs"],
                    )],
                    None,
                ),
                hook(
                    "mbroadcastjob.kb.io",
                    paths::MUTATE_BROADCASTJOB,
                    vec![rule(
                        &[keys::APPS_GROUP],
                        CLONESET_VERSIONS,
                        &["CREATE", "UPDATE"],
                        &["broadcastjobs"],
                    )],
                    None,
                ),
                hook(
                    "mephemeraljob.kb.io",
                    paths::MUTATE_EPHEMERALJOB,
                    vec![rule(
                        &[keys::APPS_GROUP],
                        &[keys::VERSION_V1ALPHA1],
                        &["CREATE", "UPDATE"],
                        &["ephemeraljobs"],
                    )],
                    None,
                ),
                hook(
                    "mpodprobemarker.kb.io",
                    paths::MUTATE_PODPROBEMARKER,
                    vec![rule(
                        &[keys::APPS_GROUP],
                        &[keys::VERSION_V1ALPHA1],
                        &["CREATE", "UPDATE"],
                        &["podprobemarkers"],
                    )],
                    None,
                ),
                hook(
                    "mimagepulljob.kb.io",
                    paths::MUTATE_IMAGEPULLJOB,
                    vec![rule(
                        &[keys::APPS_GROUP],
                        CLONESET_VERSIONS,
                        &["CREATE", "UPDATE"],
                        &["imagepulljobs"],
                    )],
                    None,
                ),
                hook(
                    "mnodeimage.kb.io",
                    paths::MUTATE_NODEIMAGE,
                    vec![rule(
                        &[keys::APPS_GROUP],
                        CLONESET_VERSIONS,
                        &["CREATE", "UPDATE"],
                        &["nodeimages"],
                    )],
                    None,
                ),
                hook(
                    "mimagelistpulljob.kb.io",
                    paths::MUTATE_IMAGELISTPULLJOB,
                    vec![rule(
                        &[keys::APPS_GROUP],
                        CLONESET_VERSIONS,
                        &["CREATE", "UPDATE"],
                        &["imagelistpulljobs"],
                    )],
                    None,
                ),
                // CREATE only: upstream's handler also refuses spec changes on UPDATE, which here
                // is the validating hook's job (it sees the object after every mutation).
                hook(
                    "mcontainerrecreaterequest.kb.io",
                    paths::MUTATE_CRR,
                    vec![rule(
                        &[keys::APPS_GROUP],
                        CLONESET_VERSIONS,
                        &["CREATE"],
                        &["containerrecreaterequests"],
                    )],
                    None,
                ),
                hook(
                    "msidecarset.kb.io",
                    paths::MUTATE_SIDECARSET,
                    vec![rule(
                        &[keys::APPS_GROUP],
                        CLONESET_VERSIONS,
                        &["CREATE", "UPDATE"],
                        &["sidecarsets"],
                    )],
                    None,
                ),
                hook(
                    "muniteddeployment.kb.io",
                    paths::MUTATE_UNITEDDEPLOYMENT,
                    vec![rule(
                        &[keys::APPS_GROUP],
                        &[keys::VERSION_V1ALPHA1],
                        &["CREATE", "UPDATE"],
                        &["uniteddeployments"],
                    )],
                    None,
                ),
            ]
            .into_iter()
            // Upstream registers no Pod handler without `PodWebhook`, and leaves a hook whose
            // handler is missing out of the configuration.
            .filter(|h| pod_webhook || h.name != POD_HOOK)
            .collect(),
        ),
    }
}
