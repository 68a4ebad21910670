//! ResourceDistribution end to end, against the install from `deploy/` (ResourceDistributionGate
//! on as shipped): a Secret distributed by name and by namespace label reaches every matching
//! namespace, follows an update, is put back when edited or deleted by hand, leaves a namespace
//! whose label stops matching, reaches a namespace created later, never touches a foreign
//! same-named Secret (status and an Event report it), and goes when the distribution is deleted;
//! bad input is refused naming the field. Each test creates its own namespaces and a
//! distribution named after them, and targets nothing else.

use std::time::{Duration, Instant};

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kruise_api::apps::v1alpha1::ResourceDistribution;
use kruise_api::keys;
use kruise_e2e::resourcedistribution::{
    self as rd, create_namespace, delete_namespace, event_notes, secret, secret_in,
};
use kruise_e2e::sidecarset::label_namespace;
use kruise_e2e::{TestNamespace, client, wait_for};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use rand::Rng;
use serde_json::{Value, json};

const SETTLE: Duration = Duration::from_secs(30);
const SECRET: &str = "rd-e2e-secret";

fn run_id() -> String {
    let n: u32 = rand::rng().random_range(0..0xff_ffff);
    format!("{n:06x}")
}

fn data_of(s: &Secret, key: &str) -> Option<String> {
    s.data
        .as_ref()?
        .get(key)
        .map(|ByteString(b)| String::from_utf8_lossy(b).into_owned())
}

/// The hash upstream writes on each copy, worked out here without the product's code: upstream
/// hashes `spec.resource` as the raw bytes its client received (a `runtime.RawExtension` keeps
/// them verbatim), hex SHA-256. Those bytes are the API server's own JSON of the field, so this
/// reads the distribution as raw text, cuts the field out of it and hashes it with `sha256sum`.
/// `None` while the distribution does not exist.
async fn upstream_hash(client: &Client, name: &str) -> kube::Result<Option<String>> {
    let url = format!("/apis/{}/resourcedistributions/{name}", keys::APPS_V1ALPHA1);
    let req = http::Request::get(url)
        .body(Vec::new())
        .map_err(kube::Error::HttpError)?;
    let text = match client.request_text(req).await {
        Ok(text) => text,
        Err(kube::Error::Api(s)) if s.code == 404 => return Ok(None),
        Err(e) => return Err(e),
    };
    let spec = member(&text, "spec").expect("spec in the API server's JSON");
    let raw = member(spec, "resource").expect("spec.resource in the API server's JSON");
    // The cut is the field, whole: it parses to what a parser reads there.
    let parsed: Value = serde_json::from_str(raw).expect("the cut is JSON");
    let whole: Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(parsed, whole["spec"]["resource"], "cut {raw:?}");
    Ok(Some(sha256_hex(raw.as_bytes())))
}

/// The exact text of member `key` of the JSON object `obj` (scanning strings and nesting; the
/// API server writes compact JSON).
fn member<'a>(obj: &'a str, key: &str) -> Option<&'a str> {
    let want = format!("\"{key}\":");
    let b = obj.as_bytes();
    let (mut depth, mut in_str, mut esc) = (0usize, false, false);
    for i in 0..b.len() {
        let c = b[i];
        if in_str {
            match (esc, c) {
                (true, _) => esc = false,
                (false, b'\\') => esc = true,
                (false, b'"') => in_str = false,
                _ => {}
            }
            continue;
        }
        match c {
            b'{' | b'[' => depth += 1,
            b'}' | b']' => depth = depth.checked_sub(1)?,
            b'"' if depth == 1
                && matches!(b[i - 1], b'{' | b',')
                && obj[i..].starts_with(&want) =>
            {
                let start = i + want.len();
                return Some(&obj[start..start + value_len(&obj[start..])?]);
            }
            b'"' => in_str = true,
            _ => {}
        }
    }
    None
}

