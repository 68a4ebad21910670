//! The CloneSet's `kruise.io/cloneset-volumeclaimtemplate-hash` revision annotation
//! ([`crate::keys::CLONESET_VOLUME_CLAIM_TEMPLATE_HASH_ANNOTATION`]), byte-for-byte as upstream
//! computes it, so revisions made by either manager compare equal for equal templates: each
//! template reduced to its name and spec, sorted by name, encoded as Go's `encoding/json` encodes
//! `[]v1.PersistentVolumeClaim` (Kubernetes 1.32 types: Go field order, `creationTimestamp: null`,
//! an empty `status`, canonical quantities), then [`crate::hash::deep_hash_json`].

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, PersistentVolumeClaimSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use crate::hash::{deep_hash_json, go_json_string};

/// The annotation's value: `""` for no templates (as upstream), else the decimal hash.
pub fn volume_claim_templates_hash(templates: &[PersistentVolumeClaim]) -> String {
    if templates.is_empty() {
        return String::new();
    }
    let mut named: Vec<(&str, Option<&PersistentVolumeClaimSpec>)> = templates
        .iter()
        .map(|t| {
            (
                t.metadata.name.as_deref().unwrap_or_default(),
                t.spec.as_ref(),
            )
        })
        .collect();
    named.sort_by(|a, b| a.0.cmp(b.0));
    let mut out = String::from("[");
    for (i, (name, spec)) in named.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str("{\"metadata\":{\"name\":");
        go_json_string(name, &mut out);
        out.push_str(",\"creationTimestamp\":null},\"spec\":");
        spec_json(*spec, &mut out);
        out.push_str(",\"status\":{}}");
    }
    out.push(']');
    deep_hash_json(&out).to_string()
}

/// Writes `"key":` after a comma when a field came before.
struct Fields<'a> {
    out: &'a mut String,
    first: bool,
}

impl<'a> Fields<'a> {
    fn open(out: &'a mut String) -> Self {
        out.push('{');
        Fields { out, first: true }
    }
    fn key(&mut self, k: &str) -> &mut String {
        if !self.first {
            self.out.push(',');
        }
        self.first = false;
        go_json_string(k, self.out);
        self.out.push(':');
        self.out
    }
    fn string(&mut self, k: &str, v: &str) {
        let out = self.key(k);
        go_json_string(v, out);
    }
    fn strings(&mut self, k: &str, vs: &[String]) {
        let out = self.key(k);
        out.push('[');
        for (i, v) in vs.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            go_json_string(v, out);
        }
        out.push(']');
    }
    fn close(self) {
        self.out.push('}');
    }
}

fn string_map(m: &BTreeMap<String, String>, out: &mut String) {
    let mut f = Fields::open(out);
    for (k, v) in m {
        f.string(k, v);
    }
    f.close();
}

fn quantity_map(m: &BTreeMap<String, Quantity>, out: &mut String) {
    let mut f = Fields::open(out);
    for (k, v) in m {
        f.string(k, &canonical_quantity(&v.0));
    }
    f.close();
}

