"""A baked box (`kflab box build`) on this machine: read its file or metadata, check its
sha256, and add it to Vagrant under a content-addressed name (kflab-box/<sha256 prefix>), so
two different boxes never share a name and the same box is added once.

The metadata file is Vagrant's box metadata format (name, versions[].providers[] with url,
checksum_type, checksum): `vagrant box add metadata.json` reads it too. Its url is the box
file's name, relative to the metadata file, so the hand-out folder can be copied anywhere.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from lab.digest import sha256_file
from lab.errors import LabError
from lab.providers.base import Say

PREFIX = "kflab-box"
_LIST = re.compile(r"^(\S+)\s+\(([^,]+), ([^)\s,]+)")


def content_name(sha256: str) -> str:
    return f"{PREFIX}/{sha256[:16]}"


@dataclass(frozen=True)
class BoxRef:
    name: str
    version: str
    provider: str
    file: Path
    sha256: str  # the expected value (the metadata's), or the file's own for a bare .box
    metadata: Path | None = None


def metadata_doc(name: str, version: str, provider: str, box_file: str, sha256: str) -> dict:
    """Vagrant's box metadata for one version and one provider."""
    return {"name": name, "description": "A kflab lab baked by `kflab box build`",
            "versions": [{"version": version, "providers": [{
                "name": provider, "url": box_file, "checksum_type": "sha256",
                "checksum": sha256}]}]}


def read(path: Path, provider: str) -> BoxRef:
    """The box a .box file or a metadata .json names (not yet checked against its sha256)."""
    if path.suffix != ".json":
        return BoxRef("", "0", provider, path, "")
    try:
        doc = json.loads(path.read_text())
        name, versions = doc["name"], doc["versions"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise LabError(f"{path}: not a Vagrant box metadata file ({exc})",
                       hint="give the metadata.json that `kflab box build` wrote") from None
    for ver in reversed(versions if isinstance(versions, list) else []):
        for prov in ver.get("providers") or []:
            if prov.get("name") != provider:
                continue
            if prov.get("checksum_type") != "sha256" or \
                    not re.fullmatch(r"[0-9a-f]{64}", str(prov.get("checksum", ""))):
                raise LabError(f"{path}: versions[].providers[{provider}] has no sha256 "
                               "checksum (checksum_type: sha256, checksum: 64 hex digits)",
                               hint="kflab adds only a box it can verify: build it with "
                                    "`kflab box build`")
            url = str(prov.get("url", ""))
            file = Path(url.removeprefix("file://"))
            if not file.is_absolute():
                file = path.resolve().parent / file
            if name != content_name(prov["checksum"]):
                raise LabError(f"{path}: name {name!r} is not the box's content name "
                               f"{content_name(prov['checksum'])!r}",
                               hint="the metadata was edited: use the one `kflab box build` "
                                    "wrote")
            return BoxRef(name, str(ver.get("version", "0")), provider, file,
                          prov["checksum"], path)
    raise LabError(f"{path}: no box for the {provider} provider",
                   hint="build the box with the lab's provider")


def added(name: str, version: str, provider: str) -> bool:
    out = subprocess.run(["vagrant", "box", "list"], capture_output=True, text=True,
                         check=False, env={**os.environ, "VAGRANT_NO_COLOR": "1"}).stdout
    return any(m and m.groups() == (name, provider, version)
               for m in map(_LIST.match, out.splitlines()))


def ensure_added(path: Path, provider: str, say: Say) -> BoxRef:
    """Check the box's sha256 and add it to Vagrant (once); returns the name to boot."""
    ref = read(path, provider)
    if not ref.file.is_file():
        raise LabError(f"{ref.file} does not exist" + (f" (the url of {path})" if ref.metadata
                                                       else ""),
                       hint="copy the .box file beside its metadata.json")
    say(f"box {ref.file.name}: checking its sha256")
    got = sha256_file(ref.file)
    if ref.metadata is None:
        ref = BoxRef(content_name(got), ref.version, provider, ref.file, got)
    elif got != ref.sha256:
        raise LabError(f"{ref.file}: sha256 {got}, but {ref.metadata} says {ref.sha256}",
                       hint="the box changed or was copied incompletely: copy it again")
    if added(ref.name, ref.version, provider):
        say(f"box {ref.name} {ref.version} is already in Vagrant (sha256 {got[:16]}...)")
        return ref
    say(f"vagrant box add {ref.name} {ref.version} ({ref.file.stat().st_size / 2**30:.1f} GiB)")
    if ref.metadata is not None:  # Vagrant checks the metadata's checksum once more
        argv = ["vagrant", "box", "add", "--provider", provider, str(ref.metadata.resolve())]
        cwd = ref.metadata.resolve().parent  # where the relative url points
    else:
        argv = ["vagrant", "box", "add", "--name", ref.name, "--provider", provider,
                "--checksum-type", "sha256", "--checksum", got, str(ref.file.resolve())]
        cwd = ref.file.resolve().parent
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=cwd, check=False,
                          env={**os.environ, "VAGRANT_NO_COLOR": "1"})
    if proc.returncode != 0:
        tail = (proc.stderr.strip() or proc.stdout.strip()).splitlines()[-4:]
        raise LabError("vagrant box add failed: " + " / ".join(tail),
                       hint=f"try it by hand: cd {cwd} && {' '.join(argv)}")
    return ref
