//! The HTTPS server, certificate maintenance and the readiness probe.

use kruise_api::features::{FeatureGates, Gate};
use std::future::Future;
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::DefaultBodyLimit;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum_server::tls_rustls::RustlsConfig;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kruise_api::keys;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

use crate::certs::{self, CertBundle};
use crate::cluster::ApiCluster;
use crate::configuration::scope::{PodMarks, PodScope, ScopeCell, ScopeSources};
use crate::watched::Watched;
use crate::{Error, WebhookConfig, configuration, handle_admission_async, paths};
use kruise_api::apps::v1alpha1::{PersistentPodState, PodProbeMarker, WorkloadSpread};
use kruise_api::policy::v1alpha1::PodUnavailableBudget;

/// State shared between [`run`] and [`wait_ready`] through clones of the config.
#[derive(Debug, Default)]
pub(crate) struct SharedState {
    /// PEM of the CA the server currently presents a certificate from.
    ca_pem: Mutex<Option<String>>,
}

impl SharedState {
    fn publish(&self, ca: &str) {
        if let Ok(mut g) = self.ca_pem.lock() {
            *g = Some(ca.to_owned());
        }
    }

    fn ca(&self) -> Option<String> {
        self.ca_pem.lock().ok().and_then(|g| g.clone())
    }
}

fn ring() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// rustls server config for a bundle.
fn server_config(b: &CertBundle) -> Result<Arc<rustls::ServerConfig>, Error> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(b.cert.as_bytes())
        .collect::<Result<_, _>>()
        .map_err(|e| Error::Certificate(format!("serving certificate PEM: {e}")))?;
    let key = PrivateKeyDer::from_pem_slice(b.key.as_bytes())
        .map_err(|e| Error::Certificate(format!("serving key PEM: {e}")))?;
    let mut c = rustls::ServerConfig::builder_with_provider(ring())
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(chain, key)?;
    c.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(c))
}

fn json_response(body: Vec<u8>) -> impl IntoResponse {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        body,
    )
}

/// Every route. `pods` is where ContainerRecreateRequest admission reads Pods; the other
/// handlers are synchronous and cheap, so they run inline.
pub(crate) fn router(pods: ApiCluster, gates: FeatureGates) -> Router {
    let pods = Arc::new(pods);
    let mut r = Router::new()
        .route(paths::HEALTHZ, get(|| async { "ok" }))
        .route(
            paths::CONVERT,
            post(|body: Bytes| async move { json_response(crate::handle_conversion(&body)) }),
        );
    for &path in paths::ADMISSION {
        let pods = pods.clone();
        r = r.route(
            path,
            post(move |body: Bytes| async move {
                let out = handle_admission_async(path, &body, pods.as_ref(), &gates).await;
                json_response(out.unwrap_or_default())
            }),
        );
    }
    // Objects can be large (big pod templates); the API server caps requests at ~3 MiB.
    r.layer(DefaultBodyLimit::max(8 * 1024 * 1024))
}

