//! The container launch-priority controller. The pod webhook gives every container of an
//! ordered pod a `KRUISE_CONTAINER_BARRIER` env read from key `p_<priority>` of ConfigMap
//! `<pod>-barrier`; the kubelet cannot start a container until its key exists. This controller
//! creates that ConfigMap and adds the keys one priority at a time, highest first, each once the
//! containers of the previous priority are ready, then marks the pod completed.

pub mod context;
pub mod controller;
pub mod error;
pub mod plan;
mod reconcile;
