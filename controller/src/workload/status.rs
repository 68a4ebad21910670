//! The status write every workload makes: a merge patch from the status it read to the one it
//! computed.

use serde::Serialize;
use serde_json::{Value, json};

/// The merge patch (`{"status": …}`) that turns `old` into `new`. Fields the serializer omits
/// (empty or zero) are written as null, or the merge would keep their old value.
pub fn status_patch<S: Serialize>(old: Option<&S>, new: &S) -> Result<Value, serde_json::Error> {
    let mut body = serde_json::to_value(new)?;
    if let (Some(old), Value::Object(obj)) = (old, &mut body)
        && let Value::Object(old) = serde_json::to_value(old)?
    {
        for k in old.keys() {
            obj.entry(k.clone()).or_insert(Value::Null);
        }
    }
    Ok(json!({ "status": body }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize)]
    struct S {
        a: i32,
        #[serde(skip_serializing_if = "Option::is_none")]
        b: Option<i32>,
    }

    #[test]
    fn omitted_fields_are_cleared() {
        let old = S { a: 1, b: Some(2) };
        let new = S { a: 3, b: None };
        assert_eq!(
            status_patch(Some(&old), &new).unwrap(),
            json!({"status": {"a": 3, "b": null}})
        );
        assert_eq!(
            status_patch(None, &new).unwrap(),
            json!({"status": {"a": 3}})
        );
    }
}
