//! `image pull`: create an ImagePullJob and follow it node by node (through NodeImage status).

use crate::cli::PullArgs;
use crate::ctx::Ctx;
use crate::error::{CliError, Result, exit, kube_err};
use crate::watch::Cache;
use futures::StreamExt;
use indicatif::{ProgressBar, ProgressStyle};
use kruise_api::image::ImageReference;
use kube::api::{DynamicObject, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::io::IsTerminal;

/// Splits `repo[:tag][@digest]` into (repo, tag) as NodeImage keys them (the familiar name;
/// the digest, else the tag, else latest).
pub fn split_image(image: &str) -> (String, String) {
    let r = ImageReference::split(image);
    (r.familiar_name(), r.tag_or_digest().to_owned())
}

/// A DNS-safe name prefix derived from the image.
pub fn name_prefix(image: &str) -> String {
    let (repo, tag) = split_image(image);
    let base = repo.rsplit('/').next().unwrap_or("image");
    let raw = format!("pull-{base}-{tag}");
    let mut s: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    s.truncate(50);
    format!("{}-", s.trim_end_matches('-'))
}

pub fn job_body(args: &PullArgs, api_version: &str) -> std::result::Result<Value, String> {
    let mut labels = serde_json::Map::new();
    for kv in &args.node_selector {
        let (k, v) = kv
            .split_once('=')
            .ok_or_else(|| format!("--node-selector {kv:?} is not KEY=VALUE"))?;
        labels.insert(k.to_string(), Value::from(v));
    }
    let mut meta = json!({});
    match &args.name {
        Some(n) => meta["name"] = json!(n),
        None => meta["generateName"] = json!(name_prefix(&args.image)),
    }
    let mut spec = json!({
        "image": args.image,
        "parallelism": args.parallelism,
        "completionPolicy": {"type": "Always", "ttlSecondsAfterFinished": 600},
        "pullPolicy": {"timeoutSeconds": 600, "backoffLimit": 3},
    });
    if !labels.is_empty() {
        spec["selector"] = json!({"matchLabels": labels});
    }
    Ok(json!({"apiVersion": api_version, "kind": "ImagePullJob", "metadata": meta, "spec": spec}))
}

/// Phase and progress of the image on one node, from its NodeImage.
pub fn node_progress(node_image: &Value, image: &str) -> Option<(String, i64)> {
    let r = ImageReference::split(image);
    let tag = r.tag_or_digest();
    let statuses = node_image.get("status")?.get("imageStatuses")?;
    let entry = statuses
        .get(r.familiar_name())
        .or_else(|| statuses.get(r.name()))?;
    let t = entry
        .get("tags")?
        .as_array()?
        .iter()
        .find(|t| t["tag"].as_str() == Some(tag))?;
    Some((
        t["phase"].as_str().unwrap_or("Waiting").to_string(),
        t["progress"].as_i64().unwrap_or(0),
    ))
}

pub async fn run(ctx: &Ctx, args: &PullArgs) -> Result<i32> {
    let (jobs, ar) = ctx
        .kruise_api("imagepulljobs", Some(&ctx.namespace))
        .await?;
    let body = job_body(args, &ar.api_version).map_err(CliError::Usage)?;
    let obj: DynamicObject = serde_json::from_value(body).map_err(|e| CliError::Other(e.into()))?;
    let created = jobs
        .create(&PostParams::default(), &obj)
        .await
        .map_err(kube_err)?;
    let name = created.metadata.name.clone().unwrap_or_default();
    println!("imagepulljob/{name} created for {}", args.image);
    if !args.wait {
        return Ok(exit::OK);
    }
    // NodeImage is optional for progress: without read access we still follow the job.
    let node_images = ctx
        .kruise_api("nodeimages", None)
        .await
        .ok()
        .map(|(api, _)| api);
    let mut events = watch_events(jobs, node_images, &name);
    let mut follow = Follow::new();
    let deadline = tokio::time::Instant::now() + args.timeout;
    loop {
        let next = tokio::time::timeout_at(deadline, events.next())
            .await
            .map_err(|_| follow.timed_out(&name, args))?;
        match next {
            None => return Err(CliError::Api("the watch ended unexpectedly".into())),
            Some(Err(e)) if crate::watch::expired(&e) => continue,
            Some(Err(e)) => {
                tracing::warn!(error = %e, "watch error, retrying");
                continue;
            }
            Some(Ok((true, ev))) => {
                follow.jobs.apply(ev);
            }
            Some(Ok((false, ev))) => {
                follow.node_images.apply(ev);
            }
        }
        if let Some(done) = follow.step(&name, &args.image) {
            return done;
        }
    }
}

/// One watch event: `true` for the job, `false` for a NodeImage.
type Event = std::result::Result<(bool, watcher::Event<DynamicObject>), watcher::Error>;

/// The job's events (by name) merged with every NodeImage's, when those can be read.
fn watch_events(
    jobs: kube::Api<DynamicObject>,
    node_images: Option<kube::Api<DynamicObject>>,
    name: &str,
) -> futures::stream::BoxStream<'static, Event> {
    let job_stream = watcher(
        jobs,
        watcher::Config::default().fields(&format!("metadata.name={name}")),
    )
    .default_backoff()
    .map(|r| r.map(|e| (true, e)));
    match node_images {
        Some(api) => futures::stream::select(
            job_stream.boxed(),
            watcher(api, watcher::Config::default())
                .default_backoff()
                .map(|r| r.map(|e| (false, e)))
                .boxed(),
        )
        .boxed(),
        None => job_stream.boxed(),
    }
}

