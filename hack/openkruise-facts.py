#!/usr/bin/env python3
"""Writes the facts about an OpenKruise release that Kruise-rs's tests compare with, read from a
git checkout of OpenKruise at a tag, so CI needs neither the network nor upstream's files:

  per CRD: its versions (served, storage), its conversion strategy as installed (config/default
  patches config/crd/bases with a conversion webhook for the CRDs config/crd/kustomization.yaml
  lists under patches/webhook_in_*), and the field paths of each version's schema;
  the feature gates with their defaults (pkg/features/kruise_features.go).

  hack/openkruise-facts.py REPO [REF] [-o FILE]
      REPO  a git clone of openkruise/kruise (a bare one will do)
      REF   the tag to read, default v1.9.0
      FILE  default api/tests/data/openkruise-REF.json

Field paths: `/a/b` for properties, `[]` for array items, `{}` for map values; an object kept as
written (x-kubernetes-preserve-unknown-fields without properties) ends with `/*` and nothing
below it is listed; apiVersion, kind and metadata are left out. Only facts are written, none of
upstream's text.
"""
import json
import pathlib
import re
import subprocess
import sys

import yaml

ROOT = pathlib.Path(__file__).resolve().parent.parent
BASES = "config/crd/bases"


def git(repo, *args):
    return subprocess.run(["git", "-C", repo, *args], check=True, capture_output=True,
                          text=True).stdout


def field_paths(schema, at, out):
    if not isinstance(schema, dict):
        return
    if schema.get("x-kubernetes-preserve-unknown-fields") is True and "properties" not in schema:
        out.add(f"{at}/*")
        return
    for key, sub in (schema.get("properties") or {}).items():
        out.add(f"{at}/{key}")
        field_paths(sub, f"{at}/{key}", out)
    if isinstance(schema.get("items"), dict):
        field_paths(schema["items"], f"{at}[]", out)
    if isinstance(schema.get("additionalProperties"), dict):
        field_paths(schema["additionalProperties"], f"{at}{{}}", out)


def webhook_plurals(kustomization):
    """Plurals whose conversion-webhook patch the kustomization applies (not commented out)."""
    out = set()
    for line in kustomization.splitlines():
        m = re.match(r"^\s*-\s*patches/webhook_in_([a-z]+)\.yaml\s*$", line)
        if m:
            out.add(m.group(1))
    return out


def crds(repo, commit):
    listing = git(repo, "ls-tree", "--name-only", f"{commit}:{BASES}").split()
    plurals = webhook_plurals(git(repo, "show", f"{commit}:config/crd/kustomization.yaml"))
    out = {}
    for file in sorted(f for f in listing if f.endswith(".yaml")):
        crd = yaml.safe_load(git(repo, "show", f"{commit}:{BASES}/{file}"))
        spec = crd["spec"]
        versions = []
        for v in spec["versions"]:
            paths = set()
            field_paths(v.get("schema", {}).get("openAPIV3Schema", {}), "", paths)
            paths -= {"/apiVersion", "/kind", "/metadata"}
            paths = {p for p in paths if not p.startswith("/metadata/")}
            versions.append({
                "name": v["name"],
                "served": bool(v.get("served")),
                "storage": bool(v.get("storage")),
                "fields": sorted(paths),
            })
        versions.sort(key=lambda v: v["name"])
        base = (spec.get("conversion") or {}).get("strategy", "None")
        out[crd["metadata"]["name"]] = {
            "file": file,
            "group": spec["group"],
            "kind": spec["names"]["kind"],
            "plural": spec["names"]["plural"],
            "namespaced": spec.get("scope") == "Namespaced",
            "conversion": "Webhook" if spec["names"]["plural"] in plurals else base,
            "versions": versions,
        }
    return out


def feature_gates(repo, commit):
    path = "pkg/features/kruise_features.go"
    text = git(repo, "show", f"{commit}:{path}")
    names = dict(re.findall(r"^\s*(\w+)\s+(?:featuregate\.Feature\s+)?=\s+\"(\w+)\"", text, re.M))
    table = text[text.index("defaultFeatureGates = map"):]
    table = table[:table.index("\n}\n")]
    gates = {}
    for ident, default, stage in re.findall(
            r"^\s*(\w+):\s*\{Default:\s*(true|false),\s*PreRelease:\s*featuregate\.(\w+)\}",
            table, re.M):
        if ident not in names:
            sys.exit(f"{path}: gate {ident} has no name in the file")
        gates[names[ident]] = {"default": default == "true", "stage": stage}
    if not gates:
        sys.exit(f"{path}: no feature gates found; update the script")
    return dict(sorted(gates.items()))


def main():
    args = sys.argv[1:]
    out = None
    if "-o" in args:
        i = args.index("-o")
        out = pathlib.Path(args[i + 1])
        del args[i:i + 2]
    if not 1 <= len(args) <= 2:
        sys.exit(__doc__)
    repo, ref = args[0], (args[1] if len(args) == 2 else "v1.9.0")
    commit = git(repo, "rev-parse", f"{ref}^{{commit}}").strip()
    facts = {
        "about": "Facts read from OpenKruise's tree by hack/openkruise-facts.py; regenerate, "
                 "do not edit.",
        "ref": ref,
        "commit": commit,
        "crds": crds(repo, commit),
        "featureGates": feature_gates(repo, commit),
    }
    out = out or ROOT / "api" / "tests" / "data" / f"openkruise-{ref}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    # One field path a line keeps the file diffable.
    text = json.dumps(facts, indent=1, sort_keys=False)
    out.write_text(text + "\n")
    print(f"read {ref} = commit {commit}: {len(facts['crds'])} CRDs, "
          f"{len(facts['featureGates'])} feature gates -> {out}")


if __name__ == "__main__":
    main()