/// Serves the webhook until `shutdown` resolves.
///
/// Before serving: installs the ring crypto provider as the process default (if none is),
/// binds `cfg.bind_addr` (a taken port is an immediate [`Error::Serve`]), ensures the certificates in the Secret, and (unless disabled in `cfg`) applies the webhook
/// configurations and patches CRD conversion caBundles — a failure there is returned, so a
/// manager without the RBAC for it fails loudly at start. Afterwards it keeps certificates and
/// registrations current (Secret watch + periodic resync) and hot-reloads the TLS certificate.
pub async fn run(
    client: kube::Client,
    cfg: WebhookConfig,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), Error> {
    // Both ring and aws-lc-rs may be compiled in; make the choice explicit.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let addr = cfg.bind_addr;
    // Bind before touching the cluster: if the port is taken (e.g. by another manager on this
    // host) we fail without registering anything, and never publish readiness that another
    // process's server would then satisfy.
    let listener = std::net::TcpListener::bind(addr)
        .and_then(|l| l.set_nonblocking(true).map(|()| l))
        .map_err(|source| Error::Serve { addr, source })?;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &cfg.namespace);
    let names = cfg.serving_names();
    let bundle = settle_certs(&secrets, &cfg, &names).await?;
    let tls = RustlsConfig::from_config(server_config(&bundle)?);
    // Every Pod until the caches below have loaded and the scope is known.
    let scope: ScopeCell = Arc::default();
    register(&client, &cfg, &bundle.ca_cert, &scope).await?;

    let (sidecar_sets, _sidecar_watch) =
        crate::sidecarset::cache::SidecarSetCache::start(client.clone());
    let (budgets, _budget_watch) =
        Watched::<PodUnavailableBudget>::start(client.clone(), "PodUnavailableBudget");
    let (persistent_pod_states, _pps_watch) =
        Watched::<PersistentPodState>::start(client.clone(), "PersistentPodState");
    let (workload_spreads, _ws_watch) =
        Watched::<WorkloadSpread>::start(client.clone(), "WorkloadSpread");
    // Read by the Pod hook only with the gate on.
    let (pod_probe_markers, _ppm_watch) = if cfg
        .feature_gates
        .enabled(Gate::EnablePodProbeMarkerOnServerless)
    {
        let (w, guard) = Watched::<PodProbeMarker>::start(client.clone(), "PodProbeMarker");
        (Some(w), Some(guard))
    } else {
        (None, None)
    };
    let sources = ScopeSources {
        sidecar_sets: sidecar_sets.clone(),
        budgets: budgets.clone(),
        persistent_pod_states: persistent_pod_states.clone(),
        workload_spreads: workload_spreads.clone(),
        memo: Default::default(),
    };
    let handle = axum_server::Handle::new();
    let server = axum_server::from_tcp_rustls(listener, tls.clone())
        .map_err(|source| Error::Serve { addr, source })?
        // Answers are small writes (headers, then body): without TCP_NODELAY the second waits
        // for the API server's delayed ACK, up to 40 ms per review; measured on CloneSet
        // validation, whose answer waits for the dry-run Pod create on the same connection.
        .map(|tls| tls.acceptor(axum_server::accept::NoDelayAcceptor::new()))
        .handle(handle.clone())
        .serve(
            router(
                ApiCluster {
                    client: Some(client.clone()),
                    timeout: pod_lookup_timeout(&cfg),
                    template_dry_run: cfg.template_dry_run,
                    sidecar_sets: Some(sidecar_sets),
                    budgets: Some(budgets),
                    persistent_pod_states: Some(persistent_pod_states),
                    workload_spreads: Some(workload_spreads),
                    pod_probe_markers,
                    pod_marks: Some(PodMarks {
                        sources: sources.clone(),
                        applied: scope.clone(),
                    }),
                    metrics: cfg.metrics.clone(),
                },
                cfg.feature_gates,
            )
            .into_make_service(),
        );
    let mut server = tokio::spawn(server);
    cfg.state.0.publish(&bundle.ca_cert);
    tracing::info!(%addr, names = ?names, "webhook serving");

    let scoping = keep_scope(client.clone(), cfg.clone(), scope.clone(), sources);
    let maintenance = maintain(client, cfg.clone(), secrets, tls, bundle, names, scope);
    let maintenance = async move {
        tokio::join!(maintenance, scoping);
    };
    tokio::pin!(maintenance);
    tokio::pin!(shutdown);
    tokio::select! {
        res = &mut server => flatten(addr, res),
        () = &mut maintenance => Ok(()),
        () = &mut shutdown => {
            tracing::info!("webhook shutting down");
            handle.graceful_shutdown(Some(Duration::from_secs(5)));
            flatten(addr, server.await)
        }
    }
}

/// Half the API server's patience with us: a Pod read that takes longer is answered with its
/// own reason while the API server still listens.
fn pod_lookup_timeout(cfg: &WebhookConfig) -> Duration {
    let secs = u64::try_from(cfg.timeout_seconds).unwrap_or(10);
    Duration::from_millis(secs.max(1) * 500)
}

fn flatten(
    addr: SocketAddr,
    res: Result<std::io::Result<()>, tokio::task::JoinError>,
) -> Result<(), Error> {
    match res {
        Ok(Ok(())) => Ok(()),
        Ok(Err(source)) => Err(Error::Serve { addr, source }),
        Err(e) => Err(Error::Serve {
            addr,
            source: std::io::Error::other(e.to_string()),
        }),
    }
}

/// The Pod hooks' scope last applied; `None`: every Pod.
fn current_scope(cell: &ScopeCell) -> Option<PodScope> {
    cell.lock().ok().and_then(|g| g.current())
}