/// The length of the JSON value `v` starts with.
fn value_len(v: &str) -> Option<usize> {
    let (mut depth, mut in_str, mut esc) = (0usize, false, false);
    for (i, c) in v.bytes().enumerate() {
        if in_str {
            match (esc, c) {
                (true, _) => esc = false,
                (false, b'\\') => esc = true,
                (false, b'"') if depth == 0 => return Some(i + 1),
                (false, b'"') => in_str = false,
                _ => {}
            }
            continue;
        }
        match c {
            b'{' | b'[' => depth += 1,
            b'}' | b']' if depth == 0 => return Some(i),
            b'}' | b']' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i + 1);
                }
            }
            b',' if depth == 0 => return Some(i),
            b'"' => in_str = true,
            _ => {}
        }
    }
    Some(v.len())
}

/// Hex SHA-256 of `bytes`, by coreutils' `sha256sum`.
fn sha256_hex(bytes: &[u8]) -> String {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let mut child = Command::new("sha256sum")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("sha256sum");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(bytes)
        .expect("write to sha256sum");
    let out = child.wait_with_output().expect("sha256sum");
    assert!(out.status.success(), "sha256sum: {out:?}");
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .expect("a digest")
        .to_owned()
}

/// Waits until the copy in `ns` is ours, carries `value` under `key` and the hash of the
/// distribution's current resource; returns it.
async fn wait_copy(client: &Client, name: &str, ns: &str, key: &str, value: &str) -> Secret {
    wait_for(
        &format!("the copy in {ns} with {key}={value}"),
        SETTLE,
        || async {
            let Some(hash) = upstream_hash(client, name).await? else {
                return Ok(None);
            };
            Ok(secret_in(client, ns, SECRET).await?.filter(|s| {
                data_of(s, key).as_deref() == Some(value)
                    && s.annotations().get(keys::RD_RESOURCE_HASH_ANNOTATION) == Some(&hash)
            }))
        },
    )
    .await
    .expect("the distributed copy")
}

async fn wait_gone(client: &Client, ns: &str) {
    wait_for(&format!("no copy in {ns}"), SETTLE, || async {
        Ok(secret_in(client, ns, SECRET).await?.is_none().then_some(()))
    })
    .await
    .expect("the copy removed");
}

async fn wait_status(
    client: &Client,
    name: &str,
    what: &str,
    ok: impl Fn(&ResourceDistribution) -> bool,
) -> ResourceDistribution {
    wait_for(what, SETTLE, || async {
        let d = rd::api(client).get(name).await?;
        let observed = d.status.as_ref().map(|s| s.observed_generation) == d.metadata.generation;
        Ok((observed && ok(&d)).then_some(d))
    })
    .await
    .expect("distribution status")
}

fn condition<'a>(
    d: &'a ResourceDistribution,
    type_: &str,
) -> Option<&'a kruise_api::apps::v1alpha1::ResourceDistributionCondition> {
    d.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
}

