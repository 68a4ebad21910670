//! `__complete`: the Cobra-style completion protocol kubectl (≥ 1.26) speaks to plugins through
//! the `kubectl_complete-kruise` helper. Prints one candidate per line, then `:<directive>`.
//! Object names are looked up on the cluster, best effort.

use crate::ctx::{ConnectArgs, Ctx};
use crate::target::Target;
use crate::view::workload::Kind;
use clap::Command;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use std::time::Duration;

/// Cobra's ShellCompDirectiveNoSpace.
const NO_SPACE: u32 = 2;
/// Cobra's ShellCompDirectiveNoFileComp.
const NO_FILE: u32 = 4;

/// What the word being completed is.
#[derive(Debug, PartialEq, Eq)]
pub enum Want {
    Words(Vec<String>, u32),
    /// Names of objects of this kind, printed as `prefix/name`.
    Objects(Kind, String),
    Pods,
}

fn takes_value(cmd: &Command, flag: &str) -> bool {
    let name = flag.trim_start_matches('-');
    cmd.get_arguments().any(|a| {
        (a.get_long() == Some(name) || (name.len() == 1 && a.get_short() == name.chars().next()))
            && a.get_action().takes_values()
    })
}

/// Decides the candidates from the words alone (pure, so it is unit-tested).
pub fn plan(root: &Command, words: &[String]) -> Want {
    let (partial, done) = match words.split_last() {
        Some((last, rest)) => (last.as_str(), rest),
        None => ("", &[][..]),
    };
    let mut cmd = root.clone();
    cmd.build();
    let globals: Vec<clap::Arg> = cmd
        .get_arguments()
        .filter(|a| a.is_global_set())
        .cloned()
        .collect();
    let mut skip = false;
    let mut positionals = 0usize;
    for w in done {
        if skip {
            skip = false;
            continue;
        }
        if w.starts_with('-') {
            skip = !w.contains('=')
                && (takes_value(&cmd, w)
                    || globals.iter().any(|g| {
                        g.get_long() == Some(w.trim_start_matches('-'))
                            || (w.len() == 2 && g.get_short() == w.chars().nth(1))
                    }));
            continue;
        }
        match cmd.find_subcommand(w) {
            Some(sub) => {
                cmd = sub.clone();
                positionals = 0;
            }
            None => positionals += 1,
        }
    }
    if partial.starts_with('-') {
        let mut flags: Vec<String> = cmd
            .get_arguments()
            .chain(globals.iter())
            .filter_map(|a| a.get_long().map(|l| format!("--{l}")))
            .filter(|f| f.starts_with(partial))
            .collect();
        flags.sort();
        flags.dedup();
        return Want::Words(flags, NO_FILE);
    }
    if cmd.has_subcommands() {
        let subs = cmd
            .get_subcommands()
            .filter(|s| !s.is_hide_set())
            .flat_map(|s| {
                std::iter::once(s.get_name().to_string())
                    .chain(s.get_visible_aliases().map(str::to_string))
            })
            .filter(|n| n.starts_with(partial))
            .collect();
        return Want::Words(subs, NO_FILE);
    }
    let positional: Vec<&clap::Arg> = cmd.get_positionals().collect();
    let arg = positional.get(positionals).or(positional
        .last()
        .filter(|a| a.get_num_args().is_some_and(|n| n.max_values() > 1)));
    let Some(arg) = arg else {
        return Want::Words(vec![], NO_FILE);
    };
    match arg.get_id().as_str() {
        "target" | "targets" => match partial.split_once('/') {
            Some((kind, _)) => match format!("{kind}/x").parse::<Target>() {
                Ok(t) => Want::Objects(t.kind, kind.to_string()),
                Err(_) => Want::Words(vec![], NO_FILE),
            },
            None => Want::Words(
                [
                    "cloneset/",
                    "clone/",
                    "deployment/",
                    "deploy/",
                    "asts/",
                    "ads/",
                    "sidecarset/",
                    "statefulset/",
                    "daemonset/",
                ]
                .iter()
                .filter(|k| k.starts_with(partial))
                .map(|k| k.to_string())
                .collect(),
                NO_FILE | NO_SPACE,
            ),
        },
        "pod" => Want::Pods,
        _ => {
            let values: Vec<String> = arg
                .get_possible_values()
                .iter()
                .map(|v| v.get_name().to_string())
                .filter(|v| v.starts_with(partial))
                .collect();
            Want::Words(values, NO_FILE)
        }
    }
}