/// The certificates to serve: made and kept in the Secret by us, or, under
/// `EnableExternalCerts`, read from the Secret someone else keeps (upstream's external cert
/// writer), which is never written.
async fn settle_certs(
    secrets: &Api<Secret>,
    cfg: &WebhookConfig,
    names: &[String],
) -> Result<CertBundle, Error> {
    if cfg.external_certs() {
        certs::read_external(secrets, &cfg.namespace, &cfg.secret_name, names).await
    } else {
        certs::ensure_secret(secrets, &cfg.secret_name, names, &cfg.cert_policy).await
    }
}

async fn register(
    client: &kube::Client,
    cfg: &WebhookConfig,
    ca: &str,
    scope: &ScopeCell,
) -> Result<(), Error> {
    if cfg.manage_webhook_configurations {
        let scope = current_scope(scope);
        configuration::apply::apply_webhook_configurations(client, cfg, ca, scope.as_ref()).await?;
    }
    if cfg.external_certs() {
        warn_external_ca_missing(client, ca).await;
        return Ok(());
    }
    if cfg.manage_crd_conversion {
        configuration::apply::patch_crd_conversion(client, cfg, ca).await?;
    }
    Ok(())
}

/// Under `EnableExternalCerts`, says which objects do not carry the external CA yet (upstream
/// fails its sync then): the API server cannot call us through them until it is injected.
async fn warn_external_ca_missing(client: &kube::Client, ca: &str) {
    match configuration::apply::external_ca_missing(client, ca).await {
        Ok(missing) if !missing.is_empty() => tracing::warn!(
            objects = %missing.join(", "),
            "EnableExternalCerts: these objects' caBundle is not the external Secret's ca.crt; \
             have it injected (cert-manager: annotate them cert-manager.io/inject-ca-from=<namespace>/<Certificate>)"
        ),
        Ok(_) => {}
        Err(e) => tracing::warn!(error = %e, "checking the caBundles of the external CA"),
    }
}

/// Keeps what a down manager refuses scoped to what the SidecarSets, WorkloadSpreads,
/// PersistentPodStates and PodUnavailableBudgets concern ([`configuration::scope`]):
/// re-applies the configurations and the admission policy as soon as one of them changes.
async fn keep_scope(
    client: kube::Client,
    cfg: WebhookConfig,
    cell: ScopeCell,
    sources: ScopeSources,
) {
    if !cfg.manage_webhook_configurations {
        return;
    }
    let mut changes = sources.changes();
    loop {
        let wanted = sources.scope();
        let known = current_scope(&cell);
        let ca = cfg.state.0.ca();
        if wanted != known
            && let Some(ca) = ca
        {
            match configuration::apply::apply_webhook_configurations(
                &client,
                &cfg,
                &ca,
                wanted.as_ref(),
            )
            .await
            {
                Ok(()) => {
                    tracing::info!(scoped = wanted.is_some(), "Pod hooks' scope applied");
                    if let Ok(mut g) = cell.lock() {
                        g.replace(wanted);
                    }
                }
                Err(e) => tracing::warn!(error = %e, "applying the Pod hooks' scope"),
            }
        }
        // Woken by any change; the timer retries a failed apply.
        let [a, b, c, d] = &mut changes;
        tokio::select! {
            _ = a.changed() => {}
            _ = b.changed() => {}
            _ = c.changed() => {}
            _ = d.changed() => {}
            () = tokio::time::sleep(Duration::from_secs(2)) => {}
        }
    }
}

