"""OCI image archives (`skopeo copy ... oci-archive:`): read an image's platform, and make a
new image from one by adding a layer, in plain Python.

An OCI archive is a tar of an OCI image layout (image-spec v1.1 image-layout.md): `oci-layout`,
`index.json` (the manifests, each with its `org.opencontainers.image.ref.name`) and
`blobs/sha256/<digest>`. The platform an image runs on is in its config blob
(config.md: `os`, `architecture`, `variant`), which is what a bundle records: the tag a
registry serves can point at another architecture than the one asked for.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import tarfile
from pathlib import Path
from typing import Any

from lab.errors import LabError

REF_NAME = "org.opencontainers.image.ref.name"
INDEX_TYPES = ("application/vnd.oci.image.index.v1+json",
               "application/vnd.docker.distribution.manifest.list.v2+json")
MANIFEST = "application/vnd.oci.image.manifest.v1+json"
CONFIG = "application/vnd.oci.image.config.v1+json"
LAYER_GZIP = "application/vnd.oci.image.layer.v1.tar+gzip"
MAX_JSON = 4 * 1024 * 1024  # an index, manifest or config is kilobytes


def _json_member(tar: tarfile.TarFile, name: str, where: Path) -> Any:
    try:
        member = tar.getmember(name)
    except KeyError:
        raise LabError(f"{where}: no {name} in the archive: not an OCI image archive",
                       hint="make the bundle again") from None
    if not member.isfile() or member.size > MAX_JSON:
        raise LabError(f"{where}: {name} is not a small plain file",
                       hint="make the bundle again")
    fh = tar.extractfile(member)
    assert fh is not None
    try:
        return json.loads(fh.read())
    except ValueError as exc:
        raise LabError(f"{where}: {name} is not JSON ({exc})",
                       hint="make the bundle again") from None


def _blob(digest: str) -> str:
    algo, _, hexd = digest.partition(":")
    if algo != "sha256" or len(hexd) != 64:
        raise LabError(f"unexpected digest {digest!r} in an OCI archive")
    return f"blobs/sha256/{hexd}"


def read_image(path: Path) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(index.json, the image manifest, its config) of a one-image OCI archive."""
    with tarfile.open(path) as tar:
        index = _json_member(tar, "index.json", path)
        manifests = index.get("manifests") if isinstance(index, dict) else None
        if not isinstance(manifests, list) or len(manifests) != 1:
            raise LabError(f"{path}: index.json should list one image",
                           hint="make the bundle again")
        desc = manifests[0]
        manifest = _json_member(tar, _blob(str(desc.get("digest"))), path)
        if desc.get("mediaType") in INDEX_TYPES or "manifests" in manifest:
            raise LabError(f"{path}: holds an image index, not one platform's image",
                           hint="copy it with --override-os/--override-arch (kflab bundle "
                                "create does)")
        config = _json_member(tar, _blob(str(manifest["config"]["digest"])), path)
    return index, manifest, config


def platform(path: Path) -> str:
    """`os/architecture[/variant]` from the image's config."""
    _, _, config = read_image(path)
    parts = [str(config.get("os") or "?"), str(config.get("architecture") or "?")]
    if config.get("variant"):
        parts.append(str(config["variant"]))
    return "/".join(parts)


def _tar_bytes(files: dict[str, bytes]) -> bytes:
    """A reproducible tar (sorted, mtime 0, root-owned, 0644 files and 0755 folders)."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        folders = sorted({str(Path(n).parents[i]) for n in files
                          for i in range(len(Path(n).parts) - 1)})
        for folder in folders:
            info = tarfile.TarInfo(folder + "/")
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, 0
            tar.addfile(info)
        for name in sorted(files):
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(files[name]), 0o644, 0
            tar.addfile(info, io.BytesIO(files[name]))
    return raw.getvalue()


def add_layer(base: Path, out: Path, files: dict[str, bytes], ref: str,
              comment: str) -> str:
    """Write `out`: the image of `base` plus one layer holding `files` (path in the image ->
    bytes), named `ref`; returns the new manifest's digest (sha256:...). Deterministic: the
    same base and files give the same digest."""
    _, manifest, config = read_image(base)  # the base's name is not carried over
    layer_tar = _tar_bytes(files)
    layer = gzip.compress(layer_tar, mtime=0)
    config = json.loads(json.dumps(config))
    config.setdefault("rootfs", {"type": "layers", "diff_ids": []})
    config["rootfs"]["diff_ids"] = [*config["rootfs"].get("diff_ids", []),
                                    f"sha256:{hashlib.sha256(layer_tar).hexdigest()}"]
    config["history"] = [*config.get("history", []),
                         {"created": "1970-01-01T00:00:00Z", "created_by": comment}]
    config_bytes = json.dumps(config, sort_keys=True, separators=(",", ":")).encode()
    new_manifest = {
        "schemaVersion": 2, "mediaType": MANIFEST,
        "config": {"mediaType": CONFIG, "digest": _digest(config_bytes),
                   "size": len(config_bytes)},
        "layers": [*manifest.get("layers", []),
                   {"mediaType": LAYER_GZIP, "digest": _digest(layer), "size": len(layer)}]}
    manifest_bytes = json.dumps(new_manifest, sort_keys=True, separators=(",", ":")).encode()
    new_index = {"schemaVersion": 2, "manifests": [{
        "mediaType": MANIFEST, "digest": _digest(manifest_bytes), "size": len(manifest_bytes),
        "annotations": {REF_NAME: ref}}]}
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.part")
    with tarfile.open(base) as src, tarfile.open(tmp, "w", format=tarfile.PAX_FORMAT) as dst:
        written = set()

        def put(name: str, data: bytes) -> None:
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            dst.addfile(info, io.BytesIO(data))
            written.add(name)

        put("oci-layout", b'{"imageLayoutVersion":"1.0.0"}')
        for desc in new_manifest["layers"][:-1]:  # the base's layers, copied as they are
            name = _blob(desc["digest"])
            if name in written:
                continue
            member = src.getmember(name)
            fh = src.extractfile(member)
            assert fh is not None
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = member.size, 0o644, 0
            dst.addfile(info, fh)
            written.add(name)
        put(_blob(new_manifest["layers"][-1]["digest"]), layer)
        put(_blob(new_manifest["config"]["digest"]), config_bytes)
        put(_blob(new_index["manifests"][0]["digest"]), manifest_bytes)
        put("index.json", json.dumps(new_index, sort_keys=True).encode())
    os.replace(tmp, out)
    return str(new_index["manifests"][0]["digest"])


def _digest(data: bytes) -> str:
    return f"sha256:{hashlib.sha256(data).hexdigest()}"