/// Namespace and context given on the command line being completed, if any.
fn connect_from(words: &[String]) -> ConnectArgs {
    let mut c = ConnectArgs::default();
    let mut it = words.iter().peekable();
    while let Some(w) = it.next() {
        let mut val = |flag: &str| -> Option<String> {
            if let Some(v) = w.strip_prefix(&format!("{flag}=")) {
                return Some(v.to_string());
            }
            (w == flag)
                .then(|| it.peek().map(|s| s.to_string()))
                .flatten()
        };
        if let Some(v) = val("--namespace").or_else(|| val("-n")) {
            c.namespace = Some(v);
        } else if let Some(v) = val("--context") {
            c.context = Some(v);
        } else if let Some(v) = val("--kubeconfig") {
            c.kubeconfig = Some(v.into());
        }
    }
    c
}

async fn names(words: &[String], want: &Want) -> Vec<String> {
    let lookup = async {
        let ctx = Ctx::connect(&connect_from(words)).await.ok()?;
        match want {
            Want::Objects(kind, prefix) => {
                let (api, _) = ctx.workload_api(*kind, &ctx.namespace).await.ok()?;
                let list = api.list_metadata(&ListParams::default()).await.ok()?;
                Some(
                    list.items
                        .into_iter()
                        .filter_map(|o| o.metadata.name)
                        .map(|n| format!("{prefix}/{n}"))
                        .collect(),
                )
            }
            Want::Pods => {
                let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &ctx.namespace);
                let list = api.list_metadata(&ListParams::default()).await.ok()?;
                Some(
                    list.items
                        .into_iter()
                        .filter_map(|o| o.metadata.name)
                        .collect(),
                )
            }
            Want::Words(..) => None,
        }
    };
    // A slow cluster must not hang the shell.
    tokio::time::timeout(Duration::from_secs(3), lookup)
        .await
        .ok()
        .flatten()
        .unwrap_or_default()
}

pub async fn run(root: &Command, words: &[String]) {
    let partial = words.last().map(String::as_str).unwrap_or_default();
    let want = plan(root, words);
    let (candidates, directive) = match &want {
        Want::Words(w, d) => (w.clone(), *d),
        other => (
            names(words, other)
                .await
                .into_iter()
                .filter(|n| n.starts_with(partial))
                .collect(),
            NO_FILE,
        ),
    };
    for c in candidates {
        println!("{c}");
    }
    println!(":{directive}");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::Cli;
    use clap::CommandFactory;

    fn w(s: &str) -> Vec<String> {
        let mut v: Vec<String> = s.split_whitespace().map(str::to_string).collect();
        if s.ends_with(' ') {
            v.push(String::new());
        }
        v
    }

    #[test]
    fn completes_commands_flags_and_targets() {
        let root = Cli::command();
        assert!(matches!(plan(&root, &w("roll")), Want::Words(v, _) if v == vec!["rollout"]));
        assert!(matches!(plan(&root, &w("rollout st")), Want::Words(v, _) if v == vec!["status"]));
        assert!(
            matches!(plan(&root, &w("-n prod rollout status ")), Want::Words(v, 6) if v.contains(&"cloneset/".to_string()))
        );
        assert_eq!(
            plan(&root, &w("rollout status clone/w")),
            Want::Objects(Kind::CloneSet, "clone".into())
        );
        assert!(
            matches!(plan(&root, &w("rollout status clone/w --time")), Want::Words(v, _) if v == vec!["--timeout"])
        );
        assert!(
            matches!(plan(&root, &w("rollout status --kube")), Want::Words(v, _) if v == vec!["--kubeconfig"])
        );
        assert!(
            matches!(plan(&root, &w("completion ")), Want::Words(v, _) if v == vec!["bash", "zsh", "fish"])
        );
        assert_eq!(plan(&root, &w("recreate-container we")), Want::Pods);
        assert_eq!(plan(&root, &w("exec we")), Want::Pods);
    }

    #[test]
    fn reads_namespace_from_words() {
        let c = connect_from(&w("-n prod rollout status --context=kind x"));
        assert_eq!(c.namespace.as_deref(), Some("prod"));
        assert_eq!(c.context.as_deref(), Some("kind"));
    }
}