/// Go field order of `PersistentVolumeClaimSpec`; `resources` is a struct, so Go writes it even
/// when empty.
fn spec_json(spec: Option<&PersistentVolumeClaimSpec>, out: &mut String) {
    let default = PersistentVolumeClaimSpec::default();
    let spec = spec.unwrap_or(&default);
    let mut f = Fields::open(out);
    if let Some(modes) = spec.access_modes.as_deref().filter(|m| !m.is_empty()) {
        f.strings("accessModes", modes);
    }
    if let Some(sel) = &spec.selector {
        selector_json(sel, f.key("selector"));
    }
    {
        let out = f.key("resources");
        let mut r = Fields::open(out);
        let res = spec.resources.as_ref();
        if let Some(l) = res
            .and_then(|r| r.limits.as_ref())
            .filter(|m| !m.is_empty())
        {
            quantity_map(l, r.key("limits"));
        }
        if let Some(q) = res
            .and_then(|r| r.requests.as_ref())
            .filter(|m| !m.is_empty())
        {
            quantity_map(q, r.key("requests"));
        }
        r.close();
    }
    if let Some(v) = spec.volume_name.as_deref().filter(|v| !v.is_empty()) {
        f.string("volumeName", v);
    }
    if let Some(v) = &spec.storage_class_name {
        f.string("storageClassName", v);
    }
    if let Some(v) = &spec.volume_mode {
        f.string("volumeMode", v);
    }
    if let Some(ds) = &spec.data_source {
        object_reference(
            f.key("dataSource"),
            ds.api_group.as_deref(),
            &ds.kind,
            &ds.name,
        )
        .close();
    }
    if let Some(ds) = &spec.data_source_ref {
        let mut d = object_reference(
            f.key("dataSourceRef"),
            ds.api_group.as_deref(),
            &ds.kind,
            &ds.name,
        );
        if let Some(ns) = &ds.namespace {
            d.string("namespace", ns);
        }
        d.close();
    }
    if let Some(v) = &spec.volume_attributes_class_name {
        f.string("volumeAttributesClassName", v);
    }
    f.close();
}

/// `apiGroup` (written `null` when absent: Go's field has no `omitempty`), `kind`, `name`; the
/// caller adds what else its reference type has and closes it.
fn object_reference<'a>(
    out: &'a mut String,
    api_group: Option<&str>,
    kind: &str,
    name: &str,
) -> Fields<'a> {
    let mut d = Fields::open(out);
    match api_group {
        Some(g) => d.string("apiGroup", g),
        None => d.key("apiGroup").push_str("null"),
    }
    d.string("kind", kind);
    d.string("name", name);
    d
}

fn selector_json(sel: &LabelSelector, out: &mut String) {
    let mut f = Fields::open(out);
    if let Some(m) = sel.match_labels.as_ref().filter(|m| !m.is_empty()) {
        string_map(m, f.key("matchLabels"));
    }
    if let Some(exprs) = sel.match_expressions.as_deref().filter(|e| !e.is_empty()) {
        let out = f.key("matchExpressions");
        out.push('[');
        for (i, e) in exprs.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let mut r = Fields::open(out);
            r.string("key", &e.key);
            r.string("operator", &e.operator);
            if let Some(vs) = e.values.as_deref().filter(|v| !v.is_empty()) {
                r.strings("values", vs);
            }
            r.close();
        }
        out.push(']');
    }
    f.close();
}

/// A quantity as Go's `resource.Quantity` writes it after parsing `s` (`CanonicalizeBytes`): a
/// binary suffix keeps base 1024 while the value is a whole number of at least 1024, otherwise
/// the largest power of 1000 that leaves a whole mantissa. A string it cannot read is kept as it
/// is (the API server validated it; only exotic forms get here).
pub fn canonical_quantity(s: &str) -> String {
    parse_quantity(s).map_or_else(|| s.to_owned(), |q| q.canonical())
}

/// A quantity string as Go's `resource.ParseQuantity` reads it:
/// `mantissa * 10^exp10 * 1024^binary_power`. The one parse of the format in the project; the
/// SidecarSet resources policy computes with it too.
pub struct Parsed {
    pub mantissa: i128,
    pub exp10: i32,
    pub binary_power: u32,
    format: Format,
}

#[derive(Clone, Copy, PartialEq)]
enum Format {
    BinarySi,
    DecimalSi,
    DecimalExponent,
}

