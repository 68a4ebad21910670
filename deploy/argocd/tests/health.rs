//! Runs every health script against its `health_test.yaml` fixtures (Argo CD's test format) and
//! checks that the `argocd-cm` patch is the one the scripts render.

use std::collections::BTreeSet;

use kruise_argocd::{Health, argocd_cm_patch, load_yaml, root, run, scripts};

/// Every Kruise kind a user deploys or watches through Argo CD.
const KINDS: &[&str] = &[
    "apps.kruise.io/AdvancedCronJob",
    "apps.kruise.io/BroadcastJob",
    "apps.kruise.io/CloneSet",
    "apps.kruise.io/ContainerRecreateRequest",
    "apps.kruise.io/DaemonSet",
    "apps.kruise.io/EphemeralJob",
    "apps.kruise.io/ImageListPullJob",
    "apps.kruise.io/ImagePullJob",
    "apps.kruise.io/NodeImage",
    "apps.kruise.io/PersistentPodState",
    "apps.kruise.io/PodProbeMarker",
    "apps.kruise.io/ResourceDistribution",
    "apps.kruise.io/SidecarSet",
    "apps.kruise.io/StatefulSet",
    "apps.kruise.io/UnitedDeployment",
    "apps.kruise.io/WorkloadSpread",
    "policy.kruise.io/PodUnavailableBudget",
];

/// The states each kind's fixtures must reach (the rollout kinds: every one Argo CD knows but
/// Missing, which Argo CD decides itself).
fn required_states(kind: &str) -> &'static [&'static str] {
    match kind {
        "CloneSet" | "StatefulSet" | "UnitedDeployment" => {
            &["Healthy", "Progressing", "Degraded", "Suspended"]
        }
        "DaemonSet" | "SidecarSet" => &["Healthy", "Progressing", "Suspended"],
        "AdvancedCronJob" => &["Healthy", "Suspended"],
        "BroadcastJob" | "EphemeralJob" => &["Healthy", "Progressing", "Degraded", "Suspended"],
        "PersistentPodState" | "PodProbeMarker" | "WorkloadSpread" => &["Healthy", "Progressing"],
        _ => &["Healthy", "Progressing", "Degraded"],
    }
}

#[test]
fn every_kind_has_a_script() {
    let found: BTreeSet<String> = scripts(&root())
        .expect("scripts")
        .iter()
        .map(|s| format!("{}/{}", s.group, s.kind))
        .collect();
    let want: BTreeSet<String> = KINDS.iter().map(|k| k.to_string()).collect();
    assert_eq!(found, want);
}

#[test]
fn scripts_pass_their_fixtures() {
    let mut failures = Vec::new();
    let mut cases = 0;
    for script in scripts(&root()).expect("scripts") {
        let tests = load_yaml(&script.dir.join("health_test.yaml")).expect("health_test.yaml");
        let mut states = BTreeSet::new();
        for case in tests["tests"].as_array().expect("tests: a list") {
            let input = case["inputPath"].as_str().expect("inputPath");
            let want = Health {
                status: case["healthStatus"]["status"].as_str().unwrap_or("").into(),
                message: case["healthStatus"]["message"]
                    .as_str()
                    .unwrap_or("")
                    .into(),
            };
            let obj = load_yaml(&script.dir.join(input)).expect("fixture");
            assert_eq!(
                obj["kind"].as_str(),
                Some(script.kind.as_str()),
                "{}/{input}: fixture of another kind",
                script.kind
            );
            cases += 1;
            states.insert(want.status.clone());
            match run(&script.lua, &obj) {
                Ok(got) if got == want => {}
                Ok(got) => failures.push(format!(
                    "{}/{input}: got {got:?}, want {want:?}",
                    script.kind
                )),
                Err(e) => failures.push(format!("{}/{input}: {e}", script.kind)),
            }
        }
        for state in required_states(&script.kind) {
            assert!(
                states.contains(*state),
                "{}: no fixture reaches {state}",
                script.kind
            );
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(cases >= KINDS.len() * 2, "only {cases} fixtures");
}

/// A script must not fail on an object with no spec and no status (as Argo CD may see one
/// just created): it answers Progressing or another state, never a Lua error.
#[test]
fn scripts_survive_a_bare_object() {
    for script in scripts(&root()).expect("scripts") {
        let obj = serde_json::json!({
            "apiVersion": format!("{}/v1alpha1", script.group),
            "kind": script.kind,
            "metadata": {"name": "bare", "namespace": "default", "generation": 1},
        });
        let got = run(&script.lua, &obj).unwrap_or_else(|e| panic!("{}: {e}", script.kind));
        assert!(
            ["Healthy", "Progressing", "Degraded", "Suspended", "Unknown"]
                .contains(&got.status.as_str()),
            "{}: {got:?}",
            script.kind
        );
    }
}

#[test]
fn argocd_cm_patch_is_current() {
    let want = argocd_cm_patch(&scripts(&root()).expect("scripts"));
    let path = root().join("argocd-cm-patch.yaml");
    if std::env::var_os("UPDATE_ARGOCD_CM").is_some() {
        std::fs::write(&path, &want).expect("write argocd-cm-patch.yaml");
    }
    let got = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        got == want,
        "argocd-cm-patch.yaml is stale: UPDATE_ARGOCD_CM=1 cargo test -p kruise-argocd"
    );
    // The patch is what Argo CD reads: it must parse, with one key per script.
    let parsed = load_yaml(&path).expect("patch parses");
    let keys = parsed["data"].as_object().expect("data").len();
    assert_eq!(keys, KINDS.len());
}
