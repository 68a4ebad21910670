//! The admission policy that says "Kruise-rs is down" (docs/safety.md).
//!
//! A webhook that cannot be reached fails with the API server's own words ("failed calling
//! webhook "mpod.kb.io" … no endpoints available"), which name neither Kruise-rs nor what to do.
//! So once the Pod hook is scoped, it is registered with `failurePolicy: Ignore`, it marks every
//! Pod it admits ([`keys::POD_WEBHOOK_ADMITTED_ANNOTATION`]), and this ValidatingAdmissionPolicy,
//! evaluated inside the API server, refuses a Pod in the same scope that carries no mark: one the
//! webhook did not see. The Pod is refused either way; the message is ours.
//!
//! Order of writes (see [`super::apply`]): the policy before the hook when the scope changes, so
//! a Pod newly in scope is refused rather than let through unseen for the moment between them.

use k8s_openapi::api::admissionregistration::v1::{
    MatchCondition, ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::json;

use super::{FIELD_MANAGER, excluded_namespaces};
use crate::{Error, WebhookConfig};
use kruise_api::keys;

/// What the refused user reads (after the API server's "ValidatingAdmissionPolicy … denied
/// request:").
pub fn message(cfg: &WebhookConfig) -> String {
    format!(
        "Kruise-rs is down: its Pod webhook (the kruise-manager Pods behind Service {}/{}) did \
         not admit this Pod, which Kruise-rs must see (a SidecarSet selects it, a WorkloadSpread, \
         PersistentPodState or PodUnavailableBudget is in its namespace, a Kruise workload owns \
         it, or it asks for container launch priority). It is refused rather than created \
         without its sidecars or placement; bring the manager back (kubectl kruise check).",
        cfg.namespace, cfg.service_name
    )
}

/// The policy for the Pod hook's conditions.
pub fn policy(
    cfg: &WebhookConfig,
    conditions: &[MatchCondition],
    owner: Option<&[OwnerReference]>,
) -> Result<ValidatingAdmissionPolicy, Error> {
    let mark = serde_json::to_string(keys::POD_WEBHOOK_ADMITTED_ANNOTATION)
        .map_err(|e| Error::Policy(e.to_string()))?;
    let value = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": keys::POD_WEBHOOK_POLICY_NAME, "ownerReferences": owner},
        "spec": {
            // A condition that cannot be evaluated lets the Pod through, as the hook then does.
            "failurePolicy": "Ignore",
            "matchConstraints": {
                "resourceRules": [{
                    "apiGroups": [""], "apiVersions": ["v1"],
                    "operations": ["CREATE"], "resources": ["pods"]
                }],
                "namespaceSelector": excluded_namespaces(cfg),
            },
            "matchConditions": conditions,
            "validations": [{
                "expression": format!(
                    "has(object.metadata.annotations) && {mark} in object.metadata.annotations"
                ),
                "message": message(cfg),
                "reason": "Forbidden",
            }],
        }
    });
    serde_json::from_value(value).map_err(|e| Error::Policy(e.to_string()))
}

/// The binding that makes the policy deny.
pub fn binding(
    owner: Option<&[OwnerReference]>,
) -> Result<ValidatingAdmissionPolicyBinding, Error> {
    serde_json::from_value(json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": keys::POD_WEBHOOK_POLICY_NAME, "ownerReferences": owner},
        "spec": {"policyName": keys::POD_WEBHOOK_POLICY_NAME, "validationActions": ["Deny"]}
    }))
    .map_err(|e| Error::Policy(e.to_string()))
}

/// Applies the policy and its binding.
pub async fn apply(
    client: &kube::Client,
    cfg: &WebhookConfig,
    conditions: &[MatchCondition],
    owner: Option<&[OwnerReference]>,
) -> Result<(), Error> {
    let pp = PatchParams::apply(FIELD_MANAGER).force();
    Api::<ValidatingAdmissionPolicy>::all(client.clone())
        .patch(
            keys::POD_WEBHOOK_POLICY_NAME,
            &pp,
            &Patch::Apply(&policy(cfg, conditions, owner)?),
        )
        .await?;
    Api::<ValidatingAdmissionPolicyBinding>::all(client.clone())
        .patch(
            keys::POD_WEBHOOK_POLICY_NAME,
            &pp,
            &Patch::Apply(&binding(owner)?),
        )
        .await?;
    Ok(())
}

/// Deletes the policy and its binding (absent ones are fine): the Pod hook is not scoped, off,
/// or `Ignore` by the user's choice, so no Pod may be refused for lacking the mark.
pub async fn remove(client: &kube::Client) -> Result<(), Error> {
    let dp = DeleteParams::default();
    super::gone(
        Api::<ValidatingAdmissionPolicyBinding>::all(client.clone())
            .delete(keys::POD_WEBHOOK_POLICY_NAME, &dp)
            .await,
    )?;
    super::gone(
        Api::<ValidatingAdmissionPolicy>::all(client.clone())
            .delete(keys::POD_WEBHOOK_POLICY_NAME, &dp)
            .await,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_refuses_unmarked_pods_in_scope_naming_kruise_rs() {
        let cfg = WebhookConfig::default();
        let cond = vec![MatchCondition {
            name: "c".into(),
            expression: "true".into(),
        }];
        let p = policy(&cfg, &cond, None).expect("policy");
        let spec = p.spec.expect("spec");
        assert_eq!(spec.match_conditions, Some(cond));
        let v = &spec.validations.expect("validations")[0];
        assert!(v.expression.contains(keys::POD_WEBHOOK_ADMITTED_ANNOTATION));
        let msg = v.message.clone().unwrap_or_default();
        assert!(msg.starts_with("Kruise-rs is down"), "{msg}");
        assert!(
            msg.contains("kruise-system/kruise-webhook-service"),
            "{msg}"
        );
        let b = binding(None).expect("binding").spec.expect("spec");
        assert_eq!(
            b.policy_name.as_deref(),
            Some(keys::POD_WEBHOOK_POLICY_NAME)
        );
        assert_eq!(b.validation_actions, Some(vec!["Deny".to_owned()]));
    }
}
