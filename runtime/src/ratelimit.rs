//! Client-side rate limit of API requests: client-go's `--kube-api-qps` / `--kube-api-burst`,
//! which kube-rs does not have. A token bucket (golang.org/x/time/rate semantics: `burst` tokens,
//! refilled at `qps` per second, a request that finds no token reserves the next one and waits)
//! as a tower layer in front of the client's HTTP service.
//!
//! The limiter sits in `poll_ready`: kube's `Client` drives its service from one buffer worker,
//! so a waiting request holds the requests queued behind it, exactly like client-go's limiter.
//! The scale benchmark builds its floor client with the same function, so both sides of its ratio
//! run under the same limit.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tower::{Layer, Service};

/// The token bucket itself, pure: the caller passes the time.
#[derive(Debug, Clone)]
pub struct Bucket {
    qps: f64,
    burst: f64,
    tokens: f64,
    last: Instant,
}

impl Bucket {
    /// A full bucket. `burst` below 1 is taken as 1 (a request needs one token).
    pub fn new(qps: f64, burst: u32, now: Instant) -> Self {
        let burst = f64::from(burst.max(1));
        Self {
            qps,
            burst,
            tokens: burst,
            last: now,
        }
    }

    /// Takes one token for a request made at `now` and returns how long the request must wait
    /// for it. Tokens may go negative: waiting requests hold reservations, in order.
    pub fn reserve(&mut self, now: Instant) -> Duration {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.last = self.last.max(now);
        self.tokens = (self.tokens + elapsed * self.qps).min(self.burst);
        self.tokens -= 1.0;
        if self.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-self.tokens / self.qps)
        }
    }
}

/// A shareable limiter; `None` inside means unlimited.
#[derive(Debug, Clone, Default)]
pub struct Limiter(Option<Arc<Mutex<Bucket>>>);

impl Limiter {
    /// `qps` ≤ 0 means no limit.
    pub fn new(qps: f32, burst: u32) -> Self {
        if qps <= 0.0 {
            return Self(None);
        }
        Self(Some(Arc::new(Mutex::new(Bucket::new(
            f64::from(qps),
            burst,
            Instant::now(),
        )))))
    }

    /// How long the next request waits; zero when unlimited.
    fn reserve(&self) -> Duration {
        match &self.0 {
            None => Duration::ZERO,
            // A poisoned lock only means another request panicked mid-update; the bucket's
            // numbers are still usable.
            Some(b) => match b.lock() {
                Ok(mut b) => b.reserve(Instant::now()),
                Err(p) => p.into_inner().reserve(Instant::now()),
            },
        }
    }
}

/// Tower layer applying a [`Limiter`].
#[derive(Debug, Clone)]
pub struct RateLimitLayer {
    limiter: Limiter,
}

impl RateLimitLayer {
    pub fn new(limiter: Limiter) -> Self {
        Self { limiter }
    }
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimit<S>;
    fn layer(&self, inner: S) -> Self::Service {
        RateLimit {
            inner,
            limiter: self.limiter.clone(),
            wait: None,
            permitted: false,
        }
    }
}

/// The service of [`RateLimitLayer`].
pub struct RateLimit<S> {
    inner: S,
    limiter: Limiter,
    wait: Option<Pin<Box<tokio::time::Sleep>>>,
    /// A token is held for the next `call`.
    permitted: bool,
}

impl<S, Req> Service<Req> for RateLimit<S>
where
    S: Service<Req>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        if !self.permitted {
            if self.wait.is_none() {
                let d = self.limiter.reserve();
                if d.is_zero() {
                    self.permitted = true;
                } else {
                    self.wait = Some(Box::pin(tokio::time::sleep(d)));
                }
            }
            if let Some(w) = self.wait.as_mut() {
                if w.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                self.wait = None;
                self.permitted = true;
            }
        }
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Req) -> Self::Future {
        self.permitted = false;
        self.inner.call(req)
    }
}

/// Tower layer bounding the requests in flight to `max` (tower's own `ConcurrencyLimit` is
/// behind its `limit` feature, which would rebuild every crate that uses tower). A request takes
/// a slot in `poll_ready` and gives it back when its response future finishes; like the rate
/// limit, a request waiting here holds the ones queued behind it in kube's buffer.
#[derive(Debug, Clone)]
pub struct InFlightLayer {
    slots: Arc<Semaphore>,
}

