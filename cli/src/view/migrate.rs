//! `migrate`, the pure half: the CloneSet made from a Deployment, the Advanced StatefulSet that
//! takes over a StatefulSet, the record of a move kept on the destination, and the next step of
//! the Deployment move read from the live objects.
//!
//! kruise-tools (`pkg/creation/cloneset`, `pkg/migration/cloneset`) keeps the move's progress in
//! memory; here every step is a function of the two objects' replicas and the record, so a rerun
//! of the same command continues where an interrupted one stopped.

use kruise_api::keys;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// What `migrate` refuses, each naming the flag or field and the fix.
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum MigrateError {
    #[error("deployment/{0} has no spec.template or spec.selector: is it a Deployment?")]
    NotADeployment(String),
    #[error(
        "annotation {key} of {dst} is unreadable ({why}): remove it to start the move afresh",
        key = keys::MIGRATION_ANNOTATION
    )]
    BadRecord { dst: String, why: String },
    #[error(
        "{dst} is being filled from {recorded}, not {asked}: give --src-name {recorded_name} or another --dst-name"
    )]
    OtherSource {
        dst: String,
        recorded: String,
        recorded_name: String,
        asked: String,
    },
    #[error("statefulset/{0} has no spec.template or spec.selector: is it a StatefulSet?")]
    NotAStatefulSet(String),
    #[error(
        "--replicas {asked}: {src} has only {has} replicas to move (give at most {has}, or leave --replicas out to move them all)"
    )]
    TooManyReplicas { src: String, asked: i64, has: i64 },
}

/// The move as it began, kept on the destination as [`keys::MIGRATION_ANNOTATION`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    /// `Deployment/NAME`.
    pub from: String,
    /// The source's replicas when the move began.
    pub source_replicas: i64,
    /// The destination's replicas when the move began (0 when `--create` made it).
    pub destination_replicas: i64,
    /// How many replicas the move takes from the source to the destination.
    pub replicas: i64,
}

impl Record {
    /// A new move of `replicas` (all of the source's when `None`).
    pub fn begin(
        from: &str,
        source: i64,
        destination: i64,
        replicas: Option<i64>,
    ) -> Result<Record, MigrateError> {
        let n = replicas.unwrap_or(source);
        if n > source || n < 0 {
            return Err(MigrateError::TooManyReplicas {
                src: from.to_lowercase(),
                asked: n,
                has: source,
            });
        }
        Ok(Record {
            from: from.to_owned(),
            source_replicas: source,
            destination_replicas: destination,
            replicas: n,
        })
    }

    /// The record on `obj` (the destination), if any.
    pub fn read(obj: &Value, dst: &str) -> Result<Option<Record>, MigrateError> {
        let Some(text) = obj["metadata"]["annotations"][keys::MIGRATION_ANNOTATION].as_str() else {
            return Ok(None);
        };
        serde_json::from_str(text)
            .map(Some)
            .map_err(|e| MigrateError::BadRecord {
                dst: dst.to_owned(),
                why: e.to_string(),
            })
    }

