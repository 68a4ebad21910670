//! The ValidatingWebhookConfiguration we register: every validating path.

use k8s_openapi::api::admissionregistration::v1::{
    ValidatingWebhook, ValidatingWebhookConfiguration,
};
use kube::api::ObjectMeta;

use super::{CLONESET_VERSIONS, Endpoint, deletion_protection, excluded_namespaces, rule};
use crate::{WebhookConfig, paths};
use kruise_api::keys;

/// Names of the Pod hooks (upstream's): Pod updates and deletes, and evictions.
pub(super) const POD_HOOKS: &[&str] = &["vpod.kb.io", "vpodeviction.kb.io"];

/// The validating configuration.
pub fn validating_configuration(
    cfg: &WebhookConfig,
    ca_pem: &str,
) -> ValidatingWebhookConfiguration {
    let ep = Endpoint::from_config(cfg);
    // Kruise kinds serve v1alpha1 and v1beta1 alike.
    let hook = |name: &str, path: &str, ops: &[&str], resource: &str| ValidatingWebhook {
        name: name.to_owned(),
        client_config: ep.client_config(path, ca_pem),
        rules: Some(vec![rule(
            &[keys::APPS_GROUP],
            CLONESET_VERSIONS,
            ops,
            &[resource],
        )]),
        failure_policy: Some("Fail".to_owned()),
        side_effects: "None".to_owned(),
        admission_review_versions: vec!["v1".to_owned()],
        timeout_seconds: Some(cfg.timeout_seconds),
        match_policy: Some("Equivalent".to_owned()),
        ..Default::default()
    };
    // `/validate-pod` (upstream's two hooks): Pod updates and deletes, and evictions; kept away
    // from the namespaces the Pod mutating hook avoids, with its failure policy, and absent
    // while the PodWebhook gate is off, like the mutating hook.
    let pod_hook = |name: &str, ops: &[&str], resource: &str| ValidatingWebhook {
        name: name.to_owned(),
        rules: Some(vec![rule(&[""], &["v1"], ops, &[resource])]),
        failure_policy: Some(cfg.pod_failure_policy.clone()),
        namespace_selector: Some(excluded_namespaces(cfg)),
        ..hook("", paths::VALIDATE_POD, &[], "")
    };
    let pod_hooks = if cfg
        .feature_gates
        .enabled(kruise_api::features::Gate::PodWebhook)
    {
        vec![
            pod_hook(POD_HOOKS[0], &["UPDATE", "DELETE"], "pods"),
            pod_hook(POD_HOOKS[1], &["CREATE"], "pods/eviction"),
        ]
    } else {
        Vec::new()
    };
    let mut config = ValidatingWebhookConfiguration {
        metadata: ObjectMeta {
            name: Some(keys::VALIDATING_WEBHOOK_CONFIGURATION_NAME.to_owned()),
            ..Default::default()
        },
        webhooks: Some(
            vec![
                hook(
                    "vcloneset.kb.io",
                    paths::VALIDATE_CLONESET,
                    &["CREATE", "UPDATE", "DELETE"],
                    "clonesets",
                ),
                hook(
                    "vstatefulset.kb.io",
                    paths::VALIDATE_STATEFULSET,
                    &["CREATE", "UPDATE", "DELETE"],
                    "statefulsets",
                ),
                hook(
                    "vdaemonset.kb.io",
                    paths::VALIDATE_DAEMONSET,
                    &["CREATE", "UPDATE", "DELETE"],
                    "daemonsets",
                ),
                hook(
                    "vadvancedcronjob.kb.io",
                    paths::VALIDATE_ADVANCEDCRONJOB,
                    &["CREATE", "UPDATE"],
                    "advancedcronjobs",
                ),
                hook(
                    "vbroadcastjob.kb.io",
                    paths::VALIDATE_BROADCASTJOB,
                    &["CREATE", "UPDATE"],
                    "broadcastjobs",
                ),
                ValidatingWebhook {
                    name: "vephemeraljobs.kb.io".to_owned(),
                    rules: Some(vec![rule(
                        &[keys::APPS_GROUP],
                        &[keys::VERSION_V1ALPHA1],
                        &["CREATE", "UPDATE"],
                        &["ephemeraljobs"],
                    )]),
                    ..hook("", paths::VALIDATE_EPHEMERALJOB, &[], "")
                },
                ValidatingWebhook {
                    name: "vpodprobemarker.kb.io".to_owned(),
                    rules: Some(vec![rule(
                        &[keys::APPS_GROUP],
                        &[keys::VERSION_V1ALPHA1],
                        &["CREATE", "UPDATE"],
                        &["podprobemarkers"],
                    )]),
                    ..hook("", paths::VALIDATE_PODPROBEMARKER, &[], "")
                },
                hook(
                    "vimagepulljob.kb.io",
                    paths::VALIDATE_IMAGEPULLJOB,
                    &["CREATE", "UPDATE"],
                    "imagepulljobs",
                ),
                hook(
                    "vnodeimage.kb.io",
                    paths::VALIDATE_NODEIMAGE,
                    &["CREATE", "UPDATE"],
                    "nodeimages",
                ),
                hook(
                    "vimagelistpulljob.kb.io",
                    paths::VALIDATE_IMAGELISTPULLJOB,
                    &["CREATE", "UPDATE"],
                    "imagelistpulljobs",
                ),
                hook(
                    "vcontainerrecreaterequest.kb.io",
                    paths::VALIDATE_CRR,
                    &["CREATE", "UPDATE"],
                    "containerrecreaterequests",
                ),
                hook(
                    "vsidecarset.kb.io",
                    paths::VALIDATE_SIDECARSET,
                    &["CREATE", "UPDATE"],
                    "sidecarsets",
                ),
                ValidatingWebhook {
                    name: "vresourcedistribution.kb.io".to_owned(),
                    rules: Some(vec![rule(
                        &[keys::APPS_GROUP],
                        &[keys::VERSION_V1ALPHA1],
                        &["CREATE", "UPDATE"],
                        &["resourcedistributions"],
                    )]),
                    ..hook("", paths::VALIDATE_RESOURCEDISTRIBUTION, &[], "")
                },
                ValidatingWebhook {
                    name: "vpersistentpodstate.kb.io".to_owned(),
                    rules: Some(vec![rule(
                        &[keys::APPS_GROUP],
                        &[keys::VERSION_V1ALPHA1],
                        &["CREATE", "UPDATE"],
                        &["persistentpodstates"],
                    )]),
                    ..hook("", paths::VALIDATE_PPS, &[], "")
                },
                ValidatingWebhook {
                    name: "vworkloadspread.kb.io".to_owned(),
                    rules: Some(vec![rule(
                        &[keys::APPS_GROUP],
                        &[keys::VERSION_V1ALPHA1],
                        &["CREATE", "UPDATE"],
                        &["workloadspreads"],
                    )]),
                    ..hook("", paths::VALIDATE_WORKLOADSPREAD, &[], "")
                },
                ValidatingWebhook {
                    name: "vuniteddeployment.kb.io".to_owned(),
                    rules: Some(vec![rule(
                        &[keys::APPS_GROUP],
                        &[keys::VERSION_V1ALPHA1],
                        &["CREATE", "UPDATE"],
                        &["uniteddeployments"],
                    )]),
                    ..hook("", paths::VALIDATE_UNITEDDEPLOYMENT, &[], "")
                },
                // Both versions, as upstream: a v1beta1 budget must reach the validator as
                // written, to refuse spec.ignoredPodSelector, which v1alpha1 cannot carry.
                ValidatingWebhook {
                    name: "vpodunavailablebudget.kb.io".to_owned(),
                    rules: Some(vec![rule(
                        &[keys::POLICY_GROUP],
                        &[keys::VERSION_V1ALPHA1, keys::VERSION_V1BETA1],
                        &["CREATE", "UPDATE"],
                        &["podunavailablebudgets"],
                    )]),
                    ..hook("", paths::VALIDATE_PUB, &[], "")
                },
            ]
            .into_iter()
            .chain(pod_hooks)
            .collect(),
        ),
    };
    if let Some(hooks) = config.webhooks.as_mut() {
        hooks.extend(deletion_protection::hooks(cfg, &ep, ca_pem));
    }
    config
}