impl InFlightLayer {
    /// At most `max` requests at once; 0: as many as a semaphore can count (no bound).
    pub fn new(max: usize) -> Self {
        let max = if max == 0 {
            Semaphore::MAX_PERMITS
        } else {
            max
        };
        Self {
            slots: Arc::new(Semaphore::new(max)),
        }
    }
}

impl<S> Layer<S> for InFlightLayer {
    type Service = InFlight<S>;
    fn layer(&self, inner: S) -> Self::Service {
        InFlight {
            inner,
            slots: self.slots.clone(),
            acquiring: None,
            slot: None,
        }
    }
}

type Acquire = Pin<Box<dyn Future<Output = Option<OwnedSemaphorePermit>> + Send>>;

/// The service of [`InFlightLayer`].
pub struct InFlight<S> {
    inner: S,
    slots: Arc<Semaphore>,
    acquiring: Option<Acquire>,
    /// The slot taken for the next `call`.
    slot: Option<OwnedSemaphorePermit>,
}

impl<S, Req> Service<Req> for InFlight<S>
where
    S: Service<Req>,
    S::Future: Unpin,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Holding<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        if self.slot.is_none() {
            let slots = &self.slots;
            let acquiring = self.acquiring.get_or_insert_with(|| {
                let slots = slots.clone();
                // The semaphore is never closed, so this only ever waits.
                Box::pin(async move { slots.acquire_owned().await.ok() })
            });
            match acquiring.as_mut().poll(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(slot) => {
                    self.acquiring = None;
                    self.slot = slot;
                }
            }
        }
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Req) -> Self::Future {
        Holding {
            inner: self.inner.call(req),
            _slot: self.slot.take(),
        }
    }
}

/// A response future that keeps its request's slot until it finishes.
pub struct Holding<F> {
    inner: F,
    _slot: Option<OwnedSemaphorePermit>,
}

impl<F: Future + Unpin> Future for Holding<F> {
    type Output = F::Output;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.inner).poll(cx)
    }
}

/// Requests one client has in flight at once (waiting for their response headers; a watch
/// holds a slot only until its stream starts). kube's client speaks HTTP/1.1, one request per
/// connection, and keeps every connection it opened idle for 90 s: without a bound, a slow-start
/// batch of 490 Pod creates opened 490 TLS connections to the API server (a handshake each, on
/// both sides), and their buffers (about 80 KiB a connection) stayed in the heap for the 90 s. A
/// heap profile of the manager at 500 Pods (heaptrack) put 38% of its peak heap in hyper's
/// connections. client-go multiplexes its requests over one HTTP/2 connection instead. The
/// floor of the scale benchmark keeps 32 Pods' writes in flight and is the API server's pace.
pub const MAX_IN_FLIGHT: usize = 32;

/// A client for `config` whose requests pass through a limiter of `qps` (≤ 0: unlimited) and
/// `burst`, at most [`MAX_IN_FLIGHT`] at once.
pub fn client(config: kube::Config, qps: f32, burst: u32) -> Result<kube::Client, kube::Error> {
    client_with(config, qps, burst, MAX_IN_FLIGHT)
}

