//! Integer-or-percent arithmetic matching the CloneSet controller, so the plugin and the
//! controller agree on what "partition 30%" or "maxUnavailable 20%" means.

use serde_json::Value;
use std::fmt;
use std::str::FromStr;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IntOrPercent {
    Int(i64),
    Percent(i64),
}

impl fmt::Display for IntOrPercent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IntOrPercent::Int(n) => write!(f, "{n}"),
            IntOrPercent::Percent(p) => write!(f, "{p}%"),
        }
    }
}

/// Why a partition, batch size or maxUnavailable given on the command line is unusable; each
/// message says what would be accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadIntOrPercent {
    #[error("{0:?} is neither a non-negative integer nor a percentage like 30%")]
    Malformed(String),
    #[error("{0:?} is out of range: a percentage must be between 0% and 100%")]
    PercentOutOfRange(String),
    #[error("{0:?} is negative: give a non-negative integer or a percentage like 30%")]
    Negative(String),
}

impl FromStr for IntOrPercent {
    type Err = BadIntOrPercent;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        if let Some(p) = t.strip_suffix('%') {
            let v: i64 = p
                .parse()
                .map_err(|_| BadIntOrPercent::Malformed(s.to_string()))?;
            if !(0..=100).contains(&v) {
                return Err(BadIntOrPercent::PercentOutOfRange(s.to_string()));
            }
            Ok(IntOrPercent::Percent(v))
        } else {
            let v: i64 = t
                .parse()
                .map_err(|_| BadIntOrPercent::Malformed(s.to_string()))?;
            if v < 0 {
                return Err(BadIntOrPercent::Negative(s.to_string()));
            }
            Ok(IntOrPercent::Int(v))
        }
    }
}

impl IntOrPercent {
    /// Reads a JSON int-or-string the way the API server stores it.
    pub fn from_json(v: &Value) -> Option<Self> {
        match v {
            Value::Number(n) => n.as_i64().map(IntOrPercent::Int),
            Value::String(s) => s.parse().ok(),
            _ => None,
        }
    }

    pub fn to_json(&self) -> Value {
        match self {
            IntOrPercent::Int(n) => Value::from(*n),
            IntOrPercent::Percent(_) => Value::from(self.to_string()),
        }
    }

    /// Scales against `total`; percentages round up or down as asked.
    pub fn scaled(&self, total: i64, round_up: bool) -> i64 {
        match self {
            IntOrPercent::Int(n) => *n,
            IntOrPercent::Percent(p) => {
                let num = p * total;
                if round_up {
                    (num + 99) / 100
                } else {
                    num / 100
                }
            }
        }
    }
}

/// Number of pods a partition keeps at the old revision, as the CloneSet controller computes it:
/// percentages round up, but a percentage below 100% never holds back every pod (so a rollout
/// with replicas > 1 always moves at least one pod), and the result is clamped to [0, replicas].
pub fn partition_pods(partition: Option<&IntOrPercent>, replicas: i64) -> i64 {
    let Some(p) = partition else { return 0 };
    let mut n = p.scaled(replicas, true);
    if let IntOrPercent::Percent(pct) = p
        && n >= replicas
        && replicas > 1
        && *pct != 100
    {
        n = replicas - 1;
    }
    n.clamp(0, replicas.max(0))
}

/// How many pods the update should bring to the new revision.
pub fn expected_updated(replicas: i64, partition: Option<&IntOrPercent>) -> i64 {
    (replicas - partition_pods(partition, replicas)).max(0)
}

/// maxUnavailable as the controller applies it: default 20%, percent rounds up when maxSurge is 0
/// and down otherwise; never below 1 so a batch always makes progress.
pub fn max_unavailable(
    max_unavailable: Option<&IntOrPercent>,
    max_surge: Option<&IntOrPercent>,
    replicas: i64,
) -> i64 {
    let surge = max_surge.map(|s| s.scaled(replicas, true)).unwrap_or(0);
    let default = IntOrPercent::Percent(20);
    let mu = max_unavailable
        .unwrap_or(&default)
        .scaled(replicas, surge == 0);
    mu.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> IntOrPercent {
        s.parse().unwrap()
    }

    #[test]
    fn parse() {
        assert_eq!(p("3"), IntOrPercent::Int(3));
        assert_eq!(p("30%"), IntOrPercent::Percent(30));
        assert!("-1".parse::<IntOrPercent>().is_err());
        assert!("101%".parse::<IntOrPercent>().is_err());
        assert!("x%".parse::<IntOrPercent>().is_err());
        assert_eq!(
            IntOrPercent::from_json(&serde_json::json!("50%")),
            Some(IntOrPercent::Percent(50))
        );
        assert_eq!(
            IntOrPercent::from_json(&serde_json::json!(2)),
            Some(IntOrPercent::Int(2))
        );
        assert_eq!(p("40%").to_json(), serde_json::json!("40%"));
        assert_eq!(p("4").to_json(), serde_json::json!(4));
    }

    /// Each refusal says what is wrong with the value, not only what the syntax is.
    #[test]
    fn parse_errors_name_the_problem() {
        let err = |s: &str| s.parse::<IntOrPercent>().unwrap_err().to_string();
        assert_eq!(
            err("150%"),
            "\"150%\" is out of range: a percentage must be between 0% and 100%"
        );
        assert_eq!(
            err("-5%"),
            "\"-5%\" is out of range: a percentage must be between 0% and 100%"
        );
        assert_eq!(
            err("-1"),
            "\"-1\" is negative: give a non-negative integer or a percentage like 30%"
        );
        assert_eq!(
            err("half"),
            "\"half\" is neither a non-negative integer nor a percentage like 30%"
        );
        assert_eq!(p("100%"), IntOrPercent::Percent(100));
        assert_eq!(p("0%"), IntOrPercent::Percent(0));
    }

    #[test]
    fn partition_table() {
        // (partition, replicas, pods kept at the old revision, expected updated)
        let cases: &[(Option<&str>, i64, i64, i64)] = &[
            (None, 5, 0, 5),
            (Some("0"), 5, 0, 5),
            (Some("2"), 5, 2, 3),
            (Some("9"), 5, 5, 0),
            (Some("30%"), 10, 3, 7),
            (Some("25%"), 10, 3, 7), // rounds up
            (Some("1%"), 10, 1, 9),  // rounds up
            (Some("99%"), 10, 9, 1), // would be 10, capped at replicas-1
            (Some("95%"), 2, 1, 1),
            (Some("100%"), 10, 10, 0), // 100% really holds everything
            (Some("99%"), 1, 1, 0),    // a single replica is not capped
            (Some("50%"), 0, 0, 0),
        ];
        for (part, replicas, kept, updated) in cases {
            let part = part.map(p);
            assert_eq!(
                partition_pods(part.as_ref(), *replicas),
                *kept,
                "{part:?} of {replicas}"
            );
            assert_eq!(
                expected_updated(*replicas, part.as_ref()),
                *updated,
                "{part:?} of {replicas}"
            );
        }
    }

    #[test]
    fn max_unavailable_table() {
        assert_eq!(max_unavailable(None, None, 10), 2);
        assert_eq!(max_unavailable(None, None, 3), 1); // 0.6 rounds up
        assert_eq!(max_unavailable(Some(&p("25%")), Some(&p("1")), 10), 2); // rounds down with surge
        assert_eq!(max_unavailable(Some(&p("0")), Some(&p("1")), 10), 1); // floor of one per batch
        assert_eq!(max_unavailable(Some(&p("4")), None, 10), 4);
    }
}