#[tokio::test]
async fn secret_reaches_matching_namespaces_follows_updates_and_is_cleaned_up() {
    let client = client().await.expect("cluster");
    let started = Instant::now();
    let id = run_id();
    let group_key = format!("rd-e2e.kruise.io/group-{id}");
    let name = format!("rd-e2e-{id}");
    let mut spaces = Vec::new();
    for part in ["a", "b", "c", "f"] {
        let ns = TestNamespace::create(&client, &format!("rd-e2e-{id}-{part}"))
            .await
            .expect("namespace");
        spaces.push(ns);
    }
    let [by_name, labelled, later_labelled, foreign] = [0, 1, 2, 3].map(|i| spaces[i].name.clone());
    let created_later = format!("rd-e2e-{id}-d");
    label_namespace(&client, &labelled, json!({group_key.as_str(): "on"}))
        .await
        .expect("label");
    // A Secret of the same name someone else owns.
    let foreign_secret: Secret = serde_json::from_value(
        json!({"metadata": {"name": SECRET}, "stringData": {"owner": "someone-else"}}),
    )
    .expect("secret");
    let foreign_secret = Api::<Secret>::namespaced(client.clone(), &foreign)
        .create(&PostParams::default(), &foreign_secret)
        .await
        .expect("foreign secret");

    let targets = json!({
        "includedNamespaces": {"list": [{"name": by_name}, {"name": foreign}]},
        "namespaceLabelSelector": {"matchLabels": {group_key.as_str(): "on"}},
    });
    let created = rd::create(
        &client,
        &rd::new(&name, secret(SECRET, json!({"k": "v1"})), targets).expect("rd"),
    )
    .await
    .expect("create the distribution");
    let rd_uid = created.uid().expect("uid");

    // Reaches the namespace listed by name and the labelled one, with owner, hash and source.
    for ns in [&by_name, &labelled] {
        let copy = wait_copy(&client, &name, ns, "k", "v1").await;
        let owner = copy
            .owner_references()
            .iter()
            .find(|o| o.controller == Some(true))
            .expect("controller reference");
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str(), owner.uid.as_str()),
            (keys::RD_KIND, name.as_str(), rd_uid.as_str())
        );
        assert_eq!(
            copy.annotations().get(keys::RD_SOURCE_ANNOTATION),
            Some(&name)
        );
    }
    // The foreign Secret is reported, never touched; the status counts it as failed.
    let d = wait_status(
        &client,
        &name,
        "desired 3, succeeded 2, conflict in foreign",
        |d| {
            let s = d.status.clone().unwrap_or_default();
            (s.desired, s.succeeded, s.failed) == (3, 2, 1)
                && condition(d, keys::RD_CONDITION_CONFLICT_OCCURRED)
                    .is_some_and(|c| c.status == "True" && c.failed_namespaces == [foreign.clone()])
        },
    )
    .await;
    let status = d.status.clone().unwrap_or_default();
    assert_eq!(status.conditions.len(), 6, "{status:?}");
    for c in &status.conditions {
        if c.type_ != keys::RD_CONDITION_CONFLICT_OCCURRED {
            assert_eq!(
                (c.status.as_str(), c.reason.as_str()),
                ("False", "Succeeded"),
                "{c:?}"
            );
        }
    }
    let untouched = secret_in(&client, &foreign, SECRET)
        .await
        .expect("get")
        .expect("the foreign Secret stays");
    assert_eq!(untouched.uid(), foreign_secret.uid());
    assert_eq!(
        untouched.resource_version(),
        foreign_secret.resource_version()
    );
    assert!(untouched.owner_references().is_empty());
    let notes = wait_for("a ConflictOccurred Event", SETTLE, || async {
        let n = event_notes(&client, &name, keys::RD_CONDITION_CONFLICT_OCCURRED).await?;
        Ok((!n.is_empty()).then_some(n))
    })
    .await
    .expect("conflict event");
    assert!(notes[0].contains(&foreign), "{notes:?}");

    // A current copy is left alone: not rewritten round after round.
    let settled = secret_in(&client, &by_name, SECRET)
        .await
        .expect("get")
        .expect("copy");
    tokio::time::sleep(Duration::from_secs(3)).await;
    let later = secret_in(&client, &by_name, SECRET)
        .await
        .expect("get")
        .expect("copy");
    assert_eq!(
        later.resource_version(),
        settled.resource_version(),
        "a current copy must not be rewritten"
    );

    // An update of the resource reaches the copies in place (same object, new data and hash).
    let before = secret_in(&client, &by_name, SECRET)
        .await
        .expect("get")
        .expect("copy");
    rd::api(&client)
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"resource": {"stringData": {"k": "v2"}}}})),
        )
        .await
        .expect("update the resource");
    let after = wait_copy(&client, &name, &by_name, "k", "v2").await;
    assert_eq!(after.uid(), before.uid(), "updated in place, not recreated");
    wait_copy(&client, &name, &labelled, "k", "v2").await;

    // Edited by hand: put back. Deleted by hand: created again.
    let api = Api::<Secret>::namespaced(client.clone(), &by_name);
    api.patch(
        SECRET,
        &PatchParams::default(),
        &Patch::Merge(&json!({"stringData": {"k": "tampered", "extra": "x"}})),
    )
    .await
    .expect("edit the copy");
    let reverted = wait_for("the edited copy put back", SETTLE, || async {
        Ok(secret_in(&client, &by_name, SECRET)
            .await?
            .filter(|s| data_of(s, "k").as_deref() == Some("v2") && data_of(s, "extra").is_none()))
    })
    .await
    .expect("reverted");
    api.delete(SECRET, &DeleteParams::default())
        .await
        .expect("delete the copy");
    let recreated = wait_for("the deleted copy created again", SETTLE, || async {
        Ok(secret_in(&client, &by_name, SECRET)
            .await?
            .filter(|s| s.uid() != reverted.uid()))
    })
    .await
    .expect("recreated");
    assert_eq!(data_of(&recreated, "k").as_deref(), Some("v2"));

    // Labels move: the newly labelled namespace gets a copy, the unlabelled one loses its copy.
    label_namespace(&client, &later_labelled, json!({group_key.as_str(): "on"}))
        .await
        .expect("label");
    label_namespace(&client, &labelled, json!({group_key.as_str(): null}))
        .await
        .expect("unlabel");
    wait_copy(&client, &name, &later_labelled, "k", "v2").await;
    wait_gone(&client, &labelled).await;

    // A namespace created later with the label gets its copy.
    create_namespace(&client, &created_later, json!({group_key.as_str(): "on"}))
        .await
        .expect("namespace created later");
    wait_copy(&client, &name, &created_later, "k", "v2").await;
    wait_status(&client, &name, "desired 4, succeeded 3", |d| {
        let s = d.status.clone().unwrap_or_default();
        (s.desired, s.succeeded, s.failed) == (4, 3, 1)
    })
    .await;

    // A listed namespace deleted: reported as NamespaceNotExists (upstream's e2e), and failed.
    spaces
        .remove(0)
        .delete()
        .await
        .expect("delete a listed namespace");
    let d = wait_status(
        &client,
        &name,
        "NamespaceNotExists names the deleted namespace",
        |d| {
            condition(d, keys::RD_CONDITION_NAMESPACE_NOT_EXISTS)
                .is_some_and(|c| c.status == "True" && c.failed_namespaces == [by_name.clone()])
        },
    )
    .await;
    let s = d.status.clone().unwrap_or_default();
    assert_eq!((s.desired, s.succeeded, s.failed), (4, 2, 2), "{s:?}");

    // Deleting the distribution removes every copy, and only the copies.
    rd::delete(&client, &name)
        .await
        .expect("delete the distribution");
    for ns in [&later_labelled, &created_later] {
        wait_gone(&client, ns).await;
    }
    let still = secret_in(&client, &foreign, SECRET)
        .await
        .expect("get")
        .expect("the foreign Secret outlives the distribution");
    assert_eq!(still.uid(), foreign_secret.uid());

    delete_namespace(&client, &created_later)
        .await
        .expect("cleanup");
    for ns in spaces {
        ns.delete().await.expect("cleanup");
    }
    eprintln!("resourcedistribution lifecycle: {:?}", started.elapsed());
}

