//! Pull progress for NodeImage status. CRI PullImage says nothing until it returns, but
//! containerd's content service lists the blobs being downloaded ("ingests") with bytes written
//! and expected size. Polling that list while a pull runs gives a percentage.
//!
//! Attribution is conservative. containerd names a fetch's ingests after the blob
//! (`manifest-`, `index-`, `config-`, `layer-` + digest, see remotes.MakeRefKey), never after the
//! image, so the list cannot say which pull a blob belongs to. Progress is therefore only
//! sampled while this daemon runs exactly one pull, ingests already present when the pull
//! started are ignored until they move, and the value never goes down and stays below 100
//! until the pull has returned. A pull the kubelet runs at the same time can still inflate the
//! total; the worst outcome is a percentage that grows more slowly than the real one.

use std::collections::HashMap;
use std::time::Duration;

use tonic::transport::Channel;

use crate::criruntime::CriClient;

#[allow(clippy::all, missing_docs)]
mod proto {
    tonic::include_proto!("containerd.services.content.v1");
}

use proto::ListStatusesRequest;
use proto::content_client::ContentClient as RawClient;

/// How often the ingest list is read while a pull runs.
pub const POLL_INTERVAL: Duration = Duration::from_secs(1);
/// gRPC metadata key selecting containerd's namespace; the CRI plugin works in `k8s.io`.
const NAMESPACE_HEADER: &str = "containerd-namespace";
const CRI_NAMESPACE: &str = "k8s.io";
const CALL_TIMEOUT: Duration = Duration::from_secs(5);
/// Ingest kinds a registry fetch creates.
const FETCH_PREFIXES: [&str; 4] = ["manifest-", "index-", "config-", "layer-"];

/// One in-flight download as containerd reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ingest {
    pub key: String,
    pub offset: i64,
    pub total: i64,
}

/// containerd's content service on the runtime's own socket.
#[derive(Clone, Debug)]
pub struct ContentClient {
    raw: RawClient<Channel>,
}

impl ContentClient {
    /// A client when the runtime is containerd; other runtimes have no such service.
    pub fn for_runtime(cri: &CriClient) -> Option<Self> {
        (cri.runtime_name() == "containerd").then(|| ContentClient {
            raw: RawClient::new(cri.channel()),
        })
    }

    /// The ingests in containerd's Kubernetes namespace.
    pub async fn ingests(&self) -> Result<Vec<Ingest>, tonic::Status> {
        let mut req = tonic::Request::new(ListStatusesRequest::default());
        req.set_timeout(CALL_TIMEOUT);
        req.metadata_mut().insert(
            NAMESPACE_HEADER,
            tonic::metadata::MetadataValue::from_static(CRI_NAMESPACE),
        );
        let resp = self.raw.clone().list_statuses(req).await?.into_inner();
        Ok(resp
            .statuses
            .into_iter()
            .map(|s| Ingest {
                key: s.r#ref,
                offset: s.offset,
                total: s.total,
            })
            .collect())
    }
}

/// Turns successive ingest lists of one pull attempt into a percentage.
#[derive(Debug, Default)]
pub struct Tracker {
    /// Ingests present before the pull started, by key → offset: someone else's (or an
    /// abandoned) download until its offset moves.
    baseline: HashMap<String, i64>,
    /// Blobs counted for this pull: key → (bytes done, total).
    blobs: HashMap<String, (i64, i64)>,
    percent: i32,
}

impl Tracker {
    pub fn new(baseline: &[Ingest]) -> Self {
        Tracker {
            baseline: baseline.iter().map(|i| (i.key.clone(), i.offset)).collect(),
            ..Default::default()
        }
    }

    /// Feeds one list; returns the percentage when it grew (at most 99: only the pull's return
    /// means done).
    pub fn observe(&mut self, ingests: &[Ingest]) -> Option<i32> {
        let current: HashMap<&str, &Ingest> = ingests
            .iter()
            .filter(|i| i.total > 0 && FETCH_PREFIXES.iter().any(|p| i.key.starts_with(p)))
            .filter(|i| self.baseline.get(&i.key) != Some(&i.offset))
            .map(|i| (i.key.as_str(), i))
            .collect();
        // A counted blob that left the list was committed: all its bytes are on the node.
        for (key, (done, total)) in self.blobs.iter_mut() {
            if !current.contains_key(key.as_str()) {
                *done = *total;
            }
        }
        for (key, i) in current {
            // Once it moved it is ours from now on, whatever its offset does later.
            self.baseline.remove(key);
            self.blobs
                .insert(key.to_string(), (i.offset.clamp(0, i.total), i.total));
        }
        let (done, total) = self
            .blobs
            .values()
            .fold((0i128, 0i128), |(d, t), (bd, bt)| {
                (d + *bd as i128, t + *bt as i128)
            });
        if total == 0 {
            return None;
        }
        let pct = ((done * 100) / total).min(99) as i32;
        (pct > self.percent).then(|| {
            self.percent = pct;
            pct
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ing(key: &str, offset: i64, total: i64) -> Ingest {
        Ingest {
            key: key.into(),
            offset,
            total,
        }
    }

    #[test]
    fn layers_in_flight_and_committed() {
        let mut t = Tracker::new(&[]);
        assert_eq!(t.observe(&[]), None, "nothing known yet");
        // The manifest came and went between polls; two layers download.
        assert_eq!(
            t.observe(&[
                ing("layer-sha256:a", 100, 400),
                ing("layer-sha256:b", 0, 600)
            ]),
            Some(10)
        );
        // a committed (left the list), b half way.
        assert_eq!(t.observe(&[ing("layer-sha256:b", 300, 600)]), Some(70));
        // No change, no report.
        assert_eq!(t.observe(&[ing("layer-sha256:b", 300, 600)]), None);
        // Everything committed: capped below 100 until the pull returns.
        assert_eq!(t.observe(&[]), Some(99));
    }

    #[test]
    fn never_goes_down_when_a_new_layer_appears() {
        let mut t = Tracker::new(&[]);
        assert_eq!(t.observe(&[ing("layer-sha256:a", 50, 100)]), Some(50));
        // A big layer starts: the true fraction drops, the reported one holds.
        assert_eq!(
            t.observe(&[
                ing("layer-sha256:a", 100, 100),
                ing("layer-sha256:b", 0, 900)
            ]),
            None
        );
        assert_eq!(t.observe(&[ing("layer-sha256:b", 800, 900)]), Some(90));
    }

    #[test]
    fn foreign_and_stale_ingests_are_ignored() {
        // An abandoned download sits in the store from before the pull.
        let mut t = Tracker::new(&[ing("layer-sha256:old", 10, 1000)]);
        assert_eq!(
            t.observe(&[
                ing("layer-sha256:old", 10, 1000),
                // Not a fetch (e.g. an import or a push), and a blob of unknown size.
                ing("push-sha256:x", 5, 10),
                ing("layer-sha256:nosize", 5, 0),
                ing("layer-sha256:mine", 50, 100),
            ]),
            Some(50)
        );
        // The old one resumes (this pull needs the same blob): from now on it counts.
        assert_eq!(
            t.observe(&[
                ing("layer-sha256:old", 900, 1000),
                ing("layer-sha256:mine", 100, 100)
            ]),
            Some(90)
        );
    }
}
