//! `/metrics`, `/healthz` and `/readyz` over plain HTTP.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use tokio_util::sync::CancellationToken;

use crate::metrics::Metrics;

const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// What the probes report.
#[derive(Default)]
pub struct Health {
    ready: AtomicBool,
}

impl Health {
    /// Ready once the webhook answers and the caches are loaded; a standby replica is ready too,
    /// since it serves the webhook.
    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::Release);
    }

    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }
}

#[derive(Clone)]
struct AppState {
    health: Arc<Health>,
    metrics: Arc<Metrics>,
}

async fn healthz() -> impl IntoResponse {
    (StatusCode::OK, "ok")
}

async fn readyz(State(s): State<AppState>) -> impl IntoResponse {
    if s.health.is_ready() {
        (StatusCode::OK, "ok")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "not ready")
    }
}

async fn metrics(State(s): State<AppState>) -> impl IntoResponse {
    match s.metrics.encode() {
        Ok(body) => (StatusCode::OK, [(header::CONTENT_TYPE, OPENMETRICS)], body).into_response(),
        Err(_) => (StatusCode::INTERNAL_SERVER_ERROR, "encoding failed").into_response(),
    }
}

/// The routes; `with_metrics` / `with_probes` pick what this listener serves.
pub fn router(
    health: Arc<Health>,
    metrics_: Arc<Metrics>,
    with_metrics: bool,
    with_probes: bool,
) -> Router {
    let mut r = Router::new();
    if with_probes {
        r = r
            .route("/healthz", get(healthz))
            .route("/readyz", get(readyz));
    }
    if with_metrics {
        r = r.route("/metrics", get(metrics));
    }
    r.with_state(AppState {
        health,
        metrics: metrics_,
    })
}

#[derive(Debug, thiserror::Error)]
#[error("HTTP server on {addr}: {source}")]
pub struct ServeError {
    pub addr: SocketAddr,
    pub source: std::io::Error,
}

/// Serve `router` on `addr` until `shutdown`.
pub async fn serve(
    addr: SocketAddr,
    router: Router,
    shutdown: CancellationToken,
) -> Result<(), ServeError> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| ServeError { addr, source })?;
    tracing::info!(%addr, "HTTP server listening");
    axum::serve(listener, router)
        .with_graceful_shutdown(shutdown.cancelled_owned())
        .await
        .map_err(|source| ServeError { addr, source })
}