/// Keeps certificates valid and registered. Wakes on any change to the Secret (including its
/// deletion, which regenerates it) and every `resync_interval` (renewal, and repairing
/// configurations someone else changed).
async fn maintain(
    client: kube::Client,
    cfg: WebhookConfig,
    secrets: Api<Secret>,
    tls: RustlsConfig,
    mut current: CertBundle,
    names: Vec<String>,
    scope: ScopeCell,
) {
    let selector = format!("metadata.name={}", cfg.secret_name);
    let events = watcher(
        secrets.clone(),
        watcher::Config::default().fields(&selector),
    )
    .default_backoff();
    tokio::pin!(events);
    // A Kruise CRD replaced or re-applied whole (moving back from OpenKruise's CRDs, an install
    // that replaces them) has lost our caBundle: its conversion fails until it is patched again,
    // so the CRDs are watched, not left to the next resync.
    let mut crd_events = if cfg.manage_crd_conversion && !cfg.external_certs() {
        watcher(
            Api::<CustomResourceDefinition>::all(client.clone()),
            watcher::Config::default(),
        )
        .default_backoff()
        .boxed()
    } else {
        futures::stream::pending().boxed()
    };
    // A zero period would make tokio panic.
    let mut ticker = tokio::time::interval(cfg.resync_interval.max(Duration::from_secs(1)));
    ticker.tick().await;
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            ev = crd_events.next() => {
                match ev {
                    Some(Ok(watcher::Event::Apply(crd) | watcher::Event::InitApply(crd)))
                        if conversion_lacks_ca(&crd, &current.ca_cert) =>
                    {
                        if let Err(e) = configuration::apply::patch_crd_conversion(&client, &cfg, &current.ca_cert).await {
                            tracing::warn!(error = %e, "patching CRD conversion caBundle");
                        }
                    }
                    Some(Err(e)) => tracing::warn!(error = %e, "watching CRDs"),
                    Some(Ok(_)) => {}
                    // The watcher never ends by itself; fall back to the ticker.
                    None => tokio::time::sleep(cfg.resync_interval.max(Duration::from_secs(1))).await,
                }
                continue;
            }
            ev = events.next() => match ev {
                Some(Ok(watcher::Event::Delete(_))) if cfg.external_certs() => {
                    tracing::warn!(secret = %cfg.secret_name, "external webhook certificate Secret deleted; serving the last certificates read");
                    continue;
                }
                Some(Ok(watcher::Event::Delete(_))) => {
                    tracing::warn!(secret = %cfg.secret_name, "webhook certificate Secret deleted; regenerating");
                }
                Some(Ok(watcher::Event::Apply(s) | watcher::Event::InitApply(s))) => {
                    if certs::bundle_from_secret(&s).as_ref() == Some(&current) {
                        continue;
                    }
                }
                Some(Ok(_)) => continue,
                Some(Err(e)) => {
                    tracing::warn!(error = %e, "watching webhook certificate Secret");
                    continue;
                }
                None => {
                    // The watcher never ends by itself; fall back to the ticker.
                    tokio::time::sleep(cfg.resync_interval.max(Duration::from_secs(1))).await;
                }
            },
        }
        match settle_certs(&secrets, &cfg, &names).await {
            Ok(b) if b != current => match server_config(&b) {
                Ok(sc) => {
                    tls.reload_from_config(sc);
                    cfg.state.0.publish(&b.ca_cert);
                    tracing::info!("webhook certificate reloaded");
                    current = b;
                }
                Err(e) => tracing::error!(error = %e, "new webhook certificate unusable"),
            },
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "ensuring webhook certificates"),
        }
        if let Err(e) = register(&client, &cfg, &current.ca_cert, &scope).await {
            tracing::warn!(error = %e, "updating webhook registrations");
        }
    }
}

/// Whether `crd` is a Kruise CRD converted by a webhook whose caBundle is not `ca_pem`.
fn conversion_lacks_ca(crd: &CustomResourceDefinition, ca_pem: &str) -> bool {
    let group = crd.spec.group.as_str();
    if group != keys::APPS_GROUP && group != keys::POLICY_GROUP {
        return false;
    }
    let Some(conv) = crd
        .spec
        .conversion
        .as_ref()
        .filter(|c| c.strategy == "Webhook")
    else {
        return false;
    };
    let ca = conv
        .webhook
        .as_ref()
        .and_then(|w| w.client_config.as_ref())
        .and_then(|c| c.ca_bundle.as_ref());
    ca.is_none_or(|b| b.0 != ca_pem.as_bytes())
}