/// The message of a refused create or update.
fn refusal(result: Result<ResourceDistribution, kube::Error>) -> String {
    match result {
        Err(kube::Error::Api(s)) => s.message,
        Ok(d) => panic!("accepted {:?}", d.spec),
        Err(e) => panic!("expected a refusal, got {e}"),
    }
}

#[tokio::test]
async fn bad_input_is_refused_naming_the_field() {
    let client = client().await.expect("cluster");
    let id = run_id();
    let api = rd::api(&client);
    let pp = PostParams::default();
    let name = format!("rd-e2e-bad-{id}");
    let ns = json!({"includedNamespaces": {"list": [{"name": format!("rd-e2e-{id}-none")}]}});

    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}});
    let msg = refusal(
        api.create(&pp, &rd::new(&name, pod, ns.clone()).expect("rd"))
            .await,
    );
    assert!(msg.contains("spec.resource.kind"), "{msg}");
    assert!(
        msg.contains("only support v1 Secret and v1 ConfigMap"),
        "{msg}"
    );

    let bad_ns = json!({"includedNamespaces": {"list": [{"name": "Not_A_Namespace"}]},
        "excludedNamespaces": {"list": [{"name": "x"}]}});
    let msg = refusal(
        api.create(
            &pp,
            &rd::new(&name, secret(SECRET, json!({})), bad_ns).expect("rd"),
        )
        .await,
    );
    assert!(
        msg.contains("spec.targets.includedNamespaces.list[0].name"),
        "{msg}"
    );

    let both = json!({"includedNamespaces": {"list": [{"name": "x"}]},
        "excludedNamespaces": {"list": [{"name": "x"}]}});
    let msg = refusal(
        api.create(
            &pp,
            &rd::new(&name, secret(SECRET, json!({})), both).expect("rd"),
        )
        .await,
    );
    assert!(
        msg.contains("spec.targets") && msg.contains("ambiguous"),
        "{msg}"
    );

    // The resource's kind and name never change.
    let ok = api
        .create(
            &pp,
            &rd::new(&name, secret(SECRET, json!({"k": "v"})), ns).expect("rd"),
        )
        .await
        .expect("a valid distribution");
    let renamed: Value = json!({"spec": {"resource": {"metadata": {"name": "another"}}}});
    let msg = match api
        .patch(&name, &PatchParams::default(), &Patch::Merge(&renamed))
        .await
    {
        Err(kube::Error::Api(s)) => s.message,
        other => panic!("rename accepted: {other:?}"),
    };
    assert!(msg.contains("spec.resource"), "{msg}");
    assert!(msg.contains("immutable"), "{msg}");
    rd::delete(&client, &ok.name_any()).await.expect("cleanup");
}

