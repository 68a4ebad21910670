//! Argo CD health checks for the Kruise kinds.
//!
//! The scripts live in `resource_customizations/<group>/<Kind>/health.lua`, Argo CD's own layout,
//! each with a `health_test.yaml` and `testdata/` fixtures in the format of Argo CD's tests. This
//! crate runs them the way Argo CD does (a Lua 5.1 with the object bound to the global `obj`,
//! the script's returned table read for `status` and `message`) and renders the `argocd-cm`
//! patch that installs them (`argocd-cm-patch.yaml`), so the patch cannot drift from the scripts.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use mlua::serde::SerializeOptions;
use mlua::{Lua, LuaSerdeExt, Value};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("reading {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("parsing {path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("lua: {0}")]
    Lua(#[from] mlua::Error),
    #[error("the script returned {0}, not a table")]
    NotATable(&'static str),
}

/// What a health script returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Health {
    pub status: String,
    pub message: String,
}

/// One health script: its API group, kind and Lua source.
#[derive(Debug, Clone)]
pub struct Script {
    pub group: String,
    pub kind: String,
    pub dir: PathBuf,
    pub lua: String,
}

/// The folder holding `resource_customizations/`.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> Result<String, Error> {
    std::fs::read_to_string(path).map_err(|source| Error::Read {
        path: path.to_path_buf(),
        source,
    })
}

fn sorted_dirs(path: &Path) -> Result<Vec<PathBuf>, Error> {
    let entries = std::fs::read_dir(path).map_err(|source| Error::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let mut dirs = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| Error::Read {
            path: path.to_path_buf(),
            source,
        })?;
        if entry.path().is_dir() {
            dirs.push(entry.path());
        }
    }
    dirs.sort();
    Ok(dirs)
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Every script under `root/resource_customizations`, sorted by group and kind.
pub fn scripts(root: &Path) -> Result<Vec<Script>, Error> {
    let mut out = Vec::new();
    for group in sorted_dirs(&root.join("resource_customizations"))? {
        for kind in sorted_dirs(&group)? {
            let lua = read(&kind.join("health.lua"))?;
            out.push(Script {
                group: file_name(&group),
                kind: file_name(&kind),
                dir: kind,
                lua,
            });
        }
    }
    Ok(out)
}

/// A YAML (or JSON) file as a JSON value.
pub fn load_yaml(path: &Path) -> Result<serde_json::Value, Error> {
    let text = read(path)?;
    serde_saphyr::from_str(&text).map_err(|e| Error::Parse {
        path: path.to_path_buf(),
        message: e.to_string(),
    })
}

/// Runs `lua` with `obj` bound as Argo CD binds it: JSON null and absent fields are both `nil`,
/// arrays are plain tables.
pub fn run(lua: &str, obj: &serde_json::Value) -> Result<Health, Error> {
    let vm = Lua::new();
    let options = SerializeOptions::new()
        .serialize_none_to_null(false)
        .serialize_unit_to_null(false)
        .set_array_metatable(false);
    let value = vm.to_value_with(obj, options)?;
    vm.globals().set("obj", value)?;
    let table = match vm.load(lua).eval::<Value>()? {
        Value::Table(t) => t,
        other => return Err(Error::NotATable(other.type_name())),
    };
    Ok(Health {
        status: table.get::<Option<String>>("status")?.unwrap_or_default(),
        message: table.get::<Option<String>>("message")?.unwrap_or_default(),
    })
}

/// The `argocd-cm` patch installing every script, one
/// `resource.customizations.health.<group>_<kind>` key each (Argo CD's per-kind key form).
pub fn argocd_cm_patch(scripts: &[Script]) -> String {
    let mut out = String::from(
        "# Generated from resource_customizations/*/*/health.lua by this folder's tests\n\
         # (UPDATE_ARGOCD_CM=1 cargo test -p kruise-argocd rewrites it); do not edit by hand.\n\
         apiVersion: v1\n\
         kind: ConfigMap\n\
         metadata:\n  name: argocd-cm\n  namespace: argocd\n\
         data:\n",
    );
    for s in scripts {
        let _ = writeln!(
            out,
            "  resource.customizations.health.{}_{}: |",
            s.group, s.kind
        );
        for line in s.lua.lines() {
            if line.is_empty() {
                out.push('\n');
            } else {
                let _ = writeln!(out, "    {line}");
            }
        }
    }
    out
}
