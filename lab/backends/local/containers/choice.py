"""Process or container: which runtime a manifest's workload gets here, and why.

The rule (DESIGN.md): a local process when every image of the workload is one kflab runs
as a process (images.runs_locally), else containers of those very images, through the
engine engine.py picks. A job's replicas all run the same way (one network: loopback for
processes, a container network otherwise). The annotation `kflab.dev/runtime` on the
resource overrides it: `container` runs even known images in containers, `process` runs
the manifest's command on this machine whatever the image (the image's own files are then
not there); `$KFLAB_RUNTIME` says the same for every resource without the annotation.

For a whole manifest of any kind, lab/backends/local/workloads.py `decide(obj)` answers
without starting anything.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from lab.backends.local.containers import engine as engines
from lab.backends.local.containers import images
from lab.errors import InputError, LabError

ANNOTATION = "kflab.dev/runtime"
ENV = "KFLAB_RUNTIME"  # the same for every resource (the annotation wins)
VALUES = ("process", "container")


def override(obj: dict[str, Any]) -> str | None:
    """The annotation's value (validated), else $KFLAB_RUNTIME's, or None."""
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    notes = (meta or {}).get("annotations") if isinstance(meta, dict) else None
    value = notes.get(ANNOTATION) if isinstance(notes, dict) else None
    if value is None:
        env = os.environ.get(ENV, "").strip()
        if env and env not in VALUES:
            raise LabError(f"{ENV}={env!r} is not a runtime kflab knows",
                           hint="set it to process or container, or unset it")
        return env or None
    if value not in VALUES:
        raise InputError(None, f"metadata.annotations.{ANNOTATION}",
                         f"{value!r} is not a runtime kflab knows",
                         hint="use process or container (or remove it: kflab picks by "
                              "image)")
    return str(value)


def needs_container(found: Iterable[tuple[str, Any]], obj: dict[str, Any]) -> \
        tuple[str, str] | None:
    """(field, image) of the first image that needs a container, honouring the
    annotation; None when the workload runs as processes."""
    forced = override(obj)
    if forced == "process":
        return None
    for where, image in found:
        if forced == "container" or not images.runs_locally(image):
            return where, str(image)
    return None


def engine_for(found: Iterable[tuple[str, Any]], obj: dict[str, Any],
               what: str) -> engines.Engine | None:
    """The engine to run the workload's containers, None for processes; refuses (naming
    Podman or Docker and the image) when it needs one that is missing or not running."""
    first = needs_container(found, obj)
    if first is None:
        return None
    where, image = first
    return engines.require(f"{what}: image {image} ({where})")
