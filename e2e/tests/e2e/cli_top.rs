//! `kubectl-kruise top`: the CPU and memory of a workload's Pods per revision, read from the
//! resource metrics API (metrics-server, which `make cluster-up` runs as an add-on), and the
//! clear refusal when that API is not served.
//!
//! Needs the binary: `cargo build -p kubectl-kruise`.

use std::time::Duration;

use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kruise_api::keys::k8s::METRICS_APISERVICE;
use kruise_e2e::plugin::{Fixture, assert_code, assert_stdout};
use kruise_e2e::{cloneset, wait_for};
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use serde_json::{Value, json};

const OK: i32 = 0;
const FAILED: i32 = 1;
/// metrics-server scrapes every 15 s and reports a Pod once it has two samples of it.
const SCRAPED: Duration = Duration::from_secs(90);

/// Whether the cluster registers the metrics API (the local cluster does; a cluster without
/// metrics-server, e.g. the kind one, does not).
async fn metrics_api(fx: &Fixture) -> Option<APIService> {
    let api: Api<APIService> = Api::all(fx.client.clone());
    api.get_opt(METRICS_APISERVICE)
        .await
        .expect("read the metrics APIService")
}

/// The `top -o json` row of `target`.
fn workload<'a>(doc: &'a Value, target: &str) -> Option<&'a Value> {
    doc["workloads"]
        .as_array()?
        .iter()
        .find(|w| w["target"] == target)
}

/// A CloneSet of 3 mid-rollout (partition 2: one Pod on the new revision, two on the old one):
/// `top` shows both revisions, the update one marked as such and first, each with every Pod
/// measured and a non-zero usage; the text table lists both.
#[tokio::test]
async fn top_compares_the_revisions_of_a_partitioned_cloneset() {
    let fx = Fixture::new("e2e-top").await;
    if metrics_api(&fx).await.is_none() {
        // No metrics-server here: the refusal is what there is to check.
        eprintln!("this cluster serves no metrics.k8s.io: checking the refusal instead");
        let run = fx.run(&["top"]).await;
        assert_code(&run, FAILED);
        return;
    }
    let api = cloneset::api(&fx.client, &fx.ns.name);
    let cs = cloneset::new(
        "web",
        3,
        "v1",
        json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 2}}),
    )
    .expect("CloneSet");
    api.create(&PostParams::default(), &cs)
        .await
        .expect("create CloneSet");
    cloneset::wait_rolled_out(&api, "web", 3, Duration::from_secs(120))
        .await
        .expect("3 Pods ready on v1");
    cloneset::set_image(&api, "web", "v2")
        .await
        .expect("set image v2");
    let cs = cloneset::wait_status(
        &api,
        "web",
        "one Pod updated and all three ready",
        Duration::from_secs(120),
        |cs| {
            cloneset::status_i64(cs, "updatedReadyReplicas") == 1
                && cloneset::status_i64(cs, "readyReplicas") == 3
        },
    )
    .await
    .expect("partitioned rollout");
    let update = cloneset::status_str(&cs, "updateRevision").to_owned();
    let current = cloneset::status_str(&cs, "currentRevision").to_owned();
    assert_ne!(update, current, "two revisions coexist");

    // The last run, for the failure message: a run that fails (an API hiccup) is retried.
    let last = std::sync::Mutex::new(String::from("no run yet"));
    let measured = wait_for(
        "top to measure every Pod of both revisions",
        SCRAPED,
        || {
            let kk = fx.kk.clone();
            let last = &last;
            async move {
                let run = kk.run(&["top", "cloneset/web", "-o", "json"]).await?;
                if let Ok(mut l) = last.lock() {
                    *l = run.to_string();
                }
                if run.code != Some(OK) {
                    return Ok(None);
                }
                let doc: Value = serde_json::from_str(run.stdout.trim())?;
                let measured = workload(&doc, "cloneset/web")
                    .and_then(|w| w["revisions"].as_array())
                    .is_some_and(|revs| {
                        revs.len() == 2
                            && revs.iter().all(|r| {
                                r["podsWithMetrics"] == r["pods"]
                                    && (r["cpuMillicores"].as_f64() > Some(0.0)
                                        || r["memoryMiB"].as_f64() > Some(0.0))
                            })
                    });
                Ok(measured.then_some(doc))
            }
        },
    )
    .await;
    let doc = match measured {
        Ok(doc) => doc,
        Err(e) => {
            let last = last.lock().map(|l| l.clone()).unwrap_or_default();
            panic!("{e}; the last run: {last}")
        }
    };
    let w = workload(&doc, "cloneset/web").expect("the CloneSet's row");
    assert_eq!(w["revisions"][0]["revision"], update.as_str(), "{doc}");
    assert_eq!(w["revisions"][0]["role"], "update", "{doc}");
    assert_eq!(w["revisions"][0]["pods"], 1, "{doc}");
    assert_eq!(w["revisions"][1]["revision"], current.as_str(), "{doc}");
    assert_eq!(w["revisions"][1]["role"], "current", "{doc}");
    assert_eq!(w["revisions"][1]["pods"], 2, "{doc}");
    // A test Pod's working set can be under a MiB, and an idle one's CPU a fraction of a
    // millicore: the averages are there, each revision measured something (checked above).
    for r in w["revisions"].as_array().into_iter().flatten() {
        assert!(r["avgCpuMillicores"].is_f64(), "{doc}");
        assert!(r["avgMemoryMiB"].is_f64(), "{doc}");
    }

    // The namespace's table: both revisions of the CloneSet, on their own rows.
    let run = fx.run(&["top"]).await;
    assert_code(&run, OK);
    assert_stdout(&run, "CPU/POD(m)");
    for (rev, role) in [(&update, "update"), (&current, "current")] {
        assert!(
            run.stdout.lines().any(|l| l.starts_with("cloneset/web")
                && l.contains(rev.as_str())
                && l.contains(role)),
            "no row for {role} revision {rev}: {run}"
        );
    }
}

