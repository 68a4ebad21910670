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

/// A client for `config` whose requests pass through a limiter of `qps` (≤ 0: unlimited) and
/// `burst`.
pub fn client(config: kube::Config, qps: f32, burst: u32) -> Result<kube::Client, kube::Error> {
    let limiter = Limiter::new(qps, burst);
    if limiter.0.is_none() {
        return kube::Client::try_from(config);
    }
    Ok(kube::client::ClientBuilder::try_from(config)?
        .with_layer(&RateLimitLayer::new(limiter))
        .build())
}

#[cfg(test)]
mod tests {
    use super::*;

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
