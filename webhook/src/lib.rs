//! Kruise-rs admission webhook, served in-process by the manager.
//!
//! # Use from the manager
//!
//! ```no_run
//! # async fn demo(client: kube::Client) -> Result<(), kruise_webhook::Error> {
//! use std::time::Duration;
//! use kruise_webhook::{WebhookConfig, run, wait_ready};
//!
//! let cfg = WebhookConfig {
//!     namespace: "kruise-system".into(),             // the manager's namespace (POD_NAMESPACE)
//!     host_url: None,                                 // Some("https://127.0.0.1:9876") in dev mode
//!     ..WebhookConfig::default()
//! };
//! let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
//! let server = tokio::spawn(run(client, cfg.clone(), async { let _ = stop_rx.await; }));
//! // Start controllers only once the webhook answers over TLS with the CA it registered.
//! wait_ready(&cfg, Duration::from_secs(60)).await?;
//! // ... run controllers ...
//! let _ = stop_tx.send(());
//! server.await.ok();
//! # Ok(()) }
//! ```
//!
//! `cfg` must be the same value (or a clone) for [`run`] and [`wait_ready`]: clones share the
//! state through which `run` publishes the CA that `wait_ready` trusts.
//!
//! [`run`] ensures the certificates in Secret [`kruise_api::keys::WEBHOOK_SECRET_NAME`] (creating them if
//! absent, renewing before expiry, regenerating when the Secret is deleted), serves HTTPS on
//! `cfg.bind_addr`, hot-reloads the serving certificate, creates/updates the webhook
//! configurations and patches the caBundle into Kruise CRD conversion settings.
//!
//! # What the manager needs
//!
//! * Flags/env: the namespace (`POD_NAMESPACE`), the port (`WEBHOOK_PORT`, default 9876) and,
//!   for dev mode, the host the API server can reach (`WEBHOOK_HOST`, or set `host_url`).
//!   [`WebhookConfig::from_env`] reads upstream's variable names.
//! * RBAC: Secrets get/list/watch/create/update in its namespace; mutating and validating
//!   webhook configurations get/create/patch; CustomResourceDefinitions list/patch; Pods get
//!   (ContainerRecreateRequest admission) and create in every namespace (the dry-run of CloneSet
//!   templates, `dryRun=All`: nothing is stored; the controller needs the verb anyway); Pods and
//!   PVCs list (deletion protection of a `Cascading` Namespace).
//! * In cluster: Service `kruise-webhook-service` port 443 → the pod's 9876.
//!
//! # Paths
//!
//! See [`paths`]: `/mutate-pod`, `/mutate-apps-kruise-io-cloneset`,
//! `/validate-apps-kruise-io-cloneset` (upstream's, serving v1alpha1 and v1beta1, also reachable
//! with a `-v1alpha1-`/`-v1beta1-` infix), ImagePullJob, ImageListPullJob, NodeImage and
//! ContainerRecreateRequest defaulting and validation, deletion protection's DELETE hooks
//! (upstream's `/validate-namespace`, `/validate-customresourcedefinition`, `/validate-service`,
//! `/validate-ingress`, `/validate-apps-{deployment,replicaset,statefulset}`, see
//! [`deletionprotection`]), `/convert`, `/healthz`.
//!
//! The handlers are plain functions from request bytes to response bytes
//! ([`handle_admission`], [`handle_conversion`]) so they can be tested without a server; the ones
//! that call the cluster (ContainerRecreateRequest, which GETs its Pod; CloneSet validation,
//! which dry-run creates a Pod from the template) are async and take the cluster as a
//! parameter ([`handle_admission_async`]).

// The kinds, one folder each: defaults, validation, conversion and whatever cache it needs.
pub mod advancedcronjob;
pub mod broadcastjob;
pub mod cloneset;
pub mod crr;
pub mod daemonset;
pub mod deletionprotection;
pub mod ephemeraljob;
pub mod imagelistpulljob;
pub mod imagepulljob;
pub mod nodeimage;
pub mod persistentpodstate;
pub mod podprobemarker;
pub mod podunavailablebudget;
pub mod resourcedistribution;
pub mod sidecarset;
pub mod statefulset;
pub mod uniteddeployment;
pub mod workloadspread;

