//! Small serde helpers that reproduce Go's `omitempty` and `null` handling, so objects written by
//! upstream OpenKruise read back and re-serialize the same way.

use serde::{Deserialize, Deserializer};

/// Go's `omitempty` on a bool drops `false`.
pub(crate) fn is_false(b: &bool) -> bool {
    !*b
}

/// Go's `omitempty` on an integer drops zero.
pub(crate) fn is_zero_i32(n: &i32) -> bool {
    *n == 0
}

/// Go's `omitempty` on an integer drops zero.
pub(crate) fn is_zero_i64(n: &i64) -> bool {
    *n == 0
}

/// Go's `omitempty` on a uint64 drops zero.
pub(crate) fn is_zero_u64(n: &u64) -> bool {
    *n == 0
}

/// Go writes a nil map or slice without `omitempty` as `null`; read that as empty.
pub(crate) fn null_as_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}
