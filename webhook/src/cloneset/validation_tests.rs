//! One test per validation rule, each checking the exact message a user sees.

use serde_json::{Value, json};

use crate::review::admit;
use crate::review::tests::{response, review_body};

use super::validation::validate;

fn beta() -> Value {
    json!({"apiVersion": "apps.kruise.io/v1beta1", "kind": "CloneSet",
        "metadata": {"name": "cs", "namespace": "default"},
        "spec": {"replicas": 3,
            "selector": {"matchLabels": {"app": "a"}},
            "template": {"metadata": {"labels": {"app": "a"}},
                "spec": {"containers": [{"name": "c", "image": "nginx:1"}]}},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {
                "podUpdatePolicy": "ReCreate", "partition": 0,
                "maxUnavailable": "20%", "maxSurge": 0}}}})
}

fn alpha() -> Value {
    let mut cs = beta();
    cs["apiVersion"] = json!("apps.kruise.io/v1alpha1");
    cs["spec"]["updateStrategy"] =
        json!({"type": "ReCreate", "partition": 0, "maxUnavailable": "20%", "maxSurge": 0});
    cs
}

fn run(op: &str, version: &str, obj: Option<Value>, old: Option<Value>) -> Value {
    let body = review_body(
        op,
        ("apps.kruise.io", version, "CloneSet"),
        "clonesets",
        obj,
        old,
    );
    response(&admit(&body, validate))
}