// The Pod webhook: one handler per file, in upstream's order.
pub mod pod;

// What the kinds share, below them all.
pub mod field;
pub mod image_reference;
pub mod json;
pub mod metrics;
pub mod pull_template;
pub mod review;
pub mod watched;
pub mod workload;

// Around the handlers: the cluster they read, the endpoints' registration, conversion,
// certificates and the server.
pub mod certs;
pub mod cluster;
pub mod configuration;
pub mod conversion;
mod server;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use kruise_api::features::FeatureGates;
use kruise_api::keys;

pub use server::{run, wait_ready};

pub mod paths;

/// A synchronous admission handler (see [`admission_handler`]).
pub type SyncHandler = Box<dyn Fn(&review::Request) -> review::Outcome + Send + Sync>;

/// The synchronous (pure) admission handlers by path, for servers and tests alike, under the
/// default feature gates. Paths whose handler needs the cluster ([`paths::MUTATE_CRR`],
/// CloneSet validation, which dry-runs its Pod template) are not here; see
/// [`handle_admission_async`]. The Pod mutation is, without SidecarSets ([`pod::mutate`]).
pub fn admission_handler(path: &str) -> Option<SyncHandler> {
    match paths::hook(path)?.handler {
        paths::Handler::Pure(h) => Some(Box::new(h)),
        paths::Handler::Gated(h) => Some(Box::new(move |r| h(r, &FeatureGates::default()))),
        paths::Handler::Cluster(paths::ClusterHandler::PodMutation) => Some(Box::new(pod::mutate)),
        paths::Handler::Cluster(_) => None,
    }
}

/// Runs the synchronous admission handler for `path` on a raw AdmissionReview body; always
/// returns a serialized AdmissionReview (`None` for an unknown path or one that needs the
/// cluster).
pub fn handle_admission(path: &str, body: &[u8]) -> Option<Vec<u8>> {
    admission_handler(path).map(|h| review::admit(body, h))
}

/// Runs the admission handler for any path in [`paths::ADMISSION`]; `cluster` is where the
/// ContainerRecreateRequest handler reads the request's Pod and the CloneSet validation
/// dry-runs its Pod template. Always returns a serialized AdmissionReview (`None` only for an
/// unknown path).
pub async fn handle_admission_async<C>(
    path: &str,
    body: &[u8],
    cluster: &C,
    gates: &FeatureGates,
) -> Option<Vec<u8>>
where
    C: crr::mutation::PodLookup
        + cloneset::template::PodDryRun
        + sidecarset::SidecarSetLookup
        + deletionprotection::ProtectionLookup
        + podunavailablebudget::PubLookup
        + persistentpodstate::PpsLookup
        + workloadspread::WsLookup
        + podprobemarker::PpmLookup
        + statefulset::claims::StorageClassLookup
        + configuration::scope::ScopeLookup,
{
    let hook = paths::hook(path)?;
    if let Some(refusal) = gate_refusal(path, gates) {
        return Some(review::admit(body, |_| refusal.clone()));
    }
    // Deletion protection's own paths, and every DELETE of a Kruise workload.
    if let Some(out) = deletionprotection::handler::admit(path, body, cluster, gates).await {
        return Some(out);
    }
    Some(match hook.handler {
        paths::Handler::Pure(h) => review::admit(body, h),
        paths::Handler::Gated(h) => review::admit(body, |r| h(r, gates)),
        paths::Handler::Cluster(h) => admit_with_cluster(h, body, cluster, gates).await,
    })
}