/// [`client`] with `max_in_flight` requests at once instead of [`MAX_IN_FLIGHT`] (0: no bound).
pub fn client_with(
    config: kube::Config,
    qps: f32,
    burst: u32,
    max_in_flight: usize,
) -> Result<kube::Client, kube::Error> {
    let limiter = Limiter::new(qps, burst);
    // Layers wrap outward: a request waits for its rate token, then for a connection slot.
    let builder = kube::client::ClientBuilder::try_from(config)?
        .with_layer(&InFlightLayer::new(max_in_flight));
    Ok(if limiter.0.is_none() {
        builder.build()
    } else {
        builder.with_layer(&RateLimitLayer::new(limiter)).build()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Serves `GET`s on a local port, each answered after 20 ms with `{}`, keeping connections
    /// alive; returns the address, the most requests it ever held at once, and how many
    /// connections it accepted.
    async fn slow_server() -> (std::net::SocketAddr, Arc<AtomicUsize>, Arc<AtomicUsize>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (most, conns) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let open = Arc::new(AtomicUsize::new(0));
        let (m, c) = (most.clone(), conns.clone());
        tokio::spawn(async move {
            while let Ok((mut sock, _)) = listener.accept().await {
                c.fetch_add(1, Ordering::SeqCst);
                let (open, most) = (open.clone(), m.clone());
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 1024];
                    loop {
                        while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                            match sock.read(&mut chunk).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                            }
                        }
                        buf.clear();
                        let now = open.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        open.fetch_sub(1, Ordering::SeqCst);
                        let reply = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\
                                     content-length: 2\r\n\r\n{}";
                        if sock.write_all(reply.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        (addr, most, conns)
    }

    /// Four times [`MAX_IN_FLIGHT`] requests at once through `c`, each answered `{}`.
    async fn burst(c: &kube::Client) {
        let reqs = (0..4 * MAX_IN_FLIGHT).map(|_| {
            let req = http::Request::get("/version")
                .body(Vec::new())
                .expect("request");
            c.request_text(req)
        });
        for r in futures::future::join_all(reqs).await {
            assert_eq!(r.expect("answered"), "{}");
        }
    }

    /// Four times as many requests at once as the bound: the server never holds more than
    /// the bound, and the client opens no more connections than that.
    #[tokio::test]
    async fn a_client_keeps_at_most_max_in_flight_requests_and_connections() {
        let (addr, most, conns) = slow_server().await;
        for qps in [0.0, 10_000.0] {
            let url = format!("http://{addr}").parse().expect("url");
            burst(&client(kube::Config::new(url), qps, 10_000).expect("client")).await;
        }
        let (most, conns) = (most.load(Ordering::SeqCst), conns.load(Ordering::SeqCst));
        assert!(most > 1, "requests ran one at a time ({most})");
        assert!(most <= MAX_IN_FLIGHT, "{most} requests in flight at once");
        // Two clients, each bounded: their connections together.
        assert!(conns <= 2 * MAX_IN_FLIGHT, "{conns} connections opened");
    }

    /// `--kube-api-max-in-flight 0`: no bound, so the same burst goes out at once.
    #[tokio::test]
    async fn zero_max_in_flight_is_no_bound() {
        let (addr, most, _) = slow_server().await;
        let url = format!("http://{addr}").parse().expect("url");
        burst(&client_with(kube::Config::new(url), 0.0, 0, 0).expect("client")).await;
        let most = most.load(Ordering::SeqCst);
        assert!(
            most > MAX_IN_FLIGHT,
            "only {most} requests in flight at once"
        );
    }

    #[test]
    fn burst_is_free_then_requests_wait_in_order() {
        let t0 = Instant::now();
        let mut b = Bucket::new(10.0, 3, t0);
        for _ in 0..3 {
            assert_eq!(b.reserve(t0), Duration::ZERO);
        }
        // Reservations queue: the 4th waits 0.1 s, the 5th 0.2 s.
        assert_eq!(b.reserve(t0).as_millis(), 100);
        assert_eq!(b.reserve(t0).as_millis(), 200);
    }

    #[test]
    fn refills_at_qps_up_to_burst() {
        let t0 = Instant::now();
        let mut b = Bucket::new(10.0, 2, t0);
        b.reserve(t0);
        b.reserve(t0);
        // Ten seconds later the bucket holds 2 tokens again, not 100.
        let t1 = t0 + Duration::from_secs(10);
        assert_eq!(b.reserve(t1), Duration::ZERO);
        assert_eq!(b.reserve(t1), Duration::ZERO);
        assert_eq!(b.reserve(t1).as_millis(), 100);
    }

    #[test]
    fn sustained_rate_matches_qps() {
        let t0 = Instant::now();
        let mut b = Bucket::new(50.0, 1, t0);
        let waits: Vec<Duration> = (0..101).map(|_| b.reserve(t0)).collect();
        // 101 requests at once: 1 from the burst, 100 more over 2 s.
        assert_eq!(waits[100].as_millis(), 2000);
    }

    #[test]
    fn zero_qps_is_unlimited() {
        assert!(Limiter::new(0.0, 10).0.is_none());
        assert_eq!(Limiter::new(0.0, 10).reserve(), Duration::ZERO);
    }
}