fn message(op: &str, version: &str, obj: Value, old: Option<Value>) -> String {
    let r = run(op, version, Some(obj), old);
    assert_eq!(r["allowed"], false, "expected denial: {r}");
    assert_eq!(r["status"]["code"], 422);
    r["status"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn create_beta(mutate: impl FnOnce(&mut Value)) -> String {
    let mut cs = beta();
    mutate(&mut cs);
    message("CREATE", "v1beta1", cs, None)
}

#[test]
fn valid_objects_are_allowed() {
    assert_eq!(
        run("CREATE", "v1beta1", Some(beta()), None)["allowed"],
        true
    );
    assert_eq!(
        run("CREATE", "v1alpha1", Some(alpha()), None)["allowed"],
        true
    );
    assert_eq!(
        run("UPDATE", "v1beta1", Some(beta()), Some(beta()))["allowed"],
        true
    );
}

#[test]
fn negative_replicas() {
    assert_eq!(
        create_beta(|cs| cs["spec"]["replicas"] = json!(-1)),
        "spec.replicas: Invalid value: -1: must be greater than or equal to 0"
    );
}

#[test]
fn negative_revision_history_limit() {
    assert_eq!(
        create_beta(|cs| cs["spec"]["revisionHistoryLimit"] = json!(-1)),
        "spec.revisionHistoryLimit: Invalid value: -1: must be greater than or equal to 0"
    );
    assert_eq!(
        create_beta(|cs| cs["spec"]["revisionHistoryLimit"] = json!("ten")),
        "spec.revisionHistoryLimit: Invalid value: \"ten\": must be a 32-bit integer"
    );
    let mut cs = beta();
    cs["spec"]["revisionHistoryLimit"] = json!(0);
    assert_eq!(run("CREATE", "v1beta1", Some(cs), None)["allowed"], true);
}

#[test]
fn missing_selector() {
    assert_eq!(
        create_beta(|cs| {
            cs["spec"].as_object_mut().map(|s| s.remove("selector"));
        }),
        "spec.selector: Required value"
    );
}

#[test]
fn empty_selector() {
    assert_eq!(
        create_beta(|cs| cs["spec"]["selector"] = json!({})),
        "spec.selector: Invalid value: {}: empty selector is invalid for cloneset"
    );
}

#[test]
fn selector_not_matching_template() {
    assert_eq!(
        create_beta(|cs| cs["spec"]["template"]["metadata"]["labels"] = json!({"app": "b"})),
        "spec.template.metadata.labels: Invalid value: {\"app\":\"b\"}: `selector` does not match template `labels`"
    );
}

#[test]
fn bad_selector_operator() {
    assert_eq!(
        create_beta(|cs| cs["spec"]["selector"] =
            json!({"matchExpressions": [{"key": "app", "operator": "Is", "values": ["a"]}]})),
        "spec.selector.matchExpressions[0].operator: Invalid value: \"Is\": not a valid selector operator"
    );
}

#[test]
fn partition_not_int_or_percent() {
    assert_eq!(
        create_beta(|cs| cs["spec"]["updateStrategy"]["rollingUpdate"]["partition"] = json!("3")),
        "spec.updateStrategy.rollingUpdate.partition: Invalid value: \"3\": must be an integer or a percentage like \"10%\""
    );
}

#[test]
fn negative_partition() {
    assert_eq!(
        create_beta(|cs| cs["spec"]["updateStrategy"]["rollingUpdate"]["partition"] = json!(-2)),
        "spec.updateStrategy.rollingUpdate.partition: Invalid value: -2: must be greater than or equal to 0"
    );
}

#[test]
fn max_unavailable_over_100_percent() {
    assert_eq!(
        create_beta(
            |cs| cs["spec"]["updateStrategy"]["rollingUpdate"]["maxUnavailable"] = json!("150%")
        ),
        "spec.updateStrategy.rollingUpdate.maxUnavailable: Invalid value: \"150%\": must be a percentage between 0% and 100%"
    );
}

#[test]
fn max_unavailable_and_max_surge_both_zero() {
    assert_eq!(
        create_beta(
            |cs| cs["spec"]["updateStrategy"]["rollingUpdate"]["maxUnavailable"] = json!(0)
        ),
        "spec.updateStrategy.rollingUpdate.maxUnavailable: Invalid value: 0: maxUnavailable and maxSurge should not both be less than 1"
    );
}

#[test]
fn zero_percent_rounds_to_zero_but_zero_replicas_is_fine() {
    let mut cs = beta();
    cs["spec"]["replicas"] = json!(0);
    cs["spec"]["updateStrategy"]["rollingUpdate"]["maxUnavailable"] = json!("0%");
    assert_eq!(run("CREATE", "v1beta1", Some(cs), None)["allowed"], true);
}

#[test]
fn max_surge_with_in_place_only() {
    assert_eq!(
        create_beta(|cs| {
            let ru = &mut cs["spec"]["updateStrategy"]["rollingUpdate"];
            ru["podUpdatePolicy"] = json!("InPlaceOnly");
            ru["maxSurge"] = json!(1);
        }),
        "spec.updateStrategy.rollingUpdate.maxSurge: Invalid value: 1: can not use maxSurge with podUpdatePolicy InPlaceOnly"
    );
}

#[test]
fn unknown_pod_update_policy() {
    assert_eq!(
        create_beta(
            |cs| cs["spec"]["updateStrategy"]["rollingUpdate"]["podUpdatePolicy"] =
                json!("Sometimes")
        ),
        "spec.updateStrategy.rollingUpdate.podUpdatePolicy: Invalid value: \"Sometimes\": must be 'ReCreate', 'InPlaceIfPossible' or 'InPlaceOnly'"
    );
}

#[test]
fn unknown_update_strategy_type() {
    assert_eq!(
        create_beta(|cs| cs["spec"]["updateStrategy"]["type"] = json!("InPlaceOnly")),
        "spec.updateStrategy.type: Invalid value: \"InPlaceOnly\": must be 'RollingUpdate' or 'OnDelete'"
    );
}

#[test]
fn duplicated_pods_to_delete() {
    assert_eq!(
        create_beta(|cs| cs["spec"]["scaleStrategy"] = json!({"podsToDelete": ["p1", "p2", "p1"]})),
        "spec.scaleStrategy.podsToDelete: Invalid value: [\"p1\",\"p2\",\"p1\"]: duplicated items [p1]"
    );
}

#[test]
fn restart_policy_must_be_always() {
    assert_eq!(
        create_beta(|cs| cs["spec"]["template"]["spec"]["restartPolicy"] = json!("Never")),
        "spec.template.spec.restartPolicy: Unsupported value: \"Never\": supported values: \"Always\""
    );
}

#[test]
fn active_deadline_forbidden() {
    assert_eq!(
        create_beta(|cs| cs["spec"]["template"]["spec"]["activeDeadlineSeconds"] = json!(5)),
        "spec.template.spec.activeDeadlineSeconds: Forbidden: activeDeadlineSeconds in cloneset is not Supported"
    );
}

#[test]
fn containers_required() {
    assert_eq!(
        create_beta(|cs| cs["spec"]["template"]["spec"]["containers"] = json!([])),
        "spec.template.spec.containers: Required value"
    );
}

#[test]
fn duplicate_container_names() {
    assert_eq!(
        create_beta(|cs| cs["spec"]["template"]["spec"]["containers"] = json!([
            {"name": "c", "image": "a"}, {"name": "c", "image": "b"}])),
        "spec.template.spec.containers[1].name: Invalid value: \"c\": Duplicate value"
    );
}

#[test]
fn priority_strategy_both_kinds() {
    assert_eq!(
        create_beta(
            |cs| cs["spec"]["updateStrategy"]["rollingUpdate"]["priorityStrategy"] = json!({
            "weightPriority": [{"weight": 10, "matchSelector": {"matchLabels": {"a": "b"}}}],
            "orderPriority": [{"orderedKey": "k"}]})
        ),
        "spec.updateStrategy.rollingUpdate.priorityStrategy: Required value: only one of weightPriority and orderPriority can be used"
    );
}

#[test]
fn scatter_strategy_duplicate() {
    assert_eq!(
        create_beta(
            |cs| cs["spec"]["updateStrategy"]["rollingUpdate"]["scatterStrategy"] =
                json!([{"key": "k", "value": "v"}, {"key": "k", "value": "v"}])
        ),
        "spec.updateStrategy.rollingUpdate.scatterStrategy: Required value: duplicated key=k value=v"
    );
}

#[test]
fn image_predownload_parallelism_percent() {
    assert_eq!(
        create_beta(
            |cs| cs["spec"]["updateStrategy"]["rollingUpdate"]["inPlaceUpdateStrategy"] =
                json!({"imagePreDownloadParallelism": "50%"})
        ),
        "spec.updateStrategy.rollingUpdate.inPlaceUpdateStrategy.imagePreDownloadParallelism: Invalid value: \"50%\": imagePreDownloadParallelism does not support percentage value"
    );
}

#[test]
fn progress_deadline_not_above_min_ready() {
    assert_eq!(
        create_beta(|cs| {
            cs["spec"]["minReadySeconds"] = json!(30);
            cs["spec"]["progressDeadlineSeconds"] = json!(30);
        }),
        "spec.progressDeadlineSeconds: Invalid value: 30: must be greater than minReadySeconds"
    );
}

#[test]
fn bad_name() {
    assert_eq!(
        create_beta(|cs| cs["metadata"]["name"] = json!("Bad_Name")),
        "metadata.name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character"
    );
}

#[test]
fn several_errors_are_aggregated() {
    assert_eq!(
        create_beta(|cs| {
            cs["spec"]["replicas"] = json!(-1);
            cs["spec"]["template"]["spec"]["restartPolicy"] = json!("Never");
        }),
        "[spec.replicas: Invalid value: -1: must be greater than or equal to 0, spec.template.spec.restartPolicy: Unsupported value: \"Never\": supported values: \"Always\"]"
    );
}

#[test]
fn selector_is_immutable() {
    let old = beta();
    let mut new = beta();
    new["spec"]["selector"] = json!({"matchLabels": {"app": "a", "x": "y"}});
    new["spec"]["template"]["metadata"]["labels"] = json!({"app": "a", "x": "y"});
    assert_eq!(
        message("UPDATE", "v1beta1", new, Some(old)),
        "spec: Forbidden: updates to cloneset spec for fields other than 'replicas', 'template', 'lifecycle', 'scaleStrategy', 'updateStrategy', 'minReadySeconds', 'progressDeadlineSeconds', 'volumeClaimTemplates' and 'revisionHistoryLimit' are forbidden"
    );
}

#[test]
fn in_place_only_allows_image_changes_only() {
    let mut old = beta();
    old["spec"]["updateStrategy"]["rollingUpdate"]["podUpdatePolicy"] = json!("InPlaceOnly");
    let mut images = old.clone();
    images["spec"]["template"]["spec"]["containers"][0]["image"] = json!("nginx:2");
    assert_eq!(
        run("UPDATE", "v1beta1", Some(images), Some(old.clone()))["allowed"],
        true
    );
    let mut env = old.clone();
    env["spec"]["template"]["spec"]["containers"][0]["env"] = json!([{"name": "A", "value": "1"}]);
    assert_eq!(
        message("UPDATE", "v1beta1", env, Some(old)),
        "spec: Forbidden: only allowed to update images in spec for InPlaceOnly, but found add /containers/0/env"
    );
}

#[test]
fn alpha_paths_are_flat() {
    let mut cs = alpha();
    cs["spec"]["updateStrategy"]["type"] = json!("InPlaceOnly");
    cs["spec"]["updateStrategy"]["maxSurge"] = json!("50%");
    assert_eq!(
        message("CREATE", "v1alpha1", cs, None),
        "spec.updateStrategy.maxSurge: Invalid value: \"50%\": can not use maxSurge with strategy type InPlaceOnly"
    );
    let mut cs = alpha();
    cs["spec"]["updateStrategy"]["type"] = json!("Rolling");
    assert_eq!(
        message("CREATE", "v1alpha1", cs, None),
        "spec.updateStrategy.type: Invalid value: \"Rolling\": must be 'ReCreate', 'InPlaceIfPossible', 'InPlaceOnly' or 'OnDelete'"
    );
}

#[test]
fn wrongly_typed_replicas_is_reported_not_a_decode_error() {
    assert_eq!(
        create_beta(|cs| cs["spec"]["replicas"] = json!("three")),
        "spec.replicas: Invalid value: \"three\": must be a 32-bit integer"
    );
}

/// The field rules admit every DELETE: deletion protection (`crate::deletionprotection`) answers
/// DELETEs on this path first, with the feature gates (its tests cover CloneSets).
#[test]
fn delete_is_left_to_deletion_protection() {
    let mut cs = beta();
    cs["metadata"]["labels"] = json!({"policy.kruise.io/delete-protection": "Always"});
    assert_eq!(run("DELETE", "v1beta1", None, Some(cs))["allowed"], true);
}

#[test]
fn volume_claim_template_clashes_with_volume() {
    assert_eq!(
        create_beta(|cs| {
            cs["spec"]["template"]["spec"]["volumes"] = json!([{"name": "data", "emptyDir": {}}]);
            cs["spec"]["volumeClaimTemplates"] = json!([{"metadata": {"name": "data"}}]);
        }),
        "spec.volumeClaimTemplates[0].metadata.name: Invalid value: \"data\": Duplicate value: volumeClaimTemplates and template volumes share one namespace"
    );
}

#[test]
fn volume_claim_template_needs_a_name() {
    assert_eq!(
        create_beta(|cs| cs["spec"]["volumeClaimTemplates"] = json!([{"spec": {}}])),
        "spec.volumeClaimTemplates[0].metadata.name: Required value"
    );
}