/// Runs a handler that reads `cluster`.
async fn admit_with_cluster<C>(
    handler: paths::ClusterHandler,
    body: &[u8],
    cluster: &C,
    gates: &FeatureGates,
) -> Vec<u8>
where
    C: crr::mutation::PodLookup
        + cloneset::template::PodDryRun
        + sidecarset::SidecarSetLookup
        + deletionprotection::ProtectionLookup
        + podunavailablebudget::PubLookup
        + persistentpodstate::PpsLookup
        + workloadspread::WsLookup
        + podprobemarker::PpmLookup
        + statefulset::claims::StorageClassLookup
        + configuration::scope::ScopeLookup,
{
    use paths::ClusterHandler as H;
    match handler {
        // The Pod handler injects SidecarSets, which it reads from the cluster.
        H::PodMutation => {
            review::admit_async(body, |req| pod::mutate_pod(req, cluster, gates)).await
        }
        H::PodValidation => {
            if let Some(uid) = pod::admitted_unread(body) {
                return review::allowed(uid);
            }
            review::admit_async(body, |mut req| {
                let options = req.options.take();
                pod::validate_pod(req, options, cluster, gates)
            })
            .await
        }
        H::Budget => {
            review::admit_async(body, |req| {
                podunavailablebudget::validation::validate(req, cluster, gates)
            })
            .await
        }
        H::PersistentPodState => {
            review::admit_async(body, |req| {
                persistentpodstate::validation::validate(req, cluster)
            })
            .await
        }
        H::StatefulSet => {
            review::admit_async(body, |req| {
                statefulset::claims::validate(req, cluster, gates)
            })
            .await
        }
        H::WorkloadSpread => {
            review::admit_async(body, |req| {
                workloadspread::validation::validate(req, cluster)
            })
            .await
        }
        H::SidecarSet => {
            review::admit_async(body, |req| {
                sidecarset::validation::validate_set(req, cluster, gates)
            })
            .await
        }
        H::ContainerRecreateRequest => {
            review::admit_async(body, |req| crr::mutation::mutate(req, cluster)).await
        }
        H::CloneSetTemplate => {
            review::admit_async(body, |req| cloneset::template::validate(req, cluster)).await
        }
        H::DeletionProtection => {
            review::admit_async(body, |req| {
                deletionprotection::handler::check(req, cluster, gates)
            })
            .await
        }
    }
}

/// The conversion `/convert` applies to each kind, by `kind` (the kinds with two served
/// versions).
pub fn converter(kind: &str) -> Option<conversion::endpoint::Convert> {
    match kind {
        "CloneSet" => Some(cloneset::conversion::convert),
        "ContainerRecreateRequest" => Some(crr::conversion::convert),
        "SidecarSet" => Some(sidecarset::conversion::convert),
        "DaemonSet" => Some(daemonset::conversion::convert),
        "StatefulSet" => Some(statefulset::conversion::convert),
        "UnitedDeployment" => Some(uniteddeployment::conversion::convert),
        "WorkloadSpread" => Some(workloadspread::conversion::convert),
        "PodUnavailableBudget" => Some(podunavailablebudget::conversion::convert),
        "ResourceDistribution" => Some(resourcedistribution::conversion::convert),
        "PersistentPodState" => Some(persistentpodstate::conversion::convert),
        _ => None,
    }
}

/// Runs `/convert` on a raw ConversionReview body; always returns a serialized
/// ConversionReview.
pub fn handle_conversion(body: &[u8]) -> Vec<u8> {
    conversion::endpoint::handle(body, converter)
}

/// Upstream refuses every ImagePullJob and ImageListPullJob create or update while their
/// gates are off (403, `feature-gate <Name> is not enabled`), the daemon's gate checked first,
/// and every ResourceDistribution create or update while `ResourceDistributionGate` is off: the
/// gates each hook declares ([`paths::Hook::refused_without`]).
pub fn gate_refusal(path: &str, gates: &FeatureGates) -> Option<review::Outcome> {
    paths::hook(path)?
        .refused_without
        .iter()
        .copied()
        .find(|g| !gates.enabled(*g))
        .map(|g| review::Outcome::forbidden(format!("feature-gate {g} is not enabled")))
}

