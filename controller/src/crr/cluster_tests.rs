//! A check against a real cluster with a running kruise-daemon (ignored by default):
//! `KUBECONFIG=… cargo test -p kruise-manager --lib -- --ignored crr::cluster_tests`.
//! It runs only this request's reconciles, in a namespace of its own that it deletes at the end.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Namespace, Pod, PodReadinessGate, PodSpec};
use kruise_api::apps::v1beta1::{
    ContainerRecreateRequest, ContainerRecreateRequestContainer, ContainerRecreateRequestSpec,
    ContainerRecreateRequestStrategy,
};
use kube::api::{DeleteParams, PostParams};

use super::*;

fn container_id(p: &Pod) -> Option<String> {
    p.status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .first()?
        .container_id
        .clone()
}

fn kruise_ready(p: &Pod) -> Option<(String, String)> {
    p.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == keys::KRUISE_POD_READY)
        .map(|c| (c.status.clone(), c.message.clone().unwrap_or_default()))
}

#[tokio::test]
#[ignore = "needs a cluster with kruise-daemon"]
async fn recreate_with_unready_grace_then_ttl() {
    let client = Client::try_default().await.expect("client");
    let image = std::env::var("KRS_TEST_IMAGE")
        .unwrap_or_else(|_| "127.0.0.1:5000/kruise-rs/testapp:v1".to_string());
    let ns = format!("krs-crr-{:06x}", rand::random::<u32>() & 0xff_ffff);
    let nss: Api<Namespace> = Api::all(client.clone());
    let mut n = Namespace::default();
    n.metadata.name = Some(ns.clone());
    nss.create(&PostParams::default(), &n)
        .await
        .expect("namespace");
    let token = CancellationToken::new();
    let pods = PodCache::start(client.clone(), Some(&ns), token.clone());
    pods.wait_synced().await;
    let ctx = Ctx {
        client: client.clone(),
        pods,
        metrics: Arc::new(Metrics::new()),
    };

    let pod_api: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let mut pod = Pod {
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "app".into(),
                image: Some(image),
                ..Default::default()
            }],
            readiness_gates: Some(vec![PodReadinessGate {
                condition_type: keys::KRUISE_POD_READY.into(),
            }]),
            termination_grace_period_seconds: Some(2),
            ..Default::default()
        }),
        ..Default::default()
    };
    pod.metadata.name = Some("p".into());
    pod_api
        .create(&PostParams::default(), &pod)
        .await
        .expect("pod");
    let mut old_id = None;
    for _ in 0..90 {
        let p = pod_api.get("p").await.expect("get pod");
        let running = p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
        if running && container_id(&p).is_some() {
            old_id = container_id(&p);
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let old_id = old_id.expect("pod running");

    let crrs: Api<ContainerRecreateRequest> = Api::namespaced(client.clone(), &ns);
    let mut crr = ContainerRecreateRequest::new(
        "r",
        ContainerRecreateRequestSpec {
            pod_name: "p".into(),
            containers: vec![ContainerRecreateRequestContainer {
                name: "app".into(),
                ..Default::default()
            }],
            strategy: Some(ContainerRecreateRequestStrategy {
                unready_grace_period_seconds: Some(2),
                ..Default::default()
            }),
            ttl_seconds_after_finished: Some(5),
            ..Default::default()
        },
    );
    crr.metadata.namespace = Some(ns.clone());
    crrs.create(&PostParams::default(), &crr)
        .await
        .expect("crr");

    let (mut saw_admit, mut saw_unready, mut saw_snapshot) = (false, false, false);
    let mut done = None;
    for _ in 0..120 {
        let c = crrs.get("r").await.expect("get crr");
        saw_admit |= admit::is_admitted(&c);
        saw_snapshot |= c
            .status
            .as_ref()
            .is_some_and(|s| !s.container_status_snapshot.is_empty());
        let p = pod_api.get("p").await.expect("get pod");
        saw_unready |=
            kruise_ready(&p).is_some_and(|(s, m)| s == "False" && m.contains(&format!("{ns}/r")));
        let finished = c
            .status
            .as_ref()
            .is_some_and(|s| s.completion_time.is_some());
        if finished && !c.labels().contains_key(keys::CRR_ACTIVE_LABEL) && !logic::has_finalizer(&c)
        {
            done = Some((c, p));
            break;
        }
        let _ = reconcile_inner(&c, &ctx).await.expect("reconcile");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let (c, p) = done.expect("CRR finished within a minute");
    let st = c.status.clone().unwrap_or_default();
    eprintln!(
        "final CRR status: {}",
        serde_json::to_string(&st).unwrap_or_default()
    );
    assert!(
        saw_admit && saw_unready && saw_snapshot,
        "admit={saw_admit} unready={saw_unready} snapshot={saw_snapshot}"
    );
    assert_eq!(st.message, "");
    assert_eq!(
        st.container_recreate_states[0].phase,
        ContainerRecreateRequestPhase::Succeeded
    );
    assert_ne!(container_id(&p).as_deref(), Some(old_id.as_str()));
    let ready = kruise_ready(&pod_api.get("p").await.expect("pod")).expect("condition");
    assert_eq!(ready, ("True".to_string(), "[]".to_string()));

    let mut gone = false;
    for _ in 0..30 {
        match crrs.get_opt("r").await.expect("get") {
            None => {
                gone = true;
                break;
            }
            Some(c) => {
                let _ = reconcile_inner(&c, &ctx).await.expect("reconcile");
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    assert!(gone, "CRR deleted after ttlSecondsAfterFinished");
    token.cancel();
    let _ = nss.delete(&ns, &DeleteParams::default()).await;
}
