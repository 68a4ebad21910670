//! CloneSet admission: defaulting, validation and v1alpha1 ⇄ v1beta1 conversion.
//!
//! These work on raw JSON rather than typed structs on purpose: conversion must carry every
//! field it does not know about unchanged (the pod template is schemaless), and validation must
//! be able to report a wrongly typed field by path instead of failing to decode the object.

pub mod conversion;
pub mod defaults;
pub mod strategy;
pub mod template;
pub mod validation;

#[cfg(test)]
mod validation_tests;

#[cfg(test)]
mod conversion_tests;

#[cfg(test)]
mod template_tests;