/// Webhook settings. Clones share the readiness state used by [`wait_ready`].
#[derive(Debug, Clone)]
pub struct WebhookConfig {
    /// Listen address (default `0.0.0.0:9876`).
    pub bind_addr: SocketAddr,
    /// Namespace of the manager: where the Secret lives and the Service is (default
    /// `kruise-system`).
    pub namespace: String,
    /// Service name in front of the webhook (default `kruise-webhook-service`).
    pub service_name: String,
    /// Service port the API server calls (default 443; the Service targets `bind_addr`'s port).
    pub service_port: i32,
    /// Secret for the certificates (default `kruise-webhook-certs`).
    pub secret_name: String,
    /// Dev mode: the API server calls this URL base (e.g. `https://127.0.0.1:9876`) instead of
    /// the Service; its host goes into the certificate.
    pub host_url: Option<String>,
    /// Create/update the two webhook configurations (default true).
    pub manage_webhook_configurations: bool,
    /// Patch caBundle into Kruise CRDs' conversion settings (default true).
    pub manage_crd_conversion: bool,
    /// `timeoutSeconds` of every webhook (default 10).
    pub timeout_seconds: i32,
    /// Certificate lifetimes.
    pub cert_policy: certs::CertPolicy,
    /// How often certificates and configurations are re-checked (default 5 minutes).
    pub resync_interval: Duration,
    /// Validate each new CloneSet template as Kubernetes validates a Pod, by a dry-run Pod
    /// create (default true; env [`kruise_api::keys::ENV_WEBHOOK_TEMPLATE_DRY_RUN`]`=false` turns it off,
    /// leaving the webhook's own template rules). See [`cloneset::template`].
    pub template_dry_run: bool,
    /// `failurePolicy` of the Pod webhook: `Fail` (default) or `Ignore` (env
    /// [`kruise_api::keys::ENV_WEBHOOK_POD_FAILURE_POLICY`]).
    pub pod_failure_policy: String,
    /// Feature gates (the manager's `--feature-gates`; upstream's defaults otherwise).
    pub feature_gates: FeatureGates,
    /// Where refusals are counted (the manager passes the counters it serves on `/metrics`).
    pub metrics: metrics::ProtectionMetrics,
    /// Readiness state shared by clones of this config (leave it at its default; it is how
    /// [`run`] tells [`wait_ready`] which CA to trust).
    pub state: ReadyState,
}

/// Opaque state shared between [`run`] and [`wait_ready`] through clones of a [`WebhookConfig`].
#[derive(Debug, Clone, Default)]
pub struct ReadyState(pub(crate) Arc<server::SharedState>);

impl Default for WebhookConfig {
    fn default() -> Self {
        Self {
            bind_addr: SocketAddr::from(([0, 0, 0, 0], keys::WEBHOOK_PORT)),
            namespace: keys::KRUISE_NAMESPACE.to_owned(),
            service_name: keys::WEBHOOK_SERVICE_NAME.to_owned(),
            service_port: keys::WEBHOOK_SERVICE_PORT,
            secret_name: keys::WEBHOOK_SECRET_NAME.to_owned(),
            host_url: None,
            manage_webhook_configurations: true,
            manage_crd_conversion: true,
            timeout_seconds: 10,
            cert_policy: certs::CertPolicy::default(),
            resync_interval: Duration::from_secs(300),
            template_dry_run: true,
            pod_failure_policy: "Fail".to_owned(),
            feature_gates: kruise_api::features::installed(),
            metrics: metrics::ProtectionMetrics::default(),
            state: ReadyState::default(),
        }
    }
}

