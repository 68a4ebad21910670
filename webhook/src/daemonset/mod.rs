//! Advanced DaemonSet admission: defaulting, validation and v1alpha1 ⇄ v1beta1 conversion.
//! Like CloneSet's, these work on raw JSON so a wrongly typed field is reported by path.

pub mod conversion;
pub mod defaults;
pub mod validation;

#[cfg(test)]
mod tests;
