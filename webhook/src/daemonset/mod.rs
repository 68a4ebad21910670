//! Advanced DaemonSet admission: v1alpha1 ⇄ v1beta1 conversion.

pub mod conversion;
