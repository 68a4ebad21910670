//! Statistics of timed samples, and how the tables print them.

use std::time::Duration;

/// The value at quantile `q` (0..=1) by the nearest-rank method; zero for no samples. The
/// samples stay in the order they were taken, so tables can still list them run by run.
pub fn quantile(samples: &[Duration], q: f64) -> Duration {
    if samples.is_empty() {
        return Duration::ZERO;
    }
    let mut v = samples.to_vec();
    v.sort();
    let rank = (v.len() as f64 * q.clamp(0.0, 1.0)).ceil() as usize;
    v[rank.clamp(1, v.len()) - 1]
}

/// The median (upper median for an even count); zero for no samples.
pub fn median(samples: &[Duration]) -> Duration {
    let mut v = samples.to_vec();
    v.sort();
    v.get(v.len() / 2).copied().unwrap_or_default()
}

/// The 95th percentile (nearest rank); zero for no samples.
pub fn p95(samples: &[Duration]) -> Duration {
    quantile(samples, 0.95)
}

/// The largest sample; zero for no samples.
pub fn max(samples: &[Duration]) -> Duration {
    samples.iter().max().copied().unwrap_or_default()
}

/// `a / b` in seconds, with `b` kept off zero so a ratio always prints.
pub fn ratio(a: Duration, b: Duration) -> f64 {
    a.as_secs_f64() / b.as_secs_f64().max(1e-9)
}

/// Seconds with two decimals.
pub fn secs(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64())
}

/// Every sample in seconds with two decimals, comma separated, in the order taken.
pub fn secs_list(samples: &[Duration]) -> String {
    samples
        .iter()
        .map(|d| secs(*d))
        .collect::<Vec<_>>()
        .join(", ")
}

/// KiB as MiB with one decimal.
pub fn mib(kib: u64) -> String {
    format!("{:.1}", kib as f64 / 1024.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[u64]) -> Vec<Duration> {
        v.iter().map(|x| Duration::from_secs(*x)).collect()
    }

    #[test]
    fn median_of_odd_and_even() {
        let cases: [(&[u64], u64); 4] = [(&[3, 1, 2], 2), (&[4, 1, 2, 3], 3), (&[7], 7), (&[], 0)];
        for (samples, want) in cases {
            assert_eq!(
                median(&s(samples)),
                Duration::from_secs(want),
                "{samples:?}"
            );
        }
    }

    #[test]
    fn quantiles_by_nearest_rank() {
        let hundred: Vec<u64> = (1..=100).rev().collect();
        let cases: [(&[u64], f64, u64); 6] = [
            (&hundred, 0.95, 95),
            (&hundred, 0.99, 99),
            (&hundred, 1.0, 100),
            (&hundred, 0.0, 1),
            (&[5, 1], 0.5, 1),
            (&[], 0.95, 0),
        ];
        for (samples, q, want) in cases {
            assert_eq!(quantile(&s(samples), q), Duration::from_secs(want), "q={q}");
        }
        assert_eq!(p95(&s(&hundred)), Duration::from_secs(95));
        assert_eq!(max(&s(&[2, 9, 4])), Duration::from_secs(9));
        assert_eq!(max(&[]), Duration::ZERO);
    }

    #[test]
    fn samples_keep_their_order_and_print() {
        let v = s(&[3, 1, 2]);
        assert_eq!(median(&v), Duration::from_secs(2));
        assert_eq!(secs_list(&v), "3.00, 1.00, 2.00");
        assert_eq!(secs(Duration::from_millis(1234)), "1.23");
        assert_eq!(mib(1536), "1.5");
        assert_eq!(ratio(Duration::from_secs(3), Duration::from_secs(2)), 1.5);
        assert!(ratio(Duration::from_secs(1), Duration::ZERO).is_finite());
    }
}