/// `kubectl kruise distribution status NAME`: a row per namespace, where the copy landed, where
/// a foreign object blocks it and where the namespace is missing; exit 1 until all landed.
#[tokio::test]
async fn cli_distribution_status_shows_where_it_landed_and_failed() {
    let client = client().await.expect("cluster");
    let id = run_id();
    let name = format!("rd-e2e-cli-{id}");
    let ok = TestNamespace::create(&client, &format!("rd-e2e-cli-{id}-ok"))
        .await
        .expect("namespace");
    let blocked = TestNamespace::create(&client, &format!("rd-e2e-cli-{id}-blocked"))
        .await
        .expect("namespace");
    let missing = format!("rd-e2e-cli-{id}-missing");
    let foreign: Secret =
        serde_json::from_value(json!({"metadata": {"name": SECRET}, "stringData": {"a": "b"}}))
            .expect("secret");
    blocked
        .api::<Secret>()
        .create(&PostParams::default(), &foreign)
        .await
        .expect("foreign secret");
    let targets = json!({"includedNamespaces": {"list": [
        {"name": ok.name}, {"name": blocked.name}, {"name": missing}]}});
    rd::create(
        &client,
        &rd::new(&name, secret(SECRET, json!({"k": "v"})), targets).expect("rd"),
    )
    .await
    .expect("distribution");
    wait_copy(&client, &name, &ok.name, "k", "v").await;
    wait_status(&client, &name, "desired 3, succeeded 1", |d| {
        let s = d.status.clone().unwrap_or_default();
        (s.desired, s.succeeded, s.failed) == (3, 1, 2)
    })
    .await;

    let kruise = kruise_e2e::cli::Kruise::new(&ok.name).expect("kubectl-kruise");
    let run = kruise
        .run(&["distribution", "status", &name, "-o", "json"])
        .await
        .expect("run");
    assert_eq!(run.code, Some(1), "not every namespace has its copy: {run}");
    let report: Value = serde_json::from_str(&run.stdout).expect("JSON report");
    assert_eq!(
        (&report["desired"], &report["succeeded"], &report["failed"]),
        (&json!(3), &json!(1), &json!(2)),
        "{run}"
    );
    let state = |ns: &str| {
        report["namespaces"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|r| r["namespace"] == ns)
            .map(|r| r["state"].as_str().unwrap_or_default().to_owned())
    };
    assert_eq!(state(&ok.name).as_deref(), Some("distributed"), "{run}");
    assert_eq!(state(&blocked.name).as_deref(), Some("conflict"), "{run}");
    assert_eq!(
        state(&missing).as_deref(),
        Some("namespace-missing"),
        "{run}"
    );

    let text = kruise
        .run(&["distribution", "status", &name])
        .await
        .expect("run");
    assert!(
        text.stdout.starts_with(&format!(
            "ResourceDistribution {name}: Secret {SECRET} in 1 of 3 namespaces"
        )),
        "{text}"
    );
    assert!(text.stdout.contains("conflict"), "{text}");
    let unknown = kruise
        .run(&["distribution", "status", &format!("{name}-nope")])
        .await
        .expect("run");
    assert_eq!(unknown.code, Some(6), "{unknown}");

    rd::delete(&client, &name).await.expect("cleanup");
    ok.delete().await.expect("cleanup");
    blocked.delete().await.expect("cleanup");
}

