"""Images from registries, through skopeo (a registry client made for copying images).

- `copy`: one image, for one platform (`--override-os linux --override-arch ARCH`: skopeo
  picks that entry of a multi-platform index, on any build machine, macOS included), into an
  OCI archive named by its normalised reference; the platform the copied image really is
  (its config) must be the one asked for, or nothing is kept.
- `size`: the bytes a copy will download, from the registry's manifests alone (`skopeo
  inspect --raw`: the index, then the platform's manifest: its config and layer sizes).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lab.components.reference import normalize
from lab.errors import LabError
from lab.teaching import oci

OS = "linux"
TIMEOUT = 3600
INSPECT_TIMEOUT = 120


def tool(skopeo: str = "skopeo") -> str:
    path = shutil.which(skopeo)
    if path is None:
        raise LabError("skopeo is not installed: it copies the images",
                       hint="install it (Debian/Ubuntu: apt install skopeo; macOS: brew "
                            "install skopeo)")
    return path


def _loopback(ref: str) -> bool:
    return ref.startswith(("127.0.0.1:", "localhost:", "localhost/"))


def _tls(ref: str, flag: str) -> list[str]:
    """A registry on this machine speaks plain http (tests, a local mirror)."""
    return [f"{flag}=false"] if _loopback(ref) else []


def _last_line(proc: subprocess.CompletedProcess) -> str:
    return (proc.stderr.strip().splitlines() or ["?"])[-1]


def copy(ref: str, target: Path, arch: str, skopeo: str = "skopeo") -> tuple[str, str]:
    """skopeo copy docker://REF -> oci-archive:TARGET:REF for linux/ARCH; (digest,
    platform). REF must be normalised (reference.normalize)."""
    exe = tool(skopeo)
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        digest_file = Path(tmp) / "digest"
        argv = [exe, "--override-os", OS, "--override-arch", arch, "copy", "--quiet",
                "--digestfile", str(digest_file), *_tls(ref, "--src-tls-verify"),
                f"docker://{ref}", f"oci-archive:{target}:{ref}"]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT,
                              check=False)
        if proc.returncode != 0:
            target.unlink(missing_ok=True)
            raise LabError(f"skopeo could not copy {ref} for {OS}/{arch}: {_last_line(proc)}",
                           hint="check the name, that the registry has it for this "
                                "architecture, and that this machine reaches the registry")
        digest = digest_file.read_text().strip()
    got = oci.platform(target)
    if got.split("/")[:2] != [OS, arch]:
        target.unlink(missing_ok=True)
        raise LabError(f"{ref}: the registry gave an image for {got}, not {OS}/{arch}",
                       hint=f"the image exists only for {got}: pick an image built for "
                            f"{arch}, or make the bundle with --arch {got.split('/')[1]}")
    return digest, got


def inspect_raw(ref: str, skopeo: str = "skopeo") -> dict[str, Any]:
    exe = tool(skopeo)
    proc = subprocess.run([exe, "inspect", "--raw", *_tls(ref, "--tls-verify"),
                           f"docker://{ref}"], capture_output=True, text=True,
                          timeout=INSPECT_TIMEOUT, check=False)
    if proc.returncode != 0:
        raise LabError(f"{ref}: {_last_line(proc)}",
                       hint="check the name and that this machine reaches the registry")
    try:
        doc = json.loads(proc.stdout)
    except ValueError:
        raise LabError(f"{ref}: the registry's manifest is not JSON") from None
    if not isinstance(doc, dict):
        raise LabError(f"{ref}: the registry's manifest is not a JSON object")
    return doc


@dataclass
class Planned:
    """One image of a dry run: its reference, the bytes to download, where it was listed."""

    ref: str
    size: int | None
    error: str = ""


def _pick(index: dict[str, Any], arch: str) -> str | None:
    """The digest of index's linux/ARCH entry (arm64: variant v8 or none first)."""
    found = []
    for entry in index.get("manifests") or []:
        plat = entry.get("platform") or {}
        if plat.get("os") == OS and plat.get("architecture") == arch:
            found.append(entry)
    found.sort(key=lambda e: (e.get("platform") or {}).get("variant") not in (None, "", "v8"))
    return str(found[0]["digest"]) if found else None


def size(ref: str, arch: str, skopeo: str = "skopeo") -> int:
    """Compressed bytes of linux/ARCH's image of REF (config + layers + manifest)."""
    doc = inspect_raw(ref, skopeo)
    if "manifests" in doc:
        digest = _pick(doc, arch)
        if digest is None:
            have = sorted({f"{(m.get('platform') or {}).get('os')}/"
                           f"{(m.get('platform') or {}).get('architecture')}"
                           for m in doc.get("manifests") or []})
            raise LabError(f"{ref}: no {OS}/{arch} image (the registry has "
                           f"{', '.join(have) or 'none'})",
                           hint=f"pick an image built for {arch}")
        repo = ref.split("@", 1)[0]
        last = repo.rsplit("/", 1)
        if ":" in last[-1]:
            repo = repo[: repo.rfind(":")]
        doc = inspect_raw(f"{repo}@{digest}", skopeo)
    layers = doc.get("layers")
    if not isinstance(layers, list):
        raise LabError(f"{ref}: the registry's manifest lists no layers (schema "
                       f"{doc.get('schemaVersion')}, {doc.get('mediaType')})")
    total = int((doc.get("config") or {}).get("size") or 0)
    return total + sum(int(layer.get("size") or 0) for layer in layers)


def plan(refs: list[str], arch: str, skopeo: str = "skopeo") -> list[Planned]:
    """Every image's size for linux/ARCH, or the one-line reason it cannot be had."""
    out = []
    for ref in refs:
        try:
            out.append(Planned(ref, size(normalize(ref), arch, skopeo)))
        except LabError as exc:
            out.append(Planned(ref, None, str(exc).splitlines()[0]))
    return out
