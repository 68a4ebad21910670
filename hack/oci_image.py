#!/usr/bin/env python3
"""Builds an OCI image from local directories and pushes it to a registry over plain HTTP.

No Docker engine runs on the machines this project is developed and tested on, so every image the
local cluster uses (the sandbox image, the test images, Kruise-rs itself) is assembled here: each
--layer directory becomes one gzip'd tar layer with fixed timestamps and owners, so that the same
inputs always give the same digests, and pushing an image that is already there is a no-op.

Usage:
  oci_image.py --registry 127.0.0.1:5000 --name kruise-rs/testapp --tag v1 \
      --layer DIR [--layer DIR ...] [--cmd JSON] [--entrypoint JSON] [--env K=V ...] \
      [--label K=V ...] [--user UID] [--workdir DIR]
  oci_image.py --registry 127.0.0.1:5000 --name kruise-rs/kruise-manager --tag next \
      --from dev --label K=V
    (another image with the layers of an existing tag, its config's labels changed: a new image
    ID without a rebuild, as the upgrade tests need)
Prints the manifest digest and the image ID (config digest).
"""

import argparse
import gzip
import hashlib
import io
import json
import os
import sys
import tarfile
import urllib.error
import urllib.request

MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"
CONFIG_TYPE = "application/vnd.oci.image.config.v1+json"
LAYER_TYPE = "application/vnd.oci.image.layer.v1.tar+gzip"


def layer_from_dir(root, level=6):
    """Returns (gzip bytes, diff_id) of a deterministic tar of the directory's content, compressed
    at gzip `level` (0 stores: for random test payloads, which do not compress)."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames.sort()
            for name in sorted(dirnames + filenames):
                full = os.path.join(dirpath, name)
                arc = os.path.relpath(full, root)
                info = tar.gettarinfo(full, arcname=arc)
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                info.mtime = 0
                if info.isfile():
                    with open(full, "rb") as f:
                        tar.addfile(info, f)
                else:
                    tar.addfile(info)
    data = raw.getvalue()
    diff_id = "sha256:" + hashlib.sha256(data).hexdigest()
    gz = io.BytesIO()
    with gzip.GzipFile(fileobj=gz, mode="wb", mtime=0, compresslevel=level) as g:
        g.write(data)
    return gz.getvalue(), diff_id


def digest(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


def request(method, url, data=None, headers=None):
    req = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def push_blob(base, name, data):
    d = digest(data)
    status, _, _ = request("HEAD", f"{base}/v2/{name}/blobs/{d}")
    if status == 200:
        return d
    status, headers, body = request("POST", f"{base}/v2/{name}/blobs/uploads/")
    if status != 202:
        sys.exit(f"registry refused an upload for {name}: HTTP {status} {body[:200]!r}")
    location = headers.get("Location") or headers.get("location")
    if location.startswith("/"):
        location = base + location
    sep = "&" if "?" in location else "?"
    status, _, body = request(
        "PUT",
        f"{location}{sep}digest={d}",
        data=data,
        headers={"Content-Type": "application/octet-stream"},
    )
    if status != 201:
        sys.exit(f"registry refused blob {d} for {name}: HTTP {status} {body[:200]!r}")
    return d


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--registry", required=True)
    p.add_argument("--name", required=True)
    p.add_argument("--tag", action="append", required=True)
    p.add_argument("--layer", action="append", default=[])
    p.add_argument("--from", dest="source", help="an existing tag whose layers to reuse")
    p.add_argument("--cmd")
    p.add_argument("--entrypoint")
    p.add_argument("--env", action="append", default=[])
    p.add_argument("--label", action="append", default=[])
    p.add_argument("--user")
    p.add_argument("--gzip-level", type=int, default=6, choices=range(10),
                   help="0 stores the layers uncompressed in their gzip frame")
    p.add_argument("--workdir")
    a = p.parse_args()
    if a.source:
        derive(a)
        return
    if not a.layer:
        p.error("--layer is required (or --from)")

    layers = [layer_from_dir(d, a.gzip_level) for d in a.layer]
    config = {
        "architecture": "amd64",
        "os": "linux",
        "created": "1970-01-01T00:00:00Z",
        "config": {
            "Env": a.env or ["PATH=/usr/local/bin:/usr/bin:/bin"],
            "Labels": dict(kv.split("=", 1) for kv in a.label),
        },
        "rootfs": {"type": "layers", "diff_ids": [diff_id for _, diff_id in layers]},
        "history": [{"created": "1970-01-01T00:00:00Z", "created_by": "oci_image.py"}] * len(layers),
    }
    if a.cmd:
        config["config"]["Cmd"] = json.loads(a.cmd)
    if a.entrypoint:
        config["config"]["Entrypoint"] = json.loads(a.entrypoint)
    if a.user:
        config["config"]["User"] = a.user
    if a.workdir:
        config["config"]["WorkingDir"] = a.workdir
    config_bytes = json.dumps(config, sort_keys=True, separators=(",", ":")).encode()

    base = f"http://{a.registry}"
    manifest = {
        "schemaVersion": 2,
        "mediaType": MANIFEST_TYPE,
        "config": {
            "mediaType": CONFIG_TYPE,
            "digest": push_blob(base, a.name, config_bytes),
            "size": len(config_bytes),
        },
        "layers": [
            {"mediaType": LAYER_TYPE, "digest": push_blob(base, a.name, gz), "size": len(gz)}
            for gz, _ in layers
        ],
    }
    put_manifest(base, a, manifest, config_bytes)


def put_manifest(base, a, manifest, config_bytes):
    manifest_bytes = json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode()
    for tag in a.tag:
        status, _, body = request(
            "PUT",
            f"{base}/v2/{a.name}/manifests/{tag}",
            data=manifest_bytes,
            headers={"Content-Type": MANIFEST_TYPE},
        )
        if status != 201:
            sys.exit(f"registry refused manifest {a.name}:{tag}: HTTP {status} {body[:200]!r}")
    print(f"{a.registry}/{a.name}:{','.join(a.tag)} manifest {digest(manifest_bytes)} image-id {digest(config_bytes)}")


def derive(a):
    """--from: the source tag's manifest with a config whose labels --label changes."""
    base = f"http://{a.registry}"
    status, _, body = request(
        "GET", f"{base}/v2/{a.name}/manifests/{a.source}", headers={"Accept": MANIFEST_TYPE}
    )
    if status != 200:
        sys.exit(f"no manifest {a.name}:{a.source}: HTTP {status} {body[:200]!r}")
    manifest = json.loads(body)
    status, _, body = request("GET", f"{base}/v2/{a.name}/blobs/{manifest['config']['digest']}")
    if status != 200:
        sys.exit(f"no config blob for {a.name}:{a.source}: HTTP {status}")
    config = json.loads(body)
    labels = config.setdefault("config", {}).get("Labels") or {}
    labels.update(dict(kv.split("=", 1) for kv in a.label))
    config["config"]["Labels"] = labels
    config_bytes = json.dumps(config, sort_keys=True, separators=(",", ":")).encode()
    manifest["config"]["digest"] = push_blob(base, a.name, config_bytes)
    manifest["config"]["size"] = len(config_bytes)
    put_manifest(base, a, manifest, config_bytes)


if __name__ == "__main__":
    main()