impl WebhookConfig {
    /// Defaults overridden by upstream's environment variables: `POD_NAMESPACE`,
    /// `SECRET_NAME`, `SERVICE_NAME`, `WEBHOOK_PORT`, and `WEBHOOK_HOST` (dev mode: the API
    /// server calls `https://$WEBHOOK_HOST:$WEBHOOK_PORT`). Unparseable values are ignored
    /// with a warning.
    pub fn from_env() -> Self {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    /// [`WebhookConfig::from_env`] with an injectable lookup (for tests and flag parsers).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Self {
        let mut cfg = Self::default();
        let get = |name: &str| get(name).filter(|v| !v.is_empty());
        if let Some(ns) = get(keys::ENV_POD_NAMESPACE) {
            cfg.namespace = ns;
        }
        if let Some(s) = get(keys::ENV_WEBHOOK_SECRET_NAME) {
            cfg.secret_name = s;
        }
        if let Some(s) = get(keys::ENV_WEBHOOK_SERVICE_NAME) {
            cfg.service_name = s;
        }
        if let Some(p) = get(keys::ENV_WEBHOOK_PORT) {
            match p.parse::<u16>() {
                Ok(port) => cfg.bind_addr.set_port(port),
                Err(_) => tracing::warn!(value = %p, "ignoring unparseable WEBHOOK_PORT"),
            }
        }
        if let Some(v) = get(keys::ENV_WEBHOOK_TEMPLATE_DRY_RUN) {
            match v.to_ascii_lowercase().as_str() {
                "false" | "0" | "off" | "no" => cfg.template_dry_run = false,
                "true" | "1" | "on" | "yes" => cfg.template_dry_run = true,
                _ => {
                    tracing::warn!(value = %v, "ignoring unparseable {}", keys::ENV_WEBHOOK_TEMPLATE_DRY_RUN)
                }
            }
        }
        if let Some(v) = get(keys::ENV_WEBHOOK_POD_FAILURE_POLICY) {
            match v.as_str() {
                "Fail" | "Ignore" => cfg.pod_failure_policy = v,
                _ => {
                    tracing::warn!(value = %v, "ignoring {}: it must be Fail or Ignore", keys::ENV_WEBHOOK_POD_FAILURE_POLICY)
                }
            }
        }
        if let Some(host) = get(keys::ENV_WEBHOOK_HOST) {
            let host = if host.contains(':') && !host.starts_with('[') {
                format!("[{host}]")
            } else {
                host
            };
            cfg.host_url = Some(format!("https://{host}:{}", cfg.bind_addr.port()));
        }
        cfg
    }

    /// Host part of `host_url` (dev mode), for the certificate and the readiness probe.
    pub fn dev_host(&self) -> Option<String> {
        let url = self.host_url.as_deref()?;
        let rest = url.split_once("://").map_or(url, |(_, r)| r);
        let authority = rest.split('/').next().unwrap_or_default();
        let host = if let Some(v6) = authority.strip_prefix('[') {
            v6.split(']').next().unwrap_or_default()
        } else {
            authority.rsplit_once(':').map_or(authority, |(h, _)| h)
        };
        (!host.is_empty()).then(|| host.to_owned())
    }

    /// `EnableExternalCerts`: the certificates are provisioned by someone else (see
    /// [`certs::external_bundle`]); we neither write them nor any caBundle.
    pub fn external_certs(&self) -> bool {
        self.feature_gates
            .enabled(kruise_api::features::Gate::EnableExternalCerts)
    }

    /// Names the serving certificate covers.
    pub fn serving_names(&self) -> Vec<String> {
        certs::serving_names(
            &self.service_name,
            &self.namespace,
            self.dev_host().as_deref(),
        )
    }
}

