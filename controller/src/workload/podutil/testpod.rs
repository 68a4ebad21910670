//! A small pod builder for the workload tests.

use super::*;
use k8s_openapi::api::core::v1::{ContainerStatus, PodCondition, PodSpec, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

pub struct P(pub Pod);

pub fn pod(name: &str) -> P {
    let mut p = Pod::default();
    p.metadata.name = Some(name.to_string());
    p.metadata.uid = Some(format!("uid-{name}"));
    p.metadata.namespace = Some("ns".to_string());
    p.spec = Some(PodSpec::default());
    p.status = Some(PodStatus {
        phase: Some("Pending".into()),
        ..Default::default()
    });
    P(p)
}

pub fn ts(secs: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000 + secs).expect("ts")
}

impl P {
    pub fn rev(mut self, r: &str) -> Self {
        self.0
            .metadata
            .labels
            .get_or_insert_default()
            .insert(keys::CONTROLLER_REVISION_HASH_LABEL.into(), r.into());
        self
    }
    pub fn label(mut self, k: &str, v: &str) -> Self {
        self.0
            .metadata
            .labels
            .get_or_insert_default()
            .insert(k.into(), v.into());
        self
    }
    pub fn annotation(mut self, k: &str, v: &str) -> Self {
        self.0
            .metadata
            .annotations
            .get_or_insert_default()
            .insert(k.into(), v.into());
        self
    }
    pub fn state(self, s: LifecycleStateType) -> Self {
        self.label(keys::LIFECYCLE_STATE_LABEL, s.as_str())
    }
    pub fn node(mut self, n: &str) -> Self {
        self.0.spec.get_or_insert_default().node_name = Some(n.into());
        self
    }
    pub fn phase(mut self, ph: &str) -> Self {
        self.0.status.get_or_insert_default().phase = Some(ph.into());
        self
    }
    pub fn cond(mut self, t: &str, status: &str, since: i64) -> Self {
        let st = self.0.status.get_or_insert_default();
        let conds = st.conditions.get_or_insert_default();
        conds.retain(|c| c.type_ != t);
        conds.push(PodCondition {
            type_: t.into(),
            status: status.into(),
            last_transition_time: Some(Time(ts(since))),
            ..Default::default()
        });
        self
    }
    /// Running, scheduled and Ready since `since`.
    pub fn running_ready(self, since: i64) -> Self {
        self.node("n1")
            .phase("Running")
            .cond("PodScheduled", "True", since)
            .cond("Ready", "True", since)
    }
    pub fn created(mut self, secs: i64) -> Self {
        self.0.metadata.creation_timestamp = Some(Time(ts(secs)));
        self
    }
    pub fn restarts(mut self, n: i32) -> Self {
        self.0.status.get_or_insert_default().container_statuses = Some(vec![ContainerStatus {
            name: "c".into(),
            restart_count: n,
            ..Default::default()
        }]);
        self
    }
    pub fn finalizer(mut self, f: &str) -> Self {
        self.0
            .metadata
            .finalizers
            .get_or_insert_default()
            .push(f.into());
        self
    }
    pub fn build(self) -> Pod {
        self.0
    }
}
