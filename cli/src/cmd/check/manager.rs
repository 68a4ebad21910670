//! The manager: its Deployment (or dev mode), its leader Lease, the plugin's version against
//! its own, and the feature gates it runs with.

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kruise_api::features::{self, FeatureGates, Gate};
use kruise_api::keys;
use kube::{Api, Client};

use super::{Check, FIX_INSTALL};
use crate::dev::{self, cluster};
use crate::error::{Result, kube_err};

/// The manager itself: in the cluster (its Deployment), or running in `kubectl kruise dev` (the
/// webhook configurations point at a URL).
pub(super) fn manager(installed: Option<&cluster::Installed>, dev_url: Option<&str>) -> Check {
    match installed {
        Some(i) => Check::pass(
            "manager",
            format!(
                "{} {} (Deployment {}, {} ready, image {})",
                i.flavor, i.version, i.deployment, i.ready, i.image
            ),
        ),
        None => match dev_url {
            Some(url) => Check::pass(
                "manager",
                format!("Kruise-rs in dev mode (webhook at {url}, not in the cluster)"),
            ),
            None => Check::fail(
                "manager",
                format!(
                    "no Deployment {}/{}",
                    keys::KRUISE_NAMESPACE,
                    dev::MANAGER_DEPLOYMENT
                ),
                FIX_INSTALL,
            ),
        },
    }
}

pub(super) async fn check_lease(client: &Client) -> Result<Check> {
    let title = "leader";
    let api: Api<Lease> = Api::namespaced(client.clone(), keys::KRUISE_NAMESPACE);
    let Some(lease) = api
        .get_opt(kruise_manager::app::LEASE_NAME)
        .await
        .map_err(kube_err)?
    else {
        return Ok(Check::fail(
            title,
            format!(
                "no Lease {}/{}",
                keys::KRUISE_NAMESPACE,
                kruise_manager::app::LEASE_NAME
            ),
            "no manager has started: kubectl -n kruise-system get pods",
        ));
    };
    let spec = lease.spec.unwrap_or_default();
    let holder = spec.holder_identity.unwrap_or_default();
    let fresh = spec.renew_time.as_ref().is_some_and(|t| {
        let age = jiff::Timestamp::now().duration_since(t.0);
        let valid = i64::from(spec.lease_duration_seconds.unwrap_or(15));
        age.as_secs() <= valid
    });
    Ok(if holder.is_empty() || !fresh {
        Check::fail(
            title,
            format!(
                "Lease {} is not held (holder {:?}, expired)",
                lease.metadata.name.unwrap_or_default(),
                holder
            ),
            "the manager lost or never took the lease: kubectl -n kruise-system logs deploy/kruise-controller-manager",
        )
    } else {
        Check::pass(title, format!("held by {holder}"))
    })
}

/// The installed manager's gates that differ from OpenKruise's defaults (what its
/// `--feature-gates` asks for, after upstream's rules between gates).
pub(super) fn feature_gates(flag: Option<&str>) -> Check {
    const NAME: &str = "feature gates";
    match FeatureGates::parse(flag.unwrap_or_default()) {
        Ok(gates) => {
            let diff = gates.differences();
            let mut detail = if diff.is_empty() {
                "OpenKruise's defaults".to_owned()
            } else {
                let list: Vec<String> = diff
                    .iter()
                    .map(|(g, on)| format!("{}={on}", g.name()))
                    .collect();
                format!("differ from OpenKruise's defaults: {}", list.join(", "))
            };
            // A gate the user turned on that Kruise-rs ignores must not pass unnoticed.
            let ignored: Vec<String> = gates
                .without_effect()
                .iter()
                .map(|(g, missing)| format!("{} ({missing})", g.name()))
                .collect();
            if !ignored.is_empty() {
                detail.push_str(&format!(
                    "; on without effect in Kruise-rs: {}",
                    ignored.join("; ")
                ));
            }
            Check::pass(NAME, detail)
        }
        Err(e) => Check::fail(
            NAME,
            format!("the manager's {} does not parse: {e}", features::FLAG),
            format!(
                "correct the {} argument of Deployment {}/{} (the Helm value featureGates)",
                features::FLAG,
                keys::KRUISE_NAMESPACE,
                dev::MANAGER_DEPLOYMENT
            ),
        ),
    }
}

