#!/usr/bin/env python3
"""make demo's last step: proves the demo rollout happened in place.

usage: kubectl get pods -l app=demo -o json | demo_check.py BEFORE.json APP_IMAGE SIDECAR_IMAGE

BEFORE.json is the same listing taken before the image change. Every Pod must still exist with
its UID, run the new images, show one restart per container, and carry an in-place update state
whose container batches are the app first and then its sidecar (launch priority). Prints a table;
exits 1 naming each Pod and check that failed.
"""

import json
import sys

# The annotation the manager writes (kruise_api::keys::INPLACE_UPDATE_STATE_ANNOTATION).
STATE_ANNOTATION = "apps.kruise.io/inplace-update-state"
EXPECTED_BATCHES = [["app"], ["sidecar"]]


def main() -> int:
    before_path, app_image, sidecar_image = sys.argv[1:4]
    with open(before_path, encoding="utf-8") as f:
        before = {p["metadata"]["name"]: p for p in json.load(f)["items"]}
    after = {p["metadata"]["name"]: p for p in json.load(sys.stdin)["items"]}
    want_images = {"app": app_image, "sidecar": sidecar_image}

    problems = []
    rows = [("POD", "UID", "SAME UID", "RESTARTS app/sidecar", "IMAGES", "BATCHES")]
    for name, old in sorted(before.items()):
        new = after.get(name)
        if new is None:
            problems.append(f"{name}: the Pod is gone (it was recreated, not updated in place)")
            continue
        uid = new["metadata"]["uid"]
        same_uid = uid == old["metadata"]["uid"]
        if not same_uid:
            problems.append(f"{name}: the UID changed from {old['metadata']['uid']} to {uid}")
        statuses = {c["name"]: c for c in new.get("status", {}).get("containerStatuses", [])}
        restarts = []
        images_ok = True
        for c in ("app", "sidecar"):
            st = statuses.get(c, {})
            n = st.get("restartCount")
            restarts.append(str(n))
            if n != 1:
                problems.append(f"{name}: container {c} restarted {n} times, expected 1")
            image = st.get("image", "").removeprefix("docker.io/")
            if image != want_images[c]:
                images_ok = False
                problems.append(f"{name}: container {c} runs {image!r}, expected {want_images[c]!r}")
        raw = new["metadata"].get("annotations", {}).get(STATE_ANNOTATION)
        batches = []
        if raw:
            record = json.loads(raw).get("containerBatchesRecord") or []
            batches = [b.get("containers", []) for b in record]
        if batches != EXPECTED_BATCHES:
            problems.append(f"{name}: in-place batches {batches}, expected {EXPECTED_BATCHES}")
        rows.append(
            (
                name,
                uid,
                "yes" if same_uid else "NO",
                "/".join(restarts),
                "v2/v2" if images_ok else "WRONG",
                " -> ".join(",".join(b) for b in batches) or "-",
            )
        )
    extra = sorted(set(after) - set(before))
    if extra:
        problems.append(f"new Pods appeared: {', '.join(extra)} (the update recreated Pods)")

    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip())
    if problems:
        print("\nthe rollout did not happen in place as expected:", file=sys.stderr)
        for p in problems:
            print(f"  - {p}", file=sys.stderr)
        return 1
    print(f"\nall {len(before)} Pods updated in place: same UIDs, one restart per container, "
          "batches app -> sidecar")
    return 0


if __name__ == "__main__":
    sys.exit(main())