/// Reads `s` (`1.5Gi`, `250m`, `2`, `1e3`); `None` for what the API server would refuse.
pub fn parse_quantity(s: &str) -> Option<Parsed> {
    let s = s.trim();
    let num_end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(s.len());
    let (num, suffix) = s.split_at(num_end);
    let (negative, digits) = match num.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, num.strip_prefix('+').unwrap_or(num)),
    };
    let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
    if (int.is_empty() && frac.is_empty())
        || !int.chars().chain(frac.chars()).all(|c| c.is_ascii_digit())
        || int.len() + frac.len() > 30
    {
        return None;
    }
    let mut mantissa: i128 = format!("{int}{frac}").parse().ok()?;
    if negative {
        mantissa = -mantissa;
    }
    let mut exp10 = -i32::try_from(frac.len()).ok()?;
    let (format, binary_power) = match suffix {
        "Ki" => (Format::BinarySi, 1),
        "Mi" => (Format::BinarySi, 2),
        "Gi" => (Format::BinarySi, 3),
        "Ti" => (Format::BinarySi, 4),
        "Pi" => (Format::BinarySi, 5),
        "Ei" => (Format::BinarySi, 6),
        _ => {
            let decimal = match suffix {
                "n" => Some(-9),
                "u" => Some(-6),
                "m" => Some(-3),
                "" => Some(0),
                "k" => Some(3),
                "M" => Some(6),
                "G" => Some(9),
                "T" => Some(12),
                "P" => Some(15),
                "E" => Some(18),
                _ => None,
            };
            match decimal {
                Some(e) => {
                    exp10 += e;
                    (Format::DecimalSi, 0)
                }
                None => {
                    let e: i32 = suffix
                        .strip_prefix('e')
                        .or_else(|| suffix.strip_prefix('E'))?
                        .parse()
                        .ok()?;
                    exp10 += e;
                    (Format::DecimalExponent, 0)
                }
            }
        }
    };
    Some(Parsed {
        mantissa,
        exp10,
        binary_power,
        format,
    })
}

impl Parsed {
    /// The value times 1000, rounded up in magnitude below a milli (Go's `MilliValue`); `None`
    /// past i128.
    pub fn milli(&self) -> Option<i128> {
        let mut m = self
            .mantissa
            .checked_abs()?
            .checked_mul(1024i128.checked_pow(self.binary_power)?)?;
        let shift = self.exp10 + 3;
        if shift >= 0 {
            m = m.checked_mul(10i128.checked_pow(shift.unsigned_abs())?)?;
        } else {
            let div = 10i128.checked_pow(shift.unsigned_abs())?;
            m = m / div + i128::from(m % div != 0);
        }
        Some(if self.mantissa < 0 { -m } else { m })
    }

    fn canonical(&self) -> String {
        if self.mantissa == 0 {
            return "0".to_owned();
        }
        // As a decimal: the binary factor folded into the mantissa.
        let Some(m) = 1024i128
            .checked_pow(self.binary_power)
            .and_then(|f| self.mantissa.checked_mul(f))
        else {
            return self.fallback();
        };
        let (m, e) = normalize(m, self.exp10);
        // Go keeps nano precision, rounding up (away from zero for negative values too).
        let (m, e) = if e < -9 {
            let div = 10i128.pow((-9 - e).unsigned_abs());
            let q = m / div;
            let rounded = if m % div != 0 { q + m.signum() } else { q };
            normalize(rounded, -9)
        } else {
            (m, e)
        };
        let mut format = self.format;
        if format == Format::BinarySi {
            let whole = (e >= 0)
                .then(|| {
                    10i128
                        .checked_pow(e.unsigned_abs())
                        .and_then(|p| m.checked_mul(p))
                })
                .flatten();
            match whole {
                Some(n) if n.abs() >= 1024 => return binary(n),
                _ => format = Format::DecimalSi,
            }
        }
        // The largest exponent, a multiple of 3, that leaves a whole mantissa.
        let e3 = e - e.rem_euclid(3);
        let Some(mantissa) = 10i128
            .checked_pow((e - e3).unsigned_abs())
            .and_then(|p| m.checked_mul(p))
        else {
            return self.fallback();
        };
        let suffix = match (format, e3) {
            (Format::DecimalSi, -9) => "n".to_owned(),
            (Format::DecimalSi, -6) => "u".to_owned(),
            (Format::DecimalSi, -3) => "m".to_owned(),
            (_, 0) => String::new(),
            (Format::DecimalSi, 3) => "k".to_owned(),
            (Format::DecimalSi, 6) => "M".to_owned(),
            (Format::DecimalSi, 9) => "G".to_owned(),
            (Format::DecimalSi, 12) => "T".to_owned(),
            (Format::DecimalSi, 15) => "P".to_owned(),
            (Format::DecimalSi, 18) => "E".to_owned(),
            (_, e3) => format!("e{e3}"),
        };
        format!("{mantissa}{suffix}")
    }