/// Waits until the webhook started by [`run`] with (a clone of) `cfg` answers `GET /healthz`
/// with 200 over TLS, verifying its certificate against the CA it registered and for the name
/// the API server uses (the Service DNS name, or the dev-mode host). Returns
/// [`Error::NotReady`] with the last failure after `timeout`.
pub async fn wait_ready(cfg: &WebhookConfig, timeout: Duration) -> Result<(), Error> {
    let start = Instant::now();
    let mut last_error = "webhook has not loaded its certificates yet".to_owned();
    loop {
        if let Some(ca) = cfg.state.0.ca() {
            let cfg = cfg.clone();
            let probe = tokio::task::spawn_blocking(move || probe_healthz(&cfg, &ca)).await;
            match probe {
                Ok(Ok(())) => return Ok(()),
                Ok(Err(e)) => last_error = e,
                Err(e) => last_error = e.to_string(),
            }
        }
        if start.elapsed() >= timeout {
            return Err(Error::NotReady {
                waited: timeout,
                last_error,
            });
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

fn probe_healthz(cfg: &WebhookConfig, ca_pem: &str) -> Result<(), String> {
    let ip = match cfg.bind_addr.ip() {
        IpAddr::V4(v4) if v4.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(v6) if v6.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        other => other,
    };
    let addr = SocketAddr::new(ip, cfg.bind_addr.port());
    let name = cfg
        .dev_host()
        .or_else(|| cfg.serving_names().into_iter().next())
        .unwrap_or_default();
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        let c = c.map_err(|e| format!("CA PEM: {e}"))?;
        roots.add(c).map_err(|e| format!("CA: {e}"))?;
    }
    let client_cfg = rustls::ClientConfig::builder_with_provider(ring())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let server_name = ServerName::try_from(name.clone()).map_err(|e| e.to_string())?;
    let conn = rustls::ClientConnection::new(Arc::new(client_cfg), server_name)
        .map_err(|e| e.to_string())?;
    let tcp = TcpStream::connect_timeout(&addr, Duration::from_secs(2))
        .map_err(|e| format!("connect {addr}: {e}"))?;
    let io_timeout = Some(Duration::from_secs(3));
    tcp.set_read_timeout(io_timeout)
        .map_err(|e| e.to_string())?;
    tcp.set_write_timeout(io_timeout)
        .map_err(|e| e.to_string())?;
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    let req = format!(
        "GET {} HTTP/1.1\r\nHost: {name}\r\nConnection: close\r\n\r\n",
        paths::HEALTHZ
    );
    tls.write_all(req.as_bytes())
        .map_err(|e| format!("TLS to {addr} as {name}: {e}"))?;
    let mut head = [0u8; 12];
    tls.read_exact(&mut head)
        .map_err(|e| format!("reading /healthz from {addr}: {e}"))?;
    if head.starts_with(b"HTTP/1.1 200") {
        Ok(())
    } else {
        Err(format!(
            "/healthz answered {:?}",
            String::from_utf8_lossy(&head)
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::SystemTime;

    /// Serves the real router with a generated bundle, probes it like the manager would, then
    /// swaps in a bundle from another CA and checks the reload is what clients now see.
    #[tokio::test]
    async fn tls_serving_probe_and_hot_reload() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let cfg = WebhookConfig {
            bind_addr: addr,
            host_url: Some(format!("https://127.0.0.1:{}", addr.port())),
            ..Default::default()
        };
        let p = certs::CertPolicy::default();
        let b1 = certs::generate_bundle(&cfg.serving_names(), SystemTime::now(), &p).expect("b1");
        let tls = RustlsConfig::from_config(server_config(&b1).expect("cfg"));
        let handle = axum_server::Handle::new();
        let server = axum_server::from_tcp_rustls(listener, tls.clone())
            .expect("from tcp")
            .handle(handle.clone())
            .serve(
                router(
                    ApiCluster {
                        client: None,
                        timeout: Duration::from_secs(1),
                        template_dry_run: true,
                        sidecar_sets: None,
                        budgets: None,
                        persistent_pod_states: None,
                        workload_spreads: None,
                        pod_probe_markers: None,
                        pod_marks: None,
                        metrics: Default::default(),
                    },
                    FeatureGates::default(),
                )
                .into_make_service(),
            );
        let task = tokio::spawn(server);

        // Not ready until a CA is published.
        let err = wait_ready(&cfg, Duration::from_millis(300)).await;
        assert!(matches!(err, Err(Error::NotReady { .. })));
        cfg.state.0.publish(&b1.ca_cert);
        wait_ready(&cfg, Duration::from_secs(10))
            .await
            .expect("ready");

        let b2 = certs::generate_bundle(&cfg.serving_names(), SystemTime::now(), &p).expect("b2");
        tls.reload_from_config(server_config(&b2).expect("cfg2"));
        let c = cfg.clone();
        let old_ca = b1.ca_cert.clone();
        let res = tokio::task::spawn_blocking(move || probe_healthz(&c, &old_ca))
            .await
            .expect("join");
        assert!(res.is_err(), "old CA must no longer verify after reload");
        cfg.state.0.publish(&b2.ca_cert);
        wait_ready(&cfg, Duration::from_secs(10))
            .await
            .expect("ready after reload");

        handle.graceful_shutdown(Some(Duration::from_secs(1)));
        let _ = task.await;
    }
}