/// Deletion protection's one switch: whether ClusterRoleBinding `kruise-manager-list-all` lets
/// the manager list every resource (upstream's breadth), which counting a Cascading CRD's
/// objects needs with `DeletionProtectionForCRDCascadingGate`. `flag` is the manager's
/// `--feature-gates`.
pub(super) async fn check_list_all(client: &Client, flag: Option<&str>) -> Result<Check> {
    let api: Api<ClusterRoleBinding> = Api::all(client.clone());
    let bound = match api.get_opt(keys::MANAGER_LIST_ALL_CLUSTER_ROLE).await {
        Ok(b) => Some(b.is_some_and(|b| b.role_ref.name == keys::MANAGER_LIST_ALL_CLUSTER_ROLE)),
        // The user may not read RBAC: say so rather than fail the report.
        Err(kube::Error::Api(s)) if s.code == 403 => None,
        Err(e) => return Err(kube_err(e)),
    };
    let cascading = FeatureGates::parse(flag.unwrap_or_default())
        .is_ok_and(|g| g.enabled(Gate::DeletionProtectionForCRDCascadingGate));
    Ok(list_all(bound, cascading))
}

/// The switch's line: on or off is a choice, never a failure; with the gate on and the switch
/// off it says what that costs and how to turn it on.
pub(super) fn list_all(bound: Option<bool>, cascading: bool) -> Check {
    const NAME: &str = "deletion protection list-all";
    let role = keys::MANAGER_LIST_ALL_CLUSTER_ROLE;
    let gate = Gate::DeletionProtectionForCRDCascadingGate.name();
    let detail = match (bound, cascading) {
        (None, _) => format!("cannot tell: not allowed to read ClusterRoleBinding {role}"),
        (Some(true), true) => format!(
            "on (ClusterRoleBinding {role}): the manager may list every resource, as upstream, \
             so {gate} counts any Cascading CRD's objects"
        ),
        (Some(true), false) => format!(
            "on (ClusterRoleBinding {role}), unused while {gate} is off: the manager may list \
             every resource"
        ),
        (Some(false), true) => format!(
            "off (least privilege): with {gate} on, a Cascading CRD's deletion is refused until \
             the manager may list its resource; upstream's breadth is the Helm value \
             deletionProtection.listAllResources=true or kubectl apply -k \
             deploy/overlays/crd-cascading"
        ),
        (Some(false), false) => format!("off (least privilege; only {gate} would use it)"),
    };
    Check::pass(NAME, detail)
}