    /// The annotation's value.
    pub fn to_annotation(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Refuses a record of another source.
    pub fn check_source(&self, from: &str, dst: &str) -> Result<(), MigrateError> {
        if self.from == from {
            return Ok(());
        }
        Err(MigrateError::OtherSource {
            dst: dst.to_owned(),
            recorded: self.from.clone(),
            recorded_name: self
                .from
                .split_once('/')
                .map(|(_, n)| n.to_owned())
                .unwrap_or_default(),
            asked: from.to_owned(),
        })
    }

    /// Replicas the source ends with.
    pub fn source_target(&self) -> i64 {
        self.source_replicas - self.replicas
    }

    /// Replicas the destination ends with.
    pub fn destination_target(&self) -> i64 {
        self.destination_replicas + self.replicas
    }
}

/// The CloneSet (`apps.kruise.io/<api_version>`) `dst` made from the Deployment `deploy`: its
/// labels, selector, Pod template, minReadySeconds, revisionHistoryLimit, paused and
/// rolling-update budget, with `replicas` (0 for a plain `--create`) and, when a move follows,
/// its record.
///
/// The selector is the Deployment's own: each controller owns only the Pods it controls, and
/// neither claims the other's (a ReplicaSet selects `pod-template-hash` too, which CloneSet Pods
/// lack; Deployment Pods have a controller already, so the CloneSet never adopts them). Both
/// sets of Pods carry the template's labels, so a Service selecting them serves both throughout.
pub fn cloneset_from_deployment(
    deploy: &Value,
    dst: &str,
    api_version: &str,
    replicas: i64,
    record: Option<&Record>,
) -> Result<Value, MigrateError> {
    let src = deploy["metadata"]["name"].as_str().unwrap_or_default();
    let spec = &deploy["spec"];
    if !spec["template"].is_object() || !spec["selector"].is_object() {
        return Err(MigrateError::NotADeployment(src.to_owned()));
    }
    let mut template = spec["template"].clone();
    // A hash the Deployment's ReplicaSet stamps on its Pods, never part of a template it owns.
    if let Some(labels) = template["metadata"]["labels"].as_object_mut() {
        labels.remove(keys::POD_TEMPLATE_HASH_LABEL);
    }
    let mut metadata = json!({"name": dst, "namespace": deploy["metadata"]["namespace"]});
    if let Some(labels) = deploy["metadata"]["labels"].as_object()
        && !labels.is_empty()
    {
        metadata["labels"] = Value::Object(labels.clone());
    }
    if let Some(r) = record {
        metadata["annotations"] = json!({ keys::MIGRATION_ANNOTATION: r.to_annotation() });
    }
    let mut out = json!({
        "apiVersion": format!("{}/{api_version}", keys::APPS_GROUP),
        "kind": "CloneSet",
        "metadata": metadata,
        "spec": {
            "replicas": replicas,
            "selector": spec["selector"],
            "template": template,
            "updateStrategy": update_strategy(spec, api_version),
        }
    });
    for key in ["minReadySeconds", "revisionHistoryLimit"] {
        if let Some(v) = spec.get(key).filter(|v| !v.is_null()) {
            out["spec"][key] = v.clone();
        }
    }
    Ok(out)
}

/// The Deployment's strategy as a CloneSet's: ReCreate (Deployments always replace Pods), the
/// rolling-update budget (Recreate: every Pod at once), paused.
fn update_strategy(spec: &Value, api_version: &str) -> Value {
    let strategy = &spec["strategy"];
    let mut knobs = Map::new();
    if strategy["type"] == "Recreate" {
        knobs.insert("maxUnavailable".into(), json!("100%"));
        knobs.insert("maxSurge".into(), json!(0));
    } else {
        // The Deployment's defaults (25%/25%) when it sets none, so updates pace as before.
        for key in ["maxUnavailable", "maxSurge"] {
            let v = strategy["rollingUpdate"]
                .get(key)
                .filter(|v| !v.is_null())
                .cloned()
                .unwrap_or_else(|| json!("25%"));
            knobs.insert(key.into(), v);
        }
    }
    if spec["paused"] == true {
        knobs.insert("paused".into(), json!(true));
    }
    if api_version == keys::VERSION_V1ALPHA1 {
        knobs.insert("type".into(), json!("ReCreate"));
        Value::Object(knobs)
    } else {
        knobs.insert("podUpdatePolicy".into(), json!("ReCreate"));
        json!({"type": "RollingUpdate", "rollingUpdate": knobs})
    }
}

/// The Advanced StatefulSet (`apps.kruise.io/<api_version>`) that takes over the StatefulSet
/// `sts`'s Pods and revisions once it is deleted with `--cascade=orphan`: the same name (its Pods
/// are NAME-ORDINAL), labels, selector, Pod template (unchanged, so its revision has the
/// StatefulSet's name and the Pods count as updated, not recreated), serviceName, claim
/// templates, pod management, history limit, claim retention, ordinals, and the update strategy
/// as an Advanced StatefulSet spells it (minReadySeconds moves under rollingUpdate, Pods are
/// recreated on a change as before), with the record of the move.
pub fn advanced_statefulset_from_statefulset(
    sts: &Value,
    api_version: &str,
    record: &Record,
) -> Result<Value, MigrateError> {
    let name = sts["metadata"]["name"].as_str().unwrap_or_default();
    let spec = &sts["spec"];
    if !spec["template"].is_object() || !spec["selector"].is_object() {
        return Err(MigrateError::NotAStatefulSet(name.to_owned()));
    }
    let mut metadata = json!({
        "name": name,
        "namespace": sts["metadata"]["namespace"],
        "annotations": { keys::MIGRATION_ANNOTATION: record.to_annotation() },
    });
    if let Some(labels) = sts["metadata"]["labels"].as_object()
        && !labels.is_empty()
    {
        metadata["labels"] = Value::Object(labels.clone());
    }
    let mut out = json!({
        "apiVersion": format!("{}/{api_version}", keys::APPS_GROUP),
        "kind": "StatefulSet",
        "metadata": metadata,
        "spec": {
            "replicas": record.destination_target(),
            "selector": spec["selector"],
            "template": spec["template"],
            "serviceName": spec["serviceName"].as_str().unwrap_or_default(),
            "updateStrategy": statefulset_update_strategy(spec),
        }
    });
    for key in [
        "volumeClaimTemplates",
        "podManagementPolicy",
        "revisionHistoryLimit",
        "persistentVolumeClaimRetentionPolicy",
        "ordinals",
    ] {
        if let Some(v) = spec.get(key).filter(|v| !v.is_null()) {
            out["spec"][key] = v.clone();
        }
    }
    Ok(out)
}

/// A StatefulSet's update strategy as an Advanced StatefulSet's: the same type, partition and
/// maxUnavailable, `minReadySeconds` (a spec field there) and ReCreate, which is what a
/// StatefulSet does to a changed Pod.
fn statefulset_update_strategy(spec: &Value) -> Value {
    let strategy = &spec["updateStrategy"];
    if strategy["type"] == "OnDelete" {
        return json!({"type": "OnDelete"});
    }
    let mut rolling = Map::new();
    for key in ["partition", "maxUnavailable"] {
        if let Some(v) = strategy["rollingUpdate"].get(key).filter(|v| !v.is_null()) {
            rolling.insert(key.into(), v.clone());
        }
    }
    if let Some(v) = spec.get("minReadySeconds").filter(|v| !v.is_null()) {
        rolling.insert("minReadySeconds".into(), v.clone());
    }
    rolling.insert("podUpdatePolicy".into(), json!("ReCreate"));
    json!({"type": "RollingUpdate", "rollingUpdate": rolling})
}

/// The two workloads as the next step needs them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Observed {
    /// The source's `spec.replicas`.
    pub source: i64,
    /// The destination's `spec.replicas`.
    pub destination: i64,
    /// The destination's controller has seen its latest spec and as many Pods are available.
    pub destination_ready: bool,
    /// Its available Pods.
    pub destination_available: i64,
}

