"""Files a workload wrote in its pod, brought back into the learner's work folder.

kflab's pod runner (podrun.py) prints each new or changed file of the pod's working
directory as marker lines in the container log; `collect` reassembles them (checking every
chunk and the sha256) and writes them under the work folder, refusing any path that would
land outside it. `visible` drops the marker lines from logs shown to people.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Iterable, Iterator
from pathlib import Path, PurePosixPath

from lab.backends.cluster.podrun import MARKER
from lab.errors import LabError


def visible(lines: Iterable[str]) -> Iterator[str]:
    return (line for line in lines if not line.startswith(MARKER))


def parse(lines: Iterable[str]) -> dict[str, bytes]:
    """relative path -> content, from marker lines; incomplete or corrupt files are skipped."""
    parts: dict[str, dict[int, bytes]] = {}
    meta: dict[str, tuple[int, str]] = {}
    for line in lines:
        if not line.startswith(MARKER):
            continue
        try:
            rec = json.loads(line[len(MARKER):])
            path, part, total = str(rec["path"]), int(rec["part"]), int(rec["parts"])
            data = base64.b64decode(rec["data"], validate=True)
        except (ValueError, KeyError, TypeError, binascii.Error):
            continue
        if meta.get(path, (total, rec.get("sha256")))[1] != rec.get("sha256"):
            parts.pop(path, None)  # a newer version of the file: start over
        meta[path] = (total, str(rec.get("sha256")))
        parts.setdefault(path, {})[part] = data
    out = {}
    for path, chunks in parts.items():
        total, digest = meta[path]
        if sorted(chunks) != list(range(total)):
            continue
        content = b"".join(chunks[i] for i in range(total))
        if hashlib.sha256(content).hexdigest() == digest:
            out[path] = content
    return out


def safe_target(base: Path, rel: str) -> Path:
    """`base/rel` when `rel` is a plain relative path that stays inside `base`."""
    pure = PurePosixPath(rel)
    if pure.is_absolute() or ".." in pure.parts or not pure.parts or rel != pure.as_posix():
        raise LabError(f"refusing output path {rel!r} from a pod",
                       hint="outputs must be relative paths inside the work folder")
    target = (base / pure).resolve()
    root = base.resolve()
    if root not in target.parents:
        raise LabError(f"refusing output path {rel!r}: it leaves {root}")
    return target


def collect(lines: Iterable[str], base: Path) -> list[str]:
    """Write the files found in `lines` under `base`; returns their relative paths."""
    written = []
    for rel, content in sorted(parse(lines).items()):
        target = safe_target(base, rel)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.kflab-tmp")
        tmp.write_bytes(content)
        tmp.replace(target)
        written.append(rel)
    return written
