//! Raw-JSON helpers every kind's admission shares: path access, field defaulting and
//! int-or-percent values. The handlers work on raw JSON so that a wrongly typed field is
//! reported by path instead of failing the decode.

use serde_json::{Map, Value};

/// Decodes a typed object from borrowed JSON. `serde_json::from_value(v.clone())` would first
/// copy every string and map of the object (a Pod is hundreds of allocations) only to drop
/// them; on the Pod webhook, which sees every Pod write, that copy was most of the decode.
pub fn typed<T: serde::de::DeserializeOwned>(v: &Value) -> Result<T, serde_json::Error> {
    T::deserialize(v)
}

/// An int-or-string value as used by partition, maxUnavailable and maxSurge.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum IntOrPercent {
    /// A plain integer.
    Int(i64),
    /// `"N%"`; fractional percentages are allowed as upstream parses them as floats.
    Percent(f64),
}

impl IntOrPercent {
    /// Parses like upstream's `GetScaledValueFromIntOrPercent`: a JSON integer, or a string
    /// ending in `%`. A bare numeric string is an error there too.
    pub fn parse(v: &Value) -> Result<Self, &'static str> {
        match v {
            Value::Number(n) => n
                .as_i64()
                .filter(|i| i32::try_from(*i).is_ok())
                .map(IntOrPercent::Int)
                .ok_or("must be a 32-bit integer or a percentage like \"10%\""),
            Value::String(s) => s
                .strip_suffix('%')
                .and_then(|p| p.parse::<f64>().ok())
                .filter(|p| p.is_finite())
                .map(IntOrPercent::Percent)
                .ok_or("must be an integer or a percentage like \"10%\""),
            _ => Err("must be an integer or a percentage like \"10%\""),
        }
    }

    /// Scales against `total`, rounding percentages up or down.
    pub fn scaled(self, total: i64, round_up: bool) -> i64 {
        match self {
            IntOrPercent::Int(i) => i,
            IntOrPercent::Percent(p) => {
                let v = p * total as f64 / 100.0;
                let v = if round_up { v.ceil() } else { v.floor() };
                // Saturating float→int cast: absurd percentages cannot overflow.
                v as i64
            }
        }
    }

    /// Whether the value is negative or a percentage above 100.
    pub fn out_of_range(self) -> bool {
        match self {
            IntOrPercent::Int(i) => i < 0,
            IntOrPercent::Percent(p) => !(0.0..=100.0).contains(&p),
        }
    }
}

/// `obj[path…]` for object keys.
pub fn get<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(v, |cur, k| cur.as_object()?.get(*k))
}

/// Mutable object at `obj[path…]`, created (as `{}`) where missing or null. `None` when
/// something on the way is not an object.
pub fn obj_mut<'a>(v: &'a mut Value, path: &[&str]) -> Option<&'a mut Map<String, Value>> {
    let mut cur = v;
    for k in path {
        let map = cur.as_object_mut()?;
        let entry = map.entry((*k).to_owned()).or_insert(Value::Null);
        if entry.is_null() {
            *entry = Value::Object(Map::new());
        }
        cur = entry;
    }
    cur.as_object_mut()
}

/// Sets `map[key] = value` when the key is missing or null; reports whether it changed.
pub fn default_field(map: &mut Map<String, Value>, key: &str, value: Value) -> bool {
    match map.get(key) {
        Some(v) if !v.is_null() => false,
        _ => {
            map.insert(key.to_owned(), value);
            true
        }
    }
}

/// Sets `map[key] = value` when the key is missing, null or the empty string.
pub fn default_string(map: &mut Map<String, Value>, key: &str, value: &str) -> bool {
    match map.get(key) {
        Some(Value::String(s)) if !s.is_empty() => false,
        Some(v) if !v.is_null() && !v.is_string() => false,
        _ => {
            map.insert(key.to_owned(), Value::String(value.to_owned()));
            true
        }
    }
}

/// `m[path…]` for object keys, mutably; `None` when something on the way is missing or not
/// an object.
pub fn get_mut<'a>(m: &'a mut Map<String, Value>, path: &[&str]) -> Option<&'a mut Value> {
    let (first, rest) = path.split_first()?;
    let mut cur = m.get_mut(*first)?;
    for k in rest {
        cur = cur.as_object_mut()?.get_mut(*k)?;
    }
    Some(cur)
}