    fn fallback(&self) -> String {
        format!("{}e{}", self.mantissa, self.exp10)
    }
}

/// Trailing zeros of the mantissa moved into the exponent.
fn normalize(mut m: i128, mut e: i32) -> (i128, i32) {
    while m != 0 && m % 10 == 0 {
        m /= 10;
        e += 1;
    }
    (m, e)
}

/// A whole number of bytes with the largest binary suffix that divides it.
fn binary(n: i128) -> String {
    let suffixes = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
    let mut v = n;
    let mut i = 0;
    while i + 1 < suffixes.len() && v % 1024 == 0 {
        v /= 1024;
        i += 1;
    }
    format!("{v}{}", suffixes[i])
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pvc(v: serde_json::Value) -> PersistentVolumeClaim {
        serde_json::from_value(v).expect("pvc")
    }

    fn simple(size: &str) -> PersistentVolumeClaim {
        pvc(
            json!({"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": size}}}}),
        )
    }

    // Golden values computed with upstream's code (Kubernetes 1.32 types, encoding/json,
    // dump.ForHash, FNV-32a), the versions OpenKruise v1.9 builds with.
    #[test]
    fn hashes_as_upstream() {
        assert_eq!(volume_claim_templates_hash(&[simple("1Mi")]), "679419538");
        assert_eq!(
            volume_claim_templates_hash(&[simple("2048Ki")]),
            "2304611156"
        );
        assert_eq!(
            volume_claim_templates_hash(&[simple("1.5Gi")]),
            "3479704543"
        );
        assert_eq!(volume_claim_templates_hash(&[simple("1000")]), "3451737994");
        let logs = pvc(json!({"metadata": {"name": "logs"}, "spec": {
            "accessModes": ["ReadWriteOnce", "ReadOnlyMany"],
            "selector": {"matchLabels": {"z": "1", "a": "<2>"},
                         "matchExpressions": [{"key": "k", "operator": "In", "values": ["x"]}]},
            "resources": {"limits": {"storage": "1G"}, "requests": {"storage": "1000M"}},
            "storageClassName": "fast", "volumeMode": "Filesystem", "volumeName": "pv-1"}}));
        // Sorted by name whatever the order given.
        assert_eq!(
            volume_claim_templates_hash(&[logs, simple("1536Mi")]),
            "2587273641"
        );
        assert_eq!(volume_claim_templates_hash(&[]), "");
        let sourced = pvc(json!({"metadata": {"name": "data"}, "spec": {
            "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}},
            "dataSource": {"kind": "PersistentVolumeClaim", "name": "src"},
            "dataSourceRef": {"apiGroup": "snapshot.storage.k8s.io", "kind": "VolumeSnapshot",
                              "name": "snap", "namespace": "other"},
            "volumeAttributesClassName": "gold"}}));
        assert_eq!(volume_claim_templates_hash(&[sourced]), "1675478909");
    }

    #[test]
    fn quantities_are_canonical_as_go_writes_them() {
        for (given, want) in [
            ("1Mi", "1Mi"),
            ("2048Ki", "2Mi"),
            ("1536Mi", "1536Mi"),
            ("1.5Gi", "1536Mi"),
            ("512", "512"),
            ("1000", "1k"),
            ("1500", "1500"),
            ("1.5G", "1500M"),
            ("1000M", "1G"),
            ("0.5Ki", "512"),
            ("100m", "100m"),
            ("0.1", "100m"),
            ("1e3", "1e3"),
            ("0", "0"),
            ("0Gi", "0"),
        ] {
            assert_eq!(canonical_quantity(given), want, "{given}");
        }
    }
}
