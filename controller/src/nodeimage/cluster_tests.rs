//! A check against a real cluster (ignored by default):
//! `KUBECONFIG=… cargo test -p kruise-manager --lib -- --ignored nodeimage::cluster_tests`.
//! It ensures the node's NodeImage exists, then cleans its spec once: tags whose ImagePullJob is
//! gone disappear (what the controller does for every NodeImage).

use super::*;

#[tokio::test]
#[ignore = "needs a cluster"]
async fn ensures_node_image_and_drops_orphan_tags() {
    let client = Client::try_default().await.expect("client");
    let node_name = std::env::var("KRS_NODE").unwrap_or_else(|_| "kruise-node".to_string());
    let (nodes, writer) = reflector::store::<Node>();
    let token = CancellationToken::new();
    let stream = watcher(Api::<Node>::all(client.clone()), watcher::Config::default())
        .default_backoff()
        .reflect(writer);
    let t = token.clone();
    tokio::spawn(async move {
        let mut s = std::pin::pin!(stream.take_until(t.cancelled_owned()));
        while s.next().await.is_some() {}
    });
    nodes.wait_until_ready().await.expect("nodes");
    let ctx = Arc::new(Ctx {
        client: client.clone(),
        nodes,
        metrics: Arc::new(Metrics::new()),
        recorder: Recorder::new(
            client.clone(),
            Reporter {
                controller: CONTROLLER_NAME.into(),
                instance: None,
            },
        ),
    });
    let node = Api::<Node>::all(client.clone())
        .get(&node_name)
        .await
        .expect("node");
    // A Ready node (for longer than the delay) gets its NodeImage.
    let wait = ensure_for_node(&ctx, &node).await.expect("ensure");
    assert_eq!(wait, None);
    let api: Api<NodeImage> = Api::all(client.clone());
    let ni = api.get(&node_name).await.expect("NodeImage exists");
    assert_eq!(ni.metadata.labels, node.metadata.labels);

    for _ in 0..5 {
        let ni = api.get(&node_name).await.expect("NodeImage");
        let _ = reconcile_inner(&ni, &ctx).await;
    }
    let ni = api.get(&node_name).await.expect("NodeImage");
    for (image, spec) in &ni.spec.images {
        for tag in &spec.tags {
            for r in &tag.owner_references {
                let (Some(ns), Some(name)) = (r.namespace.as_deref(), r.name.as_deref()) else {
                    continue;
                };
                let job = Api::<ImagePullJob>::namespaced(client.clone(), ns)
                    .get_opt(name)
                    .await
                    .expect("get job");
                assert!(
                    job.is_some_and(|j| j.metadata.uid == r.uid),
                    "{image}:{} still owned by gone job {ns}/{name}",
                    tag.tag
                );
            }
        }
    }
    eprintln!(
        "NodeImage images left: {:?}",
        ni.spec.images.keys().collect::<Vec<_>>()
    );
    token.cancel();
}
