//! `kubectl kruise describe`: one screen per workload — its knobs, revisions, conditions, the
//! Pods grouped by revision with their in-place state, why Pods are held, and recent Events. The
//! static form of the live view. Pure: built from the views the command reads.

use serde::Serialize;

use super::verdict::Held;
use super::workload::Kind;
use super::{PodView, RolloutView, VolumeClaims};

/// What `describe -o json|yaml` prints (schemaVersion 1; fields may be added, never renamed).
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Description {
    pub schema_version: u32,
    pub kind: String,
    pub api_version: String,
    pub namespace: String,
    pub name: String,
    pub selector: Option<String>,
    pub generation: i64,
    pub observed_generation: i64,
    pub replicas: Replicas,
    pub strategy: Strategy,
    pub images: Vec<Image>,
    pub current_revision: String,
    pub update_revision: String,
    pub revisions: Vec<RevisionRow>,
    /// An Advanced StatefulSet's claims at their templates' sizes; absent for other kinds.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub volume_claims: Vec<VolumeClaims>,
    pub conditions: Vec<ConditionRow>,
    pub pod_groups: Vec<PodGroup>,
    pub held: Vec<Held>,
    pub events: Vec<EventLine>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Replicas {
    pub desired: i64,
    pub current: i64,
    pub updated: i64,
    pub updated_ready: Option<i64>,
    pub ready: i64,
    pub available: i64,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Strategy {
    pub pod_update_policy: String,
    pub partition: Option<String>,
    pub max_unavailable: Option<String>,
    pub max_surge: Option<String>,
    pub paused: bool,
    pub on_delete: bool,
    pub grace_period_seconds: i64,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Image {
    pub container: String,
    pub image: String,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RevisionRow {
    pub revision: i64,
    pub name: String,
    pub images: Vec<String>,
    /// `current`, `update` or empty.
    pub state: String,
    pub change_cause: String,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ConditionRow {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    pub reason: String,
    pub message: String,
}

/// The Pods of one revision.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PodGroup {
    pub revision: String,
    /// `update`, `current`, or empty for any other revision.
    pub role: String,
    pub pods: Vec<PodRow>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PodRow {
    pub name: String,
    pub ready: bool,
    /// Where the Pod stands: `Terminating`, `UpdatingInPlace`, a lifecycle hook's state, or its
    /// phase.
    pub state: String,
    pub restarts: i64,
    pub node: String,
    pub uid: String,
    /// `container=image` as the Pod's spec has them.
    pub images: Vec<String>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct EventLine {
    pub time: Option<String>,
    #[serde(rename = "type")]
    pub type_: String,
    pub reason: String,
    pub object: String,
    pub message: String,
}

/// One Pod's state for the table: terminating first, then an in-place update under way, then a
/// lifecycle hook's state other than Normal, then the phase.
pub fn pod_state(p: &PodView) -> String {
    if p.terminating {
        return "Terminating".to_owned();
    }
    if p.in_place_in_progress() {
        return "UpdatingInPlace".to_owned();
    }
    if !p.lifecycle.is_empty() && p.lifecycle != "Normal" {
        return p.lifecycle.clone();
    }
    if p.phase.is_empty() {
        "Pending".to_owned()
    } else {
        p.phase.clone()
    }
}

/// Groups the Pods by revision: the update revision first, then the current one, then the
/// others by name; Pods by name within a group.
/// A SidecarSet's Pods are those it injected, grouped by the sidecar hash each records.
pub fn pod_groups(view: &RolloutView, pods: &[PodView]) -> Vec<PodGroup> {
    let mut groups: Vec<PodGroup> = Vec::new();
    let sidecars = view.kind == Kind::SidecarSet;
    let mut sorted: Vec<&PodView> = pods
        .iter()
        .filter(|p| !sidecars || p.sidecar_hashes.contains_key(&view.name))
        .collect();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    for p in sorted {
        let (role, revision) = if sidecars {
            let recorded = p
                .sidecar_hashes
                .get(&view.name)
                .cloned()
                .unwrap_or_default();
            let role = if !view.sidecar_hash.is_empty() && recorded == view.sidecar_hash {
                "update"
            } else {
                ""
            };
            (role, recorded)
        } else if p.is_updated(&view.update_revision) {
            ("update", view.update_revision.clone())
        } else if !view.current_revision.is_empty() && p.is_updated(&view.current_revision) {
            ("current", view.current_revision.clone())
        } else {
            ("", p.revision.clone())
        };
        let row = PodRow {
            name: p.name.clone(),
            ready: p.ready,
            state: pod_state(p),
            restarts: p.restarts,
            node: p.node.clone(),
            uid: p.uid.clone(),
            images: p
                .containers
                .iter()
                .map(|c| format!("{}={}", c.name, c.spec_image))
                .collect(),
        };
        match groups.iter_mut().find(|g| g.revision == revision) {
            Some(g) => g.pods.push(row),
            None => groups.push(PodGroup {
                revision,
                role: role.to_owned(),
                pods: vec![row],
            }),
        }
    }
    let rank = |g: &PodGroup| match g.role.as_str() {
        "update" => 0,
        "current" => 1,
        _ => 2,
    };
    groups.sort_by(|a, b| rank(a).cmp(&rank(b)).then(a.revision.cmp(&b.revision)));
    groups
}

fn opt(v: &Option<impl std::fmt::Display>) -> String {
    v.as_ref()
        .map(ToString::to_string)
        .unwrap_or_else(|| "-".to_owned())
}

/// The text form, kubectl-describe style.
pub fn render(d: &Description) -> String {
    let mut out = String::new();
    let mut line = |k: &str, v: String| out.push_str(&format!("{k:<15}{v}\n"));
    line("Name:", d.name.clone());
    line("Namespace:", d.namespace.clone());
    line("Kind:", format!("{} ({})", d.kind, d.api_version));
    line(
        "Selector:",
        d.selector.clone().unwrap_or_else(|| "<none>".into()),
    );
    let r = &d.replicas;
    line(
        "Replicas:",
        format!(
            "{} desired | {} current | {} updated{} | {} ready | {} available",
            r.desired,
            r.current,
            r.updated,
            r.updated_ready
                .map(|n| format!(" ({n} ready)"))
                .unwrap_or_default(),
            r.ready,
            r.available
        ),
    );
    let s = &d.strategy;
    line(
        "Strategy:",
        format!(
            "{}{}, partition {}, maxUnavailable {}, maxSurge {}, paused {}, grace {}s",
            if s.pod_update_policy.is_empty() {
                "-"
            } else {
                &s.pod_update_policy
            },
            if s.on_delete { " (OnDelete)" } else { "" },
            opt(&s.partition),
            opt(&s.max_unavailable),
            opt(&s.max_surge),
            s.paused,
            s.grace_period_seconds
        ),
    );
    line(
        "Images:",
        d.images
            .iter()
            .map(|i| format!("{}={}", i.container, i.image))
            .collect::<Vec<_>>()
            .join(", "),
    );
    line(
        "Generation:",
        format!("{} (observed {})", d.generation, d.observed_generation),
    );
    line(
        "Revisions:",
        format!(
            "current {} | update {}",
            or_none(&d.current_revision),
            or_none(&d.update_revision)
        ),
    );
    if !d.revisions.is_empty() {
        out.push_str("History:\n");
        for rev in &d.revisions {
            out.push_str(&format!(
                "  {:<4} {:<8} {}{}\n",
                rev.revision,
                rev.state,
                rev.images.join(","),
                if rev.change_cause.is_empty() {
                    String::new()
                } else {
                    format!("  ({})", rev.change_cause)
                }
            ));
        }
    }
    if !d.volume_claims.is_empty() {
        let claims = d
            .volume_claims
            .iter()
            .map(|c| {
                format!(
                    "{} {} of {} at the template's size ({} resized)",
                    c.name, c.compatible, d.replicas.current, c.compatible_ready
                )
            })
            .collect::<Vec<_>>()
            .join(", ");
        out.push_str(&format!("{:<15}{claims}\n", "Volume claims:"));
    }
    out.push_str("Conditions:\n");
    if d.conditions.is_empty() {
        out.push_str("  <none>\n");
    }
    for c in &d.conditions {
        out.push_str(&format!(
            "  {} {} {}{}\n",
            c.type_,
            c.status,
            or_none(&c.reason),
            if c.message.is_empty() {
                String::new()
            } else {
                format!(": {}", c.message)
            }
        ));
    }
    render_pods(&mut out, d);
    if !d.held.is_empty() {
        out.push_str("Held:\n");
        for h in &d.held {
            out.push_str(&format!("  {}: {}\n", h.pod, h.reason));
        }
    }
    render_events(&mut out, d);
    out
}

/// The Pods section: a table per revision (and role).
fn render_pods(out: &mut String, d: &Description) {
    out.push_str("Pods:\n");
    if d.pod_groups.is_empty() {
        out.push_str("  <none>\n");
    }
    for g in &d.pod_groups {
        out.push_str(&format!(
            "  {}{} ({} Pod{}):\n",
            or_none(&g.revision),
            if g.role.is_empty() {
                String::new()
            } else {
                format!(" [{}]", g.role)
            },
            g.pods.len(),
            if g.pods.len() == 1 { "" } else { "s" }
        ));
        let name_w = g
            .pods
            .iter()
            .map(|p| p.name.len())
            .max()
            .unwrap_or(4)
            .max(4);
        let state_w = g
            .pods
            .iter()
            .map(|p| p.state.len())
            .max()
            .unwrap_or(5)
            .max(5);
        out.push_str(&format!(
            "    {:<name_w$}  READY  {:<state_w$}  RESTARTS  NODE\n",
            "NAME", "STATE"
        ));
        for p in &g.pods {
            out.push_str(&format!(
                "    {:<name_w$}  {:<5}  {:<state_w$}  {:<8}  {}\n",
                p.name,
                if p.ready { "yes" } else { "no" },
                p.state,
                p.restarts,
                or_none(&p.node)
            ));
        }
    }
}

/// The Events section.
fn render_events(out: &mut String, d: &Description) {
    out.push_str("Events:\n");
    if d.events.is_empty() {
        out.push_str("  <none>\n");
    }
    for e in &d.events {
        out.push_str(&format!(
            "  {}  {:<7} {:<24} {:<28} {}\n",
            e.time.as_deref().unwrap_or("-"),
            e.type_,
            e.reason,
            e.object,
            e.message
        ));
    }
}

fn or_none(s: &str) -> &str {
    if s.is_empty() { "<none>" } else { s }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::view::{ContainerView, InPlaceProgress};
    use serde_json::json;

    fn view() -> RolloutView {
        RolloutView::from_json(&json!({
            "apiVersion": "apps.kruise.io/v1beta1", "kind": "CloneSet",
            "metadata": {"name": "web", "namespace": "shop", "generation": 3},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                     "updateStrategy": {"partition": 1, "maxUnavailable": "50%",
                                        "podUpdatePolicy": "InPlaceIfPossible"},
                     "template": {"spec": {"containers": [{"name": "app", "image": "app:2"}]}}},
            "status": {"observedGeneration": 3, "replicas": 3, "readyReplicas": 2,
                       "availableReplicas": 2, "updatedReplicas": 1, "updatedReadyReplicas": 0,
                       "updateRevision": "web-2", "currentRevision": "web-1"}
        }))
    }

    fn pod(name: &str, revision: &str, ready: bool) -> PodView {
        PodView {
            name: name.into(),
            revision: revision.into(),
            ready,
            phase: "Running".into(),
            lifecycle: "Normal".into(),
            node: "n1".into(),
            containers: vec![ContainerView {
                name: "app".into(),
                spec_image: if revision == "web-2" {
                    "app:2"
                } else {
                    "app:1"
                }
                .into(),
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    #[test]
    fn pods_are_grouped_update_first_with_their_in_place_state() {
        let mut updating = pod("web-b", "web-2", false);
        updating.inplace = Some(InPlaceProgress {
            revision: "web-2".into(),
            grace_seconds: 5,
            ..Default::default()
        });
        let mut hooked = pod("web-c", "web-1", true);
        hooked.lifecycle = "PreparingUpdate".into();
        let pods = [pod("web-a", "web-1", true), updating, hooked];
        let groups = pod_groups(&view(), &pods);
        assert_eq!(
            groups
                .iter()
                .map(|g| (g.revision.as_str(), g.role.as_str(), g.pods.len()))
                .collect::<Vec<_>>(),
            vec![("web-2", "update", 1), ("web-1", "current", 2)]
        );
        assert_eq!(groups[0].pods[0].state, "UpdatingInPlace");
        assert_eq!(groups[1].pods[0].state, "Running");
        assert_eq!(groups[1].pods[1].state, "PreparingUpdate");
        assert_eq!(groups[0].pods[0].images, vec!["app=app:2".to_owned()]);
    }

    #[test]
    fn text_has_each_section() {
        let v = view();
        let pods = [pod("web-a", "web-1", true), pod("web-b", "web-2", false)];
        let d = Description {
            schema_version: 1,
            kind: "CloneSet".into(),
            api_version: v.api_version.clone(),
            namespace: "shop".into(),
            name: "web".into(),
            selector: Some("app=web".into()),
            generation: 3,
            observed_generation: 3,
            replicas: Replicas {
                desired: 3,
                current: 3,
                updated: 1,
                updated_ready: Some(0),
                ready: 2,
                available: 2,
            },
            strategy: Strategy {
                pod_update_policy: "InPlaceIfPossible".into(),
                partition: Some("1".into()),
                max_unavailable: Some("50%".into()),
                max_surge: None,
                paused: false,
                on_delete: false,
                grace_period_seconds: 0,
            },
            images: vec![Image {
                container: "app".into(),
                image: "app:2".into(),
            }],
            current_revision: "web-1".into(),
            update_revision: "web-2".into(),
            revisions: vec![RevisionRow {
                revision: 2,
                name: "web-2".into(),
                images: vec!["app:2".into()],
                state: "update".into(),
                change_cause: String::new(),
            }],
            volume_claims: vec![],
            conditions: vec![],
            pod_groups: pod_groups(&v, &pods),
            held: vec![Held {
                pod: "web-b".into(),
                reason: "updated but not ready".into(),
            }],
            events: vec![EventLine {
                time: Some("2026-01-01T00:00:00Z".into()),
                type_: "Normal".into(),
                reason: "SuccessfulUpdatePodInPlace".into(),
                object: "pod/web-b".into(),
                message: "updated in place".into(),
            }],
        };
        let text = render(&d);
        for needle in [
            "Name:          web\n",
            "Kind:          CloneSet (apps.kruise.io/v1beta1)\n",
            "Replicas:      3 desired | 3 current | 1 updated (0 ready) | 2 ready | 2 available\n",
            "Strategy:      InPlaceIfPossible, partition 1, maxUnavailable 50%, maxSurge -, paused false, grace 0s\n",
            "Revisions:     current web-1 | update web-2\n",
            "  web-2 [update] (1 Pod):\n",
            "  web-1 [current] (1 Pod):\n",
            "    web-b  no     Running  0         n1\n",
            "Held:\n  web-b: updated but not ready\n",
            "SuccessfulUpdatePodInPlace",
            "Conditions:\n  <none>\n",
        ] {
            assert!(text.contains(needle), "{needle:?} in\n{text}");
        }
    }

    #[test]
    fn an_advanced_statefulset_shows_its_claims_at_the_template_size() {
        let sts = serde_json::json!({
            "apiVersion": "apps.kruise.io/v1beta1", "kind": "StatefulSet",
            "metadata": {"name": "web", "namespace": "db", "generation": 2},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                "template": {"spec": {"containers": [{"name": "app", "image": "app:2"}]}}},
            "status": {"replicas": 2, "observedGeneration": 2, "volumeClaims": [
                {"volumeClaimName": "data", "compatibleReplicas": 2, "compatibleReadyReplicas": 1},
                {"volumeClaimName": "logs", "compatibleReplicas": 0, "compatibleReadyReplicas": 0}]}
        });
        let view = RolloutView::from_json(&sts);
        assert_eq!(
            view.volume_claims,
            vec![
                VolumeClaims {
                    name: "data".into(),
                    compatible: 2,
                    compatible_ready: 1
                },
                VolumeClaims {
                    name: "logs".into(),
                    compatible: 0,
                    compatible_ready: 0
                },
            ]
        );
        let d = crate::cmd::describe::describe(&view, &[], &[], vec![], vec![]);
        let text = render(&d);
        assert!(
            text.contains("Volume claims: data 2 of 2 at the template's size (1 resized), logs 0 of 2 at the template's size (0 resized)\n"),
            "{text}"
        );
        let json = serde_json::to_value(&d).expect("json");
        assert_eq!(json["volumeClaims"][0]["compatibleReady"], 1, "{json}");
    }
}
