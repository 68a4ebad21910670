//! Just enough of Kubernetes' `resource.Quantity` to compare two quantities by value.
//!
//! Completion of a vertical update compares the spec with the status the kubelet reports, and
//! the kubelet canonicalises quantities ("1" may come back as "1000m"), so string equality is
//! not enough.

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use std::cmp::Ordering;

/// The value in nano units, rounded up like Kubernetes rounds sub-nano precision.
/// `None` when the text is not a quantity or does not fit.
pub fn nano_value(text: &str) -> Option<i128> {
    let text = text.trim();
    let (negative, rest) = match text.as_bytes().first()? {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    let number_end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    let (number, suffix) = rest.split_at(number_end);
    if number.is_empty() || number == "." || number.matches('.').count() > 1 {
        return None;
    }
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));

    // mantissa = digits without the point; the point shifts the decimal exponent down.
    let mut mantissa: i128 = 0;
    for d in whole.bytes().chain(fraction.bytes()) {
        mantissa = mantissa
            .checked_mul(10)?
            .checked_add(i128::from(d - b'0'))?;
    }
    let mut exp10: i64 = -i64::try_from(fraction.len()).ok()?;
    let mut exp2: u32 = 0;
    match suffix {
        "" => {}
        "n" => exp10 -= 9,
        "u" => exp10 -= 6,
        "m" => exp10 -= 3,
        "k" => exp10 += 3,
        "M" => exp10 += 6,
        "G" => exp10 += 9,
        "T" => exp10 += 12,
        "P" => exp10 += 15,
        "E" => exp10 += 18,
        "Ki" => exp2 = 10,
        "Mi" => exp2 = 20,
        "Gi" => exp2 = 30,
        "Ti" => exp2 = 40,
        "Pi" => exp2 = 50,
        "Ei" => exp2 = 60,
        s if s.starts_with(['e', 'E']) => exp10 += s[1..].parse::<i64>().ok()?,
        _ => return None,
    }
    // Scale to nano units.
    exp10 += 9;
    let mut value = mantissa.checked_mul(1i128.checked_shl(exp2)?)?;
    if exp10 >= 0 {
        value = value.checked_mul(10i128.checked_pow(u32::try_from(exp10).ok()?)?)?;
    } else {
        let divisor = 10i128.checked_pow(u32::try_from(-exp10).ok()?)?;
        let rounded_down = value / divisor;
        value = if value % divisor == 0 {
            rounded_down
        } else {
            rounded_down + 1
        };
    }
    Some(if negative { -value } else { value })
}

/// Compares two quantities by value; unparseable text falls back to comparing the strings.
pub(crate) fn cmp(a: &Quantity, b: &Quantity) -> Ordering {
    match (nano_value(&a.0), nano_value(&b.0)) {
        (Some(x), Some(y)) => x.cmp(&y),
        _ => a.0.cmp(&b.0),
    }
}

pub(crate) fn equal(a: &Quantity, b: &Quantity) -> bool {
    cmp(a, b) == Ordering::Equal
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Quantity {
        Quantity(s.to_string())
    }

    #[test]
    fn parses_the_quantity_forms() {
        let cases: &[(&str, Option<i128>)] = &[
            ("1", Some(1_000_000_000)),
            ("1000m", Some(1_000_000_000)),
            ("0.5", Some(500_000_000)),
            ("500m", Some(500_000_000)),
            ("1k", Some(1_000_000_000_000)),
            ("1Ki", Some(1024 * 1_000_000_000)),
            ("128Mi", Some(128 * (1 << 20) * 1_000_000_000)),
            ("1e3", Some(1_000_000_000_000)),
            ("1E-3", Some(1_000_000)),
            ("-2", Some(-2_000_000_000)),
            ("+2", Some(2_000_000_000)),
            ("1n", Some(1)),
            ("0.1n", Some(1)),
            ("0", Some(0)),
            ("", None),
            ("abc", None),
            ("1.2.3", None),
            ("1X", None),
            (".", None),
        ];
        for (text, want) in cases {
            assert_eq!(nano_value(text), *want, "{text}");
        }
    }

    #[test]
    fn compares_by_value() {
        assert!(equal(&q("1"), &q("1000m")));
        assert!(equal(&q("1Gi"), &q("1024Mi")));
        assert!(!equal(&q("1G"), &q("1Gi")));
        assert_eq!(cmp(&q("100m"), &q("0.2")), Ordering::Less);
        assert!(equal(&q("bogus"), &q("bogus")));
    }
}