/// Puts the metrics APIService back when dropped, also when the test panics, and waits until it
/// is Available again: a registered but unavailable API would stall namespace deletion for the
/// tests that follow.
struct ApiServiceBack {
    saved: Option<APIService>,
}

impl ApiServiceBack {
    async fn restore(client: &kube::Client, mut svc: APIService) -> kruise_e2e::Result<()> {
        let api: Api<APIService> = Api::all(client.clone());
        svc.metadata = kube::api::ObjectMeta {
            name: svc.metadata.name.take(),
            labels: svc.metadata.labels.take(),
            annotations: svc.metadata.annotations.take(),
            ..Default::default()
        };
        svc.status = None;
        if api.get_opt(METRICS_APISERVICE).await?.is_none() {
            api.create(&PostParams::default(), &svc).await?;
        }
        wait_for(
            "the metrics APIService Available again",
            Duration::from_secs(60),
            || async {
                let s = api.get(METRICS_APISERVICE).await?;
                let available = s
                    .status
                    .and_then(|st| st.conditions)
                    .into_iter()
                    .flatten()
                    .any(|c| c.type_ == "Available" && c.status == "True");
                Ok(available.then_some(()))
            },
        )
        .await
    }
}

impl Drop for ApiServiceBack {
    fn drop(&mut self) {
        let Some(saved) = self.saved.take() else {
            return;
        };
        // A failing test unwinds through here: restore on a runtime of its own, since the test's
        // runtime cannot be blocked on from inside it.
        let restored = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            rt.block_on(async { Self::restore(&kruise_e2e::client().await?, saved).await })
        })
        .join();
        match restored {
            Ok(Ok(())) => eprintln!("the metrics APIService is back"),
            Ok(Err(e)) => eprintln!("putting the metrics APIService back failed: {e}"),
            Err(_) => eprintln!("putting the metrics APIService back panicked"),
        }
    }
}

/// Serial: it unregisters the metrics API cluster-wide. Without it, `top` exits 1 with
/// `kubectl top`'s "Metrics API not available" and says how to get it; the APIService is put
/// back (by the guard, also on failure) and `top` answers again.
#[tokio::test]
async fn serial_top_says_when_the_metrics_api_is_not_available() {
    let fx = Fixture::new("e2e-top-none").await;
    let api: Api<APIService> = Api::all(fx.client.clone());
    let guard = metrics_api(&fx).await.map(|svc| {
        let back = ApiServiceBack { saved: Some(svc) };
        (back, api.clone())
    });
    if let Some((_, api)) = &guard {
        api.delete(METRICS_APISERVICE, &DeleteParams::default())
            .await
            .expect("unregister the metrics API");
        wait_for(
            "the metrics APIService gone",
            Duration::from_secs(30),
            || async {
                Ok(api
                    .get_opt(METRICS_APISERVICE)
                    .await?
                    .is_none()
                    .then_some(()))
            },
        )
        .await
        .expect("APIService deleted");
    }

    for args in [&["top"][..], &["top", "cloneset/web", "-o", "json"][..]] {
        let run = fx.run(args).await;
        assert_code(&run, FAILED);
        assert!(run.stdout.is_empty(), "nothing on stdout: {run}");
        assert!(
            run.stderr
                .starts_with("error: Metrics API not available: the cluster does not serve metrics.k8s.io/v1beta1"),
            "{run}"
        );
        assert!(run.stderr.contains("metrics-server"), "{run}");
        assert!(run.stderr.contains(METRICS_APISERVICE), "{run}");
    }

    let Some((mut back, _)) = guard else {
        return;
    };
    let saved = back.saved.take().expect("saved APIService");
    ApiServiceBack::restore(&fx.client, saved)
        .await
        .expect("metrics APIService restored");
    // Served again (no workloads here: the namespace's empty table).
    let run = wait_for("top answers again", Duration::from_secs(30), || async {
        let run = fx.kk.run(&["top"]).await?;
        Ok((run.code == Some(OK)).then_some(run))
    })
    .await
    .expect("top with the API back");
    assert_stdout(&run, "No Kruise workloads found in this namespace.");
}
