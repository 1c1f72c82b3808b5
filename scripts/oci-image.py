#!/usr/bin/env python3
"""make image: a multi-architecture OCI image of grid-wrapper, written without a container engine.

    python3 scripts/oci-image.py [--edge out/edge] [--out out/image]

Reads the static binaries of `make cross` (out/edge/<rust target>/grid-wrapper) and writes an OCI
image layout (https://github.com/opencontainers/image-spec, image-layout.md) to --out:

    oci-layout, index.json, blobs/sha256/<digest>...

index.json names one image index, tagged with the version in Cargo.toml (`oci:out/image:0.1.0`
for skopeo), which lists one manifest per platform: linux/amd64, linux/arm64/v8, linux/arm/v7.
Each image has one gzip layer holding /grid-wrapper (root-owned, mode 0755) and nothing else,
like deploy/Dockerfile's `FROM scratch`, and a config with Entrypoint ["/grid-wrapper"] and the
numeric non-root User the DaemonSet runs as.

Reproducible: fixed timestamps (SOURCE_DATE_EPOCH, default 0), no owner names, gzip without a
name or mtime, JSON with sorted keys. The same binaries give the same digests (with the same
zlib: its compressed bytes may change between zlib versions).
Stdlib only.
"""

import argparse
import gzip
import hashlib
import io
import json
import os
import re
import shutil
import sys
import tarfile
import tempfile
import time

# (rust target, OCI platform). arm64 carries variant v8 as `docker buildx` writes it; runtimes
# treat arm64 and arm64/v8 alike.
PLATFORMS = [
    ("x86_64-unknown-linux-musl", {"architecture": "amd64", "os": "linux"}),
    ("aarch64-unknown-linux-musl", {"architecture": "arm64", "os": "linux", "variant": "v8"}),
    ("armv7-unknown-linux-gnueabihf", {"architecture": "arm", "os": "linux", "variant": "v7"}),
]
# deploy/daemonset.yaml's runAsUser/runAsGroup; the image needs no /etc/passwd for a numeric uid.
USER = "65532:65532"
ENTRYPOINT = ["/grid-wrapper"]

MT_INDEX = "application/vnd.oci.image.index.v1+json"
MT_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MT_CONFIG = "application/vnd.oci.image.config.v1+json"
MT_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"


def cargo_version(root):
    """The [package] version of the root Cargo.toml (the image tag)."""
    text = open(os.path.join(root, "Cargo.toml"), encoding="utf-8").read()
    m = re.search(r'^\[package\]\n(?:(?!\[).*\n)*?version\s*=\s*"([^"]+)"', text, re.M)
    if not m:
        sys.exit("oci-image: no [package] version in Cargo.toml")
    return m.group(1)


def canonical(obj):
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


class Blobs:
    def __init__(self, layout):
        self.dir = os.path.join(layout, "blobs", "sha256")
        os.makedirs(self.dir)

    def put(self, data, media_type):
        """Stores data and returns its descriptor."""
        digest = hashlib.sha256(data).hexdigest()
        with open(os.path.join(self.dir, digest), "wb") as f:
            f.write(data)
        return {"mediaType": media_type, "digest": "sha256:" + digest, "size": len(data)}


def layer_tar(binary, mtime):
    """An uncompressed tar with the binary as grid-wrapper (the image's /grid-wrapper)."""
    data = open(binary, "rb").read()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        info = tarfile.TarInfo("grid-wrapper")
        info.size = len(data)
        info.mode = 0o755
        info.mtime = mtime
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def image(blobs, target, platform, binary, version, created, mtime):
    tar = layer_tar(binary, mtime)
    layer = blobs.put(gzip.compress(tar, compresslevel=9, mtime=0), MT_LAYER)
    config = {
        "created": created,
        **platform,
        "config": {
            "User": USER,
            "Entrypoint": ENTRYPOINT,
            "Labels": {
                "org.opencontainers.image.title": "grid-wrapper",
                "org.opencontainers.image.version": version,
            },
        },
        "rootfs": {"type": "layers", "diff_ids": ["sha256:" + hashlib.sha256(tar).hexdigest()]},
        "history": [{"created": created, "created_by": f"make image: out/edge/{target}/grid-wrapper"}],
    }
    manifest = {
        "schemaVersion": 2,
        "mediaType": MT_MANIFEST,
        "config": blobs.put(canonical(config), MT_CONFIG),
        "layers": [layer],
    }
    return {**blobs.put(canonical(manifest), MT_MANIFEST), "platform": platform}


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--edge", default=os.path.join(root, "out", "edge"), help="make cross's output")
    ap.add_argument("--out", default=os.path.join(root, "out", "image"), help="the OCI layout to write")
    args = ap.parse_args()

    version = cargo_version(root)
    mtime = int(os.environ.get("SOURCE_DATE_EPOCH", "0"))
    created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(mtime))
    missing = [t for t, _ in PLATFORMS if not os.path.isfile(os.path.join(args.edge, t, "grid-wrapper"))]
    if missing:
        sys.exit(f"oci-image: no binary for {', '.join(missing)} under {args.edge}: run `make cross` first")

    out = os.path.abspath(args.out)
    parent = os.path.dirname(out)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".image-", dir=parent)
    try:
        blobs = Blobs(tmp)
        manifests = [
            image(blobs, t, p, os.path.join(args.edge, t, "grid-wrapper"), version, created, mtime)
            for t, p in PLATFORMS
        ]
        index = blobs.put(canonical({"schemaVersion": 2, "mediaType": MT_INDEX, "manifests": manifests}), MT_INDEX)
        # The layout's own index names the image index by its tag (skopeo's oci:DIR:TAG).
        top = {
            "schemaVersion": 2,
            "mediaType": MT_INDEX,
            "manifests": [{**index, "annotations": {"org.opencontainers.image.ref.name": version}}],
        }
        with open(os.path.join(tmp, "index.json"), "wb") as f:
            f.write(canonical(top))
        with open(os.path.join(tmp, "oci-layout"), "wb") as f:
            f.write(canonical({"imageLayoutVersion": "1.0.0"}))
        shutil.rmtree(out, ignore_errors=True)
        os.rename(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise

    rel = os.path.relpath(out, root) if out.startswith(root + os.sep) else out
    print(f"{rel}: grid-wrapper:{version} {index['digest']}")
    for m in manifests:
        p = m["platform"]
        name = "/".join([p["os"], p["architecture"]] + ([p["variant"]] if "variant" in p else []))
        print(f"  {name:<16} {m['digest']}")
    print(f"push: skopeo copy --all oci:{rel}:{version} docker://REGISTRY/grid-wrapper:{version}")


if __name__ == "__main__":
    main()