/// What following a job has seen and printed so far.
struct Follow {
    jobs: Cache<DynamicObject>,
    node_images: Cache<DynamicObject>,
    bar: Option<ProgressBar>,
    last_line: String,
    last_nodes: BTreeMap<String, (String, i64)>,
}

impl Follow {
    fn new() -> Self {
        let tty = std::io::stdout().is_terminal() && !crate::no_color_env();
        let bar = tty.then(|| {
            let b = ProgressBar::new(0);
            b.set_style(
                ProgressStyle::with_template(
                    "{prefix} [{bar:40.cyan/blue}] {pos}/{len} nodes {msg}",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            b.set_prefix("pulled");
            b
        });
        Self {
            jobs: Cache::default(),
            node_images: Cache::default(),
            bar,
            last_line: String::new(),
            last_nodes: BTreeMap::new(),
        }
    }

    fn timed_out(&self, name: &str, args: &PullArgs) -> CliError {
        let hint = if self.last_line.starts_with("desired 0,") {
            " (no status yet: is the kruise-manager ImagePullJob controller running?)"
        } else {
            ""
        };
        CliError::Timeout(format!(
            "imagepulljob/{name} not finished after {}s{hint}",
            args.timeout.as_secs()
        ))
    }

    fn println(&self, line: String) {
        match &self.bar {
            Some(b) => b.println(line),
            None => println!("{line}"),
        }
    }

    /// Prints what changed since the last event; the command's result once the job finished.
    fn step(&mut self, name: &str, image: &str) -> Option<Result<i32>> {
        let job = self
            .jobs
            .items
            .get(name)
            .and_then(|o| serde_json::to_value(o).ok())?;
        let st = job.get("status").cloned().unwrap_or(Value::Null);
        let n = |k: &str| st[k].as_i64().unwrap_or(0);
        let (desired, active, succeeded, failed) =
            (n("desired"), n("active"), n("succeeded"), n("failed"));
        self.print_nodes(image);
        let line =
            format!("desired {desired}, active {active}, succeeded {succeeded}, failed {failed}");
        if line != self.last_line {
            match &self.bar {
                Some(b) => {
                    b.set_length(desired.max(0) as u64);
                    b.set_position((succeeded + failed).max(0) as u64);
                    b.set_message(format!("({active} pulling, {failed} failed)"));
                }
                None => println!("imagepulljob/{name}: {line}"),
            }
            self.last_line = line;
        }
        if st.get("completionTime").is_none_or(Value::is_null) {
            return None;
        }
        if let Some(b) = &self.bar {
            b.finish();
        }
        if failed > 0 {
            let nodes: Vec<&str> = st["failedNodes"]
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let msg = st["message"].as_str().unwrap_or_default();
            return Some(Err(CliError::Failed(format!(
                "imagepulljob/{name}: {failed} of {desired} nodes failed ({}) {msg}",
                nodes.join(",")
            ))));
        }
        let nodes = if succeeded == 1 { "node" } else { "nodes" };
        println!("imagepulljob/{name}: {image} pulled on {succeeded} {nodes}");
        Some(Ok(exit::OK))
    }

    /// Per-node lines for nodes that have the image in their NodeImage spec, when they change.
    fn print_nodes(&mut self, image: &str) {
        let mut changed = Vec::new();
        for (node, ni) in &self.node_images.items {
            let Ok(v) = serde_json::to_value(ni) else {
                continue;
            };
            if let Some(p) = node_progress(&v, image)
                && self.last_nodes.get(node) != Some(&p)
            {
                changed.push((node.clone(), p));
            }
        }
        for (node, p) in changed {
            self.println(format!("  node {node}: {} {}%", p.0, p.1));
            self.last_nodes.insert(node, p);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_parts() {
        assert_eq!(split_image("nginx"), ("nginx".into(), "latest".into()));
        assert_eq!(
            split_image("127.0.0.1:5000/app:v2"),
            ("127.0.0.1:5000/app".into(), "v2".into())
        );
        assert_eq!(
            split_image("a/b@sha256:1"),
            ("a/b".into(), "sha256:1".into())
        );
        assert_eq!(
            name_prefix("127.0.0.1:5000/My_App:v2.1"),
            "pull-my-app-v2-1-"
        );
    }

    #[test]
    fn progress_from_node_image() {
        let ni = json!({"status": {"imageStatuses": {"docker.io/library/nginx": {"tags": [{"tag": "1.25", "phase": "Pulling", "progress": 40}]}}}});
        assert_eq!(
            node_progress(&ni, "nginx:1.25"),
            Some(("Pulling".into(), 40))
        );
        assert_eq!(node_progress(&ni, "nginx:1.26"), None);
    }

    #[test]
    fn body() {
        let args = PullArgs {
            image: "nginx:1".into(),
            node_selector: vec!["pool=web".into()],
            parallelism: 3,
            name: None,
            wait: true,
            timeout: std::time::Duration::from_secs(1),
        };
        let b = job_body(&args, "apps.kruise.io/v1alpha1").unwrap();
        assert_eq!(b["spec"]["selector"]["matchLabels"]["pool"], "web");
        assert_eq!(b["spec"]["parallelism"], 3);
        assert_eq!(b["metadata"]["generateName"], "pull-nginx-1-");
    }
}