/// Webhook errors.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A Kubernetes API call failed.
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    /// Certificate generation failed.
    #[error("certificate generation: {0}")]
    Rcgen(#[from] rcgen::Error),
    /// Certificates could not be settled or loaded.
    #[error("webhook certificates: {0}")]
    Certificate(String),
    /// `EnableExternalCerts` is on and the Secret is missing or incomplete.
    #[error(transparent)]
    ExternalCerts(#[from] certs::ExternalCertError),
    /// TLS configuration failed.
    #[error("TLS configuration: {0}")]
    Tls(#[from] rustls::Error),
    /// The server could not bind or serve.
    #[error("webhook server on {addr}: {source}")]
    Serve {
        /// Listen address.
        addr: SocketAddr,
        /// Cause.
        source: std::io::Error,
    },
    /// The admission policy could not be built.
    #[error("admission policy: {0}")]
    Policy(String),
    /// Uninstalling would delete Kruise objects users made (see
    /// [`configuration::uninstall::pre_delete`]).
    #[error(
        "refusing to uninstall Kruise-rs: {} Kruise objects made by users exist, and deleting the CRDs would delete them and their Pods: {}; delete them first, or set helmHooks.refuseWhileObjectsExist=false",
        .0.len(), .0.join(", ")
    )]
    UserObjectsExist(Vec<String>),
    /// The webhook did not answer `/healthz` over TLS in time.
    #[error("webhook not ready after {waited:?}: {last_error}")]
    NotReady {
        /// How long we waited.
        waited: Duration,
        /// The last probe failure.
        last_error: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dev_host_parsing() {
        let cfg = |u: &str| WebhookConfig {
            host_url: Some(u.to_owned()),
            ..Default::default()
        };
        assert_eq!(
            cfg("https://127.0.0.1:9876").dev_host().as_deref(),
            Some("127.0.0.1")
        );
        assert_eq!(
            cfg("https://host.example/").dev_host().as_deref(),
            Some("host.example")
        );
        assert_eq!(cfg("https://[::1]:9876").dev_host().as_deref(), Some("::1"));
        assert!(WebhookConfig::default().dev_host().is_none());
        assert_eq!(cfg("https://10.0.0.1:9876").serving_names().len(), 3);
    }

    #[test]
    fn upstream_env_names() {
        let env = |k: &str| match k {
            "POD_NAMESPACE" => Some("ns1".to_owned()),
            "WEBHOOK_PORT" => Some("9443".to_owned()),
            "WEBHOOK_HOST" => Some("10.1.2.3".to_owned()),
            _ => None,
        };
        let cfg = WebhookConfig::from_lookup(env);
        assert_eq!(cfg.namespace, "ns1");
        assert_eq!(cfg.bind_addr.port(), 9443);
        assert_eq!(cfg.host_url.as_deref(), Some("https://10.1.2.3:9443"));
        assert_eq!(cfg.secret_name, "kruise-webhook-certs");
        let names = cfg.serving_names();
        assert_eq!(names[0], "kruise-webhook-service.ns1.svc");
        assert_eq!(names[2], "10.1.2.3");
    }

    #[test]
    fn pull_jobs_are_refused_while_their_gates_are_off() {
        let msg = |path: &str, flag: &str| {
            let gates = FeatureGates::parse(flag).expect(flag);
            gate_refusal(path, &gates).map(|o| match o {
                review::Outcome::Deny {
                    code,
                    reason,
                    message,
                } => format!("{code} {reason}: {message}"),
                other => format!("{other:?}"),
            })
        };
        for path in [
            paths::VALIDATE_IMAGEPULLJOB,
            paths::VALIDATE_IMAGELISTPULLJOB,
        ] {
            assert_eq!(
                msg(path, "").as_deref(),
                Some("403 Forbidden: feature-gate ImagePullJobGate is not enabled"),
                "{path}: upstream's default refuses"
            );
            assert_eq!(msg(path, "ImagePullJobGate=true"), None, "{path}");
            assert_eq!(
                msg(path, "PreDownloadImageForInPlaceUpdate=true"),
                None,
                "{path}: pre-download turns the gate on"
            );
            assert_eq!(
                msg(path, "KruiseDaemon=false").as_deref(),
                Some("403 Forbidden: feature-gate KruiseDaemon is not enabled"),
                "{path}: the daemon's gate is checked first"
            );
        }
        // Other kinds, and the defaulting of pull jobs, are not gated.
        for path in [
            paths::MUTATE_IMAGEPULLJOB,
            paths::VALIDATE_NODEIMAGE,
            paths::MUTATE_POD,
        ] {
            assert_eq!(msg(path, ""), None, "{path}");
        }
    }
}

#[cfg(test)]
mod fuzz_tests;