/// What the move does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Add Pods to the destination: replicas `from` → `to`.
    ScaleDestination { from: i64, to: i64 },
    /// Wait until the destination's new Pods are available.
    WaitDestination { available: i64, want: i64 },
    /// Remove as many Pods from the source as the destination has added and made available.
    ScaleSource { from: i64, to: i64 },
    /// Both at their targets, the destination's Pods available.
    Done,
}

/// The next step of a move (upstream kruise-tools `control.reconcile`, from live replicas instead
/// of counters kept in memory). The destination grows by at most `max_surge` Pods above the
/// total; the source shrinks only after the destination's Pods are available, by the Pods the
/// destination has over the total, so the Pods ready to serve never fall below the total.
pub fn next_step(record: &Record, now: &Observed, max_surge: i64) -> Step {
    let (src_target, dst_target) = (record.source_target(), record.destination_target());
    let total = src_target + dst_target;
    if !now.destination_ready {
        return Step::WaitDestination {
            available: now.destination_available,
            want: now.destination,
        };
    }
    let over = now.source + now.destination - total;
    if now.source > src_target && over > 0 {
        return Step::ScaleSource {
            from: now.source,
            to: now.source - over.min(now.source - src_target),
        };
    }
    if now.destination < dst_target {
        let room = max_surge.max(1) - over.max(0);
        if room > 0 {
            return Step::ScaleDestination {
                from: now.destination,
                to: now.destination + room.min(dst_target - now.destination),
            };
        }
    }
    Step::Done
}

