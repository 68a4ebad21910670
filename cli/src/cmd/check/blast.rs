//! What a manager that is down would refuse (the admission policy the manager scopes to what
//! Kruise-rs concerns, or the Pod hook failing closed for every Pod; see docs/safety.md).
//! Informational: it always passes.

use std::collections::BTreeSet;

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingAdmissionPolicy,
};
use kruise_api::apps::v1alpha1::{PersistentPodState, WorkloadSpread};
use kruise_api::apps::v1beta1::SidecarSet;
use kruise_api::keys;
use kruise_api::policy::v1alpha1::PodUnavailableBudget;
use kube::api::ListParams;
use kube::{Api, Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;

use super::Check;
use crate::error::{Result, kube_err};

const NAME: &str = "if the manager is down";

/// The namespaces holding an object of `K` (none when its CRD is missing).
async fn namespaces_of<K>(client: &Client) -> BTreeSet<String>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
{
    match Api::<K>::all(client.clone())
        .list_metadata(&ListParams::default())
        .await
    {
        Ok(list) => list.items.iter().filter_map(|o| o.namespace()).collect(),
        Err(_) => BTreeSet::new(),
    }
}

pub(super) async fn check_blast_radius(client: &Client) -> Result<Check> {
    let config = Api::<MutatingWebhookConfiguration>::all(client.clone())
        .get_opt(keys::MUTATING_WEBHOOK_CONFIGURATION_NAME)
        .await
        .map_err(kube_err)?;
    let Some(config) = config else {
        return Ok(Check::pass(
            NAME,
            "nothing is refused: no webhook configuration",
        ));
    };
    let fails_closed = config
        .webhooks
        .iter()
        .flatten()
        .find(|h| h.name == "mpod.kb.io")
        .map(|h| h.failure_policy.as_deref() != Some("Ignore"));
    let policy = Api::<ValidatingAdmissionPolicy>::all(client.clone())
        .get_opt(keys::POD_WEBHOOK_POLICY_NAME)
        .await
        .ok()
        .flatten()
        .is_some();
    let hook = match fails_closed {
        None => Hook::Off,
        Some(true) => Hook::EveryPod,
        Some(false) if policy => Hook::Scoped,
        Some(false) => Hook::FailsOpen,
    };
    let sets: Vec<String> = match Api::<SidecarSet>::all(client.clone())
        .list(&ListParams::default())
        .await
    {
        Ok(list) => list
            .items
            .iter()
            .map(|s| {
                let sel = s
                    .spec
                    .selector
                    .as_ref()
                    .and_then(kruise_api::selector::to_selector_string)
                    .unwrap_or_default();
                format!("{} ({sel})", s.name_any())
            })
            .collect(),
        Err(_) => Vec::new(),
    };
    let budgets = namespaces_of::<PodUnavailableBudget>(client).await;
    let spreads = namespaces_of::<WorkloadSpread>(client).await;
    let pinned = namespaces_of::<PersistentPodState>(client).await;
    Ok(Check::pass(
        NAME,
        describe(hook, &sets, &budgets, &spreads, &pinned),
    ))
}

/// How the Pod CREATE hook meets a manager that is down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hook {
    /// No Pod hook (the `PodWebhook` gate is off).
    Off,
    /// Failing closed for every Pod (the scope not known yet, or `KruisePodReadinessGate`).
    EveryPod,
    /// Failing open, with the admission policy refusing what Kruise-rs concerns.
    Scoped,
    /// Failing open with no policy: the user chose `Ignore` (upstream's chart).
    FailsOpen,
}

/// The report line: what is refused, and that everything else is not.
fn describe(
    hook: Hook,
    sets: &[String],
    budgets: &BTreeSet<String>,
    spreads: &BTreeSet<String>,
    pinned: &BTreeSet<String>,
) -> String {
    match hook {
        Hook::Off => return "Pod creates are not refused: the Pod hook is off".to_owned(),
        Hook::EveryPod => {
            return "every Pod create outside kube-system, kruise-system and namespaces labelled \
                    kruise.io/webhook-exempt is refused (the Pod hook is not scoped yet, or \
                    KruisePodReadinessGate puts the readiness gate on every Pod)"
                .to_owned();
        }
        Hook::FailsOpen => {
            return "Pod creates are not refused: the Pod hook fails open (failurePolicy \
                    Ignore), so Pods start without their sidecars or placement"
                .to_owned();
        }
        Hook::Scoped => {}
    }
    let join = |xs: &BTreeSet<String>| xs.iter().cloned().collect::<Vec<_>>().join(", ");
    let mut parts = vec![
        "creates of Kruise workloads' Pods and of Pods asking for container launch priority"
            .to_owned(),
    ];
    if !sets.is_empty() {
        parts.push(format!(
            "creates of Pods the SidecarSets select: {}",
            sets.join("; ")
        ));
    }
    let create: BTreeSet<String> = budgets
        .iter()
        .chain(spreads)
        .chain(pinned)
        .cloned()
        .collect();
    if !create.is_empty() {
        parts.push(format!(
            "Pod creates in namespaces with a WorkloadSpread, PersistentPodState or budget: {}",
            join(&create)
        ));
    }
    let guard: BTreeSet<String> = budgets.union(spreads).cloned().collect();
    if !guard.is_empty() {
        parts.push(format!(
            "Pod updates, deletes and evictions in namespaces with a budget or WorkloadSpread: {}",
            join(&guard)
        ));
    }
    format!(
        "refused: {}; writes of Kruise kinds; every other Pod is admitted at once",
        parts.join("; ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_each_scope_and_what_stays_free() {
        let ns = |xs: &[&str]| xs.iter().map(|s| (*s).to_owned()).collect::<BTreeSet<_>>();
        let text = describe(
            Hook::Scoped,
            &["mesh (app=web)".to_owned()],
            &ns(&["prod"]),
            &ns(&[]),
            &ns(&["db"]),
        );
        assert!(
            text.contains("SidecarSets select: mesh (app=web)"),
            "{text}"
        );
        assert!(text.contains("budget: db, prod"), "{text}");
        assert!(text.contains("evictions in namespaces with a budget or WorkloadSpread: prod"));
        assert!(text.ends_with("every other Pod is admitted at once"));
        assert!(describe(Hook::EveryPod, &[], &ns(&[]), &ns(&[]), &ns(&[])).contains("every Pod"));
        assert!(
            describe(Hook::FailsOpen, &[], &ns(&[]), &ns(&[]), &ns(&[]))
                .contains("without their sidecars")
        );
    }
}
