//! Int-or-percent numbers of workload strategies (upstream `intstrutil.GetScaledValueFromIntOrPercent`
//! and the partition rule `ParsePercentageAsInt` callers share): maxUnavailable, maxSurge,
//! minReadySeconds-style counts and partitions as Pod counts.

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NumberError {
    #[error("{0:?} is neither an integer nor a percentage")]
    NotAPercentage(String),
    #[error("{0:?} is not a valid percentage")]
    BadPercentage(String),
}

/// An int-or-percent scaled against `total`. Percentages round up or down as asked; fractional
/// percentages ("12.5%") are accepted, as upstream's partition parsing does.
pub fn scaled_value(v: &IntOrString, total: i32, round_up: bool) -> Result<i32, NumberError> {
    match v {
        IntOrString::Int(i) => Ok(*i),
        IntOrString::String(s) => {
            let Some(num) = s.strip_suffix('%') else {
                // Kubernetes also accepts a plain integer inside the string form.
                return s
                    .parse::<i32>()
                    .map_err(|_| NumberError::NotAPercentage(s.clone()));
            };
            let pct: f64 = num
                .parse()
                .map_err(|_| NumberError::BadPercentage(s.clone()))?;
            let raw = pct * f64::from(total) / 100.0;
            let v = if round_up { raw.ceil() } else { raw.floor() };
            // Percentages of an i32 replica count stay well inside i32.
            Ok(v as i32)
        }
    }
}

/// Partition as a pod count: percent rounds up; a percentage that rounds to all replicas (with
/// more than one replica) keeps one pod updatable unless it is exactly "100%"; clamped to
/// [0, replicas].
pub fn partition_replicas(
    partition: Option<&IntOrString>,
    replicas: i32,
) -> Result<i32, NumberError> {
    let Some(p) = partition else { return Ok(0) };
    let mut v = scaled_value(p, replicas, true)?;
    if replicas > 1 && v == replicas && matches!(p, IntOrString::String(s) if s != "100%") {
        v = replicas - 1;
    }
    Ok(v.clamp(0, replicas.max(0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &str) -> IntOrString {
        IntOrString::String(v.to_string())
    }

    #[test]
    fn scaled_values_round_as_asked() {
        assert_eq!(scaled_value(&IntOrString::Int(3), 10, true), Ok(3));
        assert_eq!(scaled_value(&s("20%"), 3, true), Ok(1));
        assert_eq!(scaled_value(&s("20%"), 3, false), Ok(0));
        assert_eq!(scaled_value(&s("50%"), 5, true), Ok(3));
        assert_eq!(scaled_value(&s("50%"), 5, false), Ok(2));
        assert_eq!(scaled_value(&s("12.5%"), 8, true), Ok(1));
        assert_eq!(scaled_value(&s("4"), 8, true), Ok(4));
        assert!(scaled_value(&s("x%"), 8, true).is_err());
        assert!(scaled_value(&s("abc"), 8, true).is_err());
    }

    #[test]
    fn partition_rules() {
        assert_eq!(partition_replicas(None, 5), Ok(0));
        assert_eq!(partition_replicas(Some(&IntOrString::Int(2)), 5), Ok(2));
        assert_eq!(partition_replicas(Some(&IntOrString::Int(9)), 5), Ok(5));
        assert_eq!(partition_replicas(Some(&IntOrString::Int(-1)), 5), Ok(0));
        // 30% of 5 = 1.5 -> rounds up to 2.
        assert_eq!(partition_replicas(Some(&s("30%")), 5), Ok(2));
        // 99% of 5 rounds up to 5, but a non-100% percentage keeps one pod updatable.
        assert_eq!(partition_replicas(Some(&s("99%")), 5), Ok(4));
        assert_eq!(partition_replicas(Some(&s("100%")), 5), Ok(5));
        // With one replica there is nothing to keep.
        assert_eq!(partition_replicas(Some(&s("99%")), 1), Ok(1));
        // 1% of 3 rounds up to 1: at least one old pod is kept.
        assert_eq!(partition_replicas(Some(&s("1%")), 3), Ok(1));
        assert_eq!(partition_replicas(Some(&s("0%")), 3), Ok(0));
    }

    proptest::proptest! {
        #[test]
        fn partition_is_within_bounds(p in -5i32..200, pct in 0u32..=100, replicas in 0i32..50) {
            let v = partition_replicas(Some(&IntOrString::Int(p)), replicas).expect("int");
            proptest::prop_assert!((0..=replicas.max(0)).contains(&v));
            let v = partition_replicas(Some(&IntOrString::String(format!("{pct}%"))), replicas).expect("pct");
            proptest::prop_assert!((0..=replicas.max(0)).contains(&v));
            if replicas > 1 && pct < 100 {
                proptest::prop_assert!(v < replicas);
            }
        }
    }
}
