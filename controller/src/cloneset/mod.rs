//! The CloneSet controller: pure decisions (`diff`, `scale`, `update`, `status`, `podutil`) and the
//! reconcile shell (`controller`) that reads the world, applies one step and writes status.

pub mod claim;
pub mod controller;
pub mod diff;
pub mod podutil;
pub mod scale;
pub mod status;
pub mod update;