/// Compares the plugin's version with the server's (major.minor must agree).
pub(super) fn skew(plugin: &str, server: Option<&cluster::Installed>) -> Check {
    const NAME: &str = "version skew";
    let Some(server) = server else {
        return Check::pass(
            NAME,
            format!("plugin {plugin}; no in-cluster manager to compare"),
        );
    };
    if server.flavor == cluster::Flavor::OpenKruise {
        return Check::pass(
            NAME,
            format!(
                "plugin {plugin} drives OpenKruise {} through its APIs (v1alpha1/v1beta1)",
                server.version
            ),
        );
    }
    let minor = |v: &str| {
        let mut it = v.trim_start_matches('v').split('.');
        match (it.next(), it.next()) {
            (Some(a), Some(b)) if a.parse::<u64>().is_ok() && b.parse::<u64>().is_ok() => {
                Some(format!("{a}.{b}"))
            }
            _ => None,
        }
    };
    match minor(&server.version) {
        None => Check::pass(
            NAME,
            format!(
                "plugin {plugin}, server {} (a development build: not compared)",
                server.version
            ),
        ),
        Some(s) if Some(&s) == minor(plugin).as_ref() => {
            Check::pass(NAME, format!("plugin {plugin}, server {}", server.version))
        }
        Some(_) => Check::fail(
            NAME,
            format!("plugin {plugin}, server {}", server.version),
            format!(
                "use the plugin of the server's version (kubectl krew upgrade kruise), or upgrade the server: kubectl kruise install --version v{plugin} --wait"
            ),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cluster::{Flavor, Installed};

    fn server(flavor: Flavor, version: &str) -> Installed {
        Installed {
            flavor,
            version: version.into(),
            deployment: "kruise-system/kruise-controller-manager".into(),
            image: String::new(),
            ready: 1,
            feature_gates: None,
        }
    }

    #[test]
    fn feature_gates_line_lists_what_differs_from_openkruise() {
        let c = feature_gates(None);
        assert!(c.ok);
        assert_eq!(c.detail, "OpenKruise's defaults");
        let c = feature_gates(Some(
            "ResourcesDeletionProtection=true,ImagePullJobGate=true,InPlaceWorkloadVerticalScaling=true",
        ));
        assert!(c.ok);
        assert_eq!(
            c.detail,
            "differ from OpenKruise's defaults: ResourcesDeletionProtection=true, ImagePullJobGate=true, InPlaceWorkloadVerticalScaling=true"
        );
        // After upstream's rules: pre-download also turns the pull-job gate on.
        let c = feature_gates(Some("PreDownloadImageForInPlaceUpdate=true"));
        assert!(
            c.detail
                .contains("PreDownloadImageForInPlaceUpdate=true, ImagePullJobGate=true"),
            "{}",
            c.detail
        );
        // Naming a gate at its default is no difference.
        assert_eq!(
            feature_gates(Some("PodWebhook=true")).detail,
            "OpenKruise's defaults"
        );
        // A gate still without effect here, whichever it is today (none once every gate acts).
        if let Some(gate) = Gate::ALL.iter().find(|g| g.effect().missing().is_some()) {
            let missing = gate.effect().missing().unwrap_or_default();
            let c = feature_gates(Some(&format!("{}=true,PodIndexLabel=false", gate.name())));
            assert!(c.ok);
            assert!(
                c.detail.ends_with(&format!(
                    "; on without effect in Kruise-rs: {} ({missing})",
                    gate.name()
                )),
                "{}",
                c.detail
            );
        }
        let c = feature_gates(Some("NoSuchGate=true"));
        assert!(!c.ok);
        assert!(c.detail.contains("NoSuchGate"), "{}", c.detail);
        assert!(c.fix.is_some());
    }

    #[test]
    fn list_all_switch_is_reported_never_failed() {
        let on = list_all(Some(true), true);
        assert!(on.ok);
        assert!(
            on.detail
                .starts_with("on (ClusterRoleBinding kruise-manager-list-all)")
        );
        let off = list_all(Some(false), true);
        assert!(off.ok);
        assert!(
            off.detail.starts_with("off (least privilege)"),
            "{}",
            off.detail
        );
        assert!(
            off.detail
                .contains("deletionProtection.listAllResources=true")
                && off.detail.contains("deploy/overlays/crd-cascading"),
            "names both forms of the switch: {}",
            off.detail
        );
        assert!(list_all(Some(true), false).detail.contains("unused"));
        assert!(list_all(None, true).detail.starts_with("cannot tell"));
        assert!(list_all(None, false).ok);
    }

    #[test]
    fn skew_fails_on_another_minor_and_names_the_fix() {
        let c = skew("0.1.0", Some(&server(Flavor::KruiseRs, "0.2.1")));
        assert!(!c.ok);
        assert!(
            c.fix
                .as_deref()
                .unwrap_or_default()
                .contains("--version v0.1.0")
        );
        assert!(skew("0.1.0", Some(&server(Flavor::KruiseRs, "0.1.7"))).ok);
        assert!(skew("0.1.0", Some(&server(Flavor::KruiseRs, "dev"))).ok);
        assert!(skew("0.1.0", Some(&server(Flavor::OpenKruise, "1.8.0"))).ok);
    }
}