/// The steps of a whole move from `now`, assuming every wait ends: what `--dry-run` prints.
pub fn plan(record: &Record, now: &Observed, max_surge: i64) -> Vec<Step> {
    let mut steps = Vec::new();
    let mut state = Observed {
        destination_ready: true,
        destination_available: now.destination,
        ..*now
    };
    // Each step moves at least one replica; the bound only guards against a wrong record.
    for _ in 0..(2 * (record.replicas + state.destination + state.source) + 4) {
        match next_step(record, &state, max_surge) {
            Step::Done => break,
            Step::WaitDestination { .. } => break,
            step @ Step::ScaleDestination { to, .. } => {
                steps.push(step);
                state.destination = to;
                state.destination_available = to;
            }
            step @ Step::ScaleSource { to, .. } => {
                steps.push(step);
                state.source = to;
            }
        }
    }
    steps
}

#[cfg(test)]
mod tests {
    use super::*;

    fn statefulset() -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": "db", "namespace": "prod", "labels": {"team": "a"},
                         "uid": "u1", "resourceVersion": "9"},
            "spec": {
                "replicas": 3,
                "serviceName": "db",
                "selector": {"matchLabels": {"app": "db"}},
                "template": {"metadata": {"labels": {"app": "db"}},
                             "spec": {"containers": [{"name": "c", "image": "db:1"}]}},
                "volumeClaimTemplates": [{"metadata": {"name": "data"},
                                          "spec": {"accessModes": ["ReadWriteOnce"]}}],
                "podManagementPolicy": "Parallel",
                "revisionHistoryLimit": 4,
                "minReadySeconds": 5,
                "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Delete", "whenScaled": "Retain"},
                "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 1}}
            },
            "status": {"replicas": 3, "updateRevision": "db-7c9f"}
        })
    }

    /// Everything that decides which Pods and revisions are the set's is carried over unchanged;
    /// the strategy is spelled the Advanced StatefulSet's way; the record says where it came from.
    #[test]
    fn advanced_statefulset_keeps_the_statefulsets_name_template_and_claims() {
        let r = Record::begin("StatefulSet/db", 3, 0, None).expect("record");
        let a = advanced_statefulset_from_statefulset(&statefulset(), "v1beta1", &r)
            .expect("converted");
        let src = statefulset();
        assert_eq!(a["apiVersion"], "apps.kruise.io/v1beta1");
        assert_eq!(a["kind"], "StatefulSet");
        assert_eq!(a["metadata"]["name"], "db");
        assert_eq!(a["metadata"]["namespace"], "prod");
        assert_eq!(a["metadata"]["labels"], json!({"team": "a"}));
        assert!(
            a["metadata"].get("uid").is_none() && a["metadata"].get("resourceVersion").is_none()
        );
        let recorded = Record::read(&a, "db").expect("readable").expect("recorded");
        assert_eq!(recorded, r);
        assert_eq!(a["spec"]["replicas"], 3);
        for key in [
            "selector",
            "template",
            "serviceName",
            "volumeClaimTemplates",
            "podManagementPolicy",
            "revisionHistoryLimit",
            "persistentVolumeClaimRetentionPolicy",
        ] {
            assert_eq!(a["spec"][key], src["spec"][key], "{key}");
        }
        assert_eq!(
            a["spec"]["updateStrategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {
                "partition": 1, "minReadySeconds": 5, "podUpdatePolicy": "ReCreate"}})
        );
        assert!(a.get("status").is_none() && a["spec"].get("minReadySeconds").is_none());
    }

    #[test]
    fn on_delete_stays_on_delete_and_a_non_statefulset_is_refused() {
        let r = Record::begin("StatefulSet/db", 3, 0, None).expect("record");
        let mut src = statefulset();
        src["spec"]["updateStrategy"] = json!({"type": "OnDelete"});
        let a = advanced_statefulset_from_statefulset(&src, "v1beta1", &r).expect("converted");
        assert_eq!(a["spec"]["updateStrategy"], json!({"type": "OnDelete"}));
        src["spec"]["template"] = Value::Null;
        assert_eq!(
            advanced_statefulset_from_statefulset(&src, "v1beta1", &r),
            Err(MigrateError::NotAStatefulSet("db".into()))
        );
    }

    fn deployment() -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "prod", "labels": {"team": "a"},
                         "uid": "u1", "resourceVersion": "9"},
            "spec": {
                "replicas": 4,
                "selector": {"matchLabels": {"app": "web"}},
                "minReadySeconds": 2,
                "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}},
                "template": {"metadata": {"labels": {"app": "web", "pod-template-hash": "x"}},
                             "spec": {"containers": [{"name": "app", "image": "a:1"}]}}
            },
            "status": {"replicas": 4}
        })
    }

    #[test]
    fn cloneset_keeps_selector_template_and_budget() {
        let rec = Record::begin("Deployment/web", 4, 0, None).expect("record");
        let cs = cloneset_from_deployment(&deployment(), "web-cs", "v1beta1", 0, Some(&rec))
            .expect("cloneset");
        assert_eq!(cs["apiVersion"], "apps.kruise.io/v1beta1");
        assert_eq!(cs["metadata"]["name"], "web-cs");
        assert_eq!(cs["metadata"]["namespace"], "prod");
        assert_eq!(cs["metadata"]["labels"], json!({"team": "a"}));
        assert!(cs["metadata"].get("uid").is_none());
        assert_eq!(cs["spec"]["replicas"], 0);
        assert_eq!(
            cs["spec"]["selector"],
            json!({"matchLabels": {"app": "web"}})
        );
        assert_eq!(
            cs["spec"]["template"]["metadata"]["labels"],
            json!({"app": "web"})
        );
        assert_eq!(cs["spec"]["minReadySeconds"], 2);
        assert_eq!(
            cs["spec"]["updateStrategy"],
            json!({"type": "RollingUpdate", "rollingUpdate":
                {"maxUnavailable": 1, "maxSurge": "25%", "podUpdatePolicy": "ReCreate"}})
        );
        let back = Record::read(&cs, "cloneset/web-cs").expect("readable");
        assert_eq!(back, Some(rec));
        assert!(cs.get("status").is_none());
    }

    #[test]
    fn v1alpha1_and_recreate_and_paused() {
        let mut d = deployment();
        d["spec"]["strategy"] = json!({"type": "Recreate"});
        d["spec"]["paused"] = json!(true);
        let cs = cloneset_from_deployment(&d, "web", "v1alpha1", 4, None).expect("cloneset");
        assert_eq!(
            cs["spec"]["updateStrategy"],
            json!({"type": "ReCreate", "maxUnavailable": "100%", "maxSurge": 0, "paused": true})
        );
        assert_eq!(cs["spec"]["replicas"], 4);
        assert!(cs["metadata"].get("annotations").is_none());
        let e =
            cloneset_from_deployment(&json!({"metadata": {"name": "x"}}), "x", "v1beta1", 0, None)
                .unwrap_err();
        assert_eq!(e, MigrateError::NotADeployment("x".into()));
    }

    #[test]
    fn record_refusals() {
        let e = Record::begin("Deployment/web", 3, 0, Some(5)).unwrap_err();
        assert!(e.to_string().contains("--replicas 5"), "{e}");
        let r = Record::begin("Deployment/web", 3, 1, Some(2)).expect("record");
        assert_eq!((r.source_target(), r.destination_target()), (1, 3));
        let e = r
            .check_source("Deployment/api", "cloneset/web")
            .unwrap_err();
        assert!(e.to_string().contains("--src-name web"), "{e}");
        let bad = json!({"metadata": {"annotations": {keys::MIGRATION_ANNOTATION: "{"}}});
        let e = Record::read(&bad, "cloneset/web").unwrap_err();
        assert!(e.to_string().contains("remove it"), "{e}");
    }

    fn at(source: i64, destination: i64) -> Observed {
        Observed {
            source,
            destination,
            destination_ready: true,
            destination_available: destination,
        }
    }

    #[test]
    fn steps_surge_then_shrink() {
        let r = Record::begin("Deployment/web", 4, 0, None).expect("record");
        assert_eq!(
            next_step(&r, &at(4, 0), 2),
            Step::ScaleDestination { from: 0, to: 2 }
        );
        // New Pods not available yet: wait before touching the source.
        let waiting = Observed {
            destination_ready: false,
            destination_available: 1,
            ..at(4, 2)
        };
        assert_eq!(
            next_step(&r, &waiting, 2),
            Step::WaitDestination {
                available: 1,
                want: 2
            }
        );
        assert_eq!(
            next_step(&r, &at(4, 2), 2),
            Step::ScaleSource { from: 4, to: 2 }
        );
        assert_eq!(
            next_step(&r, &at(2, 2), 2),
            Step::ScaleDestination { from: 2, to: 4 }
        );
        assert_eq!(
            next_step(&r, &at(2, 4), 2),
            Step::ScaleSource { from: 2, to: 0 }
        );
        assert_eq!(next_step(&r, &at(0, 4), 2), Step::Done);
    }

    /// A rerun after an interruption at any point continues from the live replicas.
    #[test]
    fn plan_resumes_from_any_point() {
        let r = Record::begin("Deployment/web", 5, 0, None).expect("record");
        assert_eq!(
            plan(&r, &at(5, 0), 2),
            vec![
                Step::ScaleDestination { from: 0, to: 2 },
                Step::ScaleSource { from: 5, to: 3 },
                Step::ScaleDestination { from: 2, to: 4 },
                Step::ScaleSource { from: 3, to: 1 },
                Step::ScaleDestination { from: 4, to: 5 },
                Step::ScaleSource { from: 1, to: 0 },
            ]
        );
        // Interrupted after the destination grew by one only (another max surge before).
        assert_eq!(
            plan(&r, &at(5, 1), 2),
            vec![
                Step::ScaleSource { from: 5, to: 4 },
                Step::ScaleDestination { from: 1, to: 3 },
                Step::ScaleSource { from: 4, to: 2 },
                Step::ScaleDestination { from: 3, to: 5 },
                Step::ScaleSource { from: 2, to: 0 },
            ]
        );
        assert_eq!(plan(&r, &at(0, 5), 2), vec![]);
        // Partial move: 2 of 4, into a destination that had 1.
        let part = Record::begin("Deployment/web", 4, 1, Some(2)).expect("record");
        assert_eq!(
            plan(&part, &at(4, 1), 1),
            vec![
                Step::ScaleDestination { from: 1, to: 2 },
                Step::ScaleSource { from: 4, to: 3 },
                Step::ScaleDestination { from: 2, to: 3 },
                Step::ScaleSource { from: 3, to: 2 },
            ]
        );
    }

    /// Pods that can serve never fall below the total along the plan.
    #[test]
    fn availability_never_drops() {
        for surge in 1..5 {
            for n in 0..7 {
                let r = Record::begin("Deployment/web", n, 0, None).expect("record");
                let mut s = at(n, 0);
                for step in plan(&r, &s, surge) {
                    match step {
                        Step::ScaleDestination { to, .. } => {
                            assert!(to + s.source - n <= surge, "surge {surge}");
                            s.destination = to;
                        }
                        Step::ScaleSource { to, .. } => s.source = to,
                        other => panic!("{other:?}"),
                    }
                    assert!(s.source + s.destination >= n);
                }
                assert_eq!((s.source, s.destination), (0, n));
            }
        }
    }
}