/// A ConfigMap is distributed the same way, and goes with its distribution.
#[tokio::test]
async fn configmap_is_distributed_and_removed_with_its_distribution() {
    use k8s_openapi::api::core::v1::ConfigMap;
    let client = client().await.expect("cluster");
    let id = run_id();
    let name = format!("rd-e2e-cm-{id}");
    let target = TestNamespace::create(&client, &format!("rd-e2e-cm-{id}"))
        .await
        .expect("namespace");
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "rd-e2e-config", "labels": {"app": "game"}},
        "data": {"player_initial_lives": "3"}});
    let targets = json!({"includedNamespaces": {"list": [{"name": target.name}]}});
    let created = rd::create(&client, &rd::new(&name, cm, targets).expect("rd"))
        .await
        .expect("distribution");
    let api = target.api::<ConfigMap>();
    let copy = wait_for("the ConfigMap copy", SETTLE, || async {
        Ok(api.get_opt("rd-e2e-config").await?)
    })
    .await
    .expect("copy");
    assert_eq!(
        copy.data
            .as_ref()
            .and_then(|d| d.get("player_initial_lives")),
        Some(&"3".to_owned())
    );
    assert_eq!(copy.labels().get("app"), Some(&"game".to_owned()));
    assert_eq!(
        copy.annotations().get(keys::RD_SOURCE_ANNOTATION),
        Some(&name)
    );
    assert_eq!(
        copy.owner_references().first().map(|o| o.uid.clone()),
        created.uid()
    );
    wait_status(&client, &name, "desired 1, succeeded 1", |d| {
        let s = d.status.clone().unwrap_or_default();
        (s.desired, s.succeeded, s.failed) == (1, 1, 0)
    })
    .await;
    rd::delete(&client, &name).await.expect("delete");
    wait_for("the ConfigMap copy gone", SETTLE, || async {
        Ok(api.get_opt("rd-e2e-config").await?.is_none().then_some(()))
    })
    .await
    .expect("gone");
    target.delete().await.expect("cleanup");
}
