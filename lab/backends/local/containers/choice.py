"""Process or container: which runtime a manifest's workload gets here, and why.

The rule (DESIGN.md): a local process when every image of the workload is one kflab runs
as a process (images.runs_locally), else containers of those very images, through the
engine engine.py picks. A job's replicas all run the same way (one network: loopback for
processes, a container network otherwise). The annotation `kflab.dev/runtime` on the
resource overrides it: `container` runs even known images in containers, `process` runs
the manifest's command on this machine whatever the image (the image's own files are then
not there); `$KFLAB_RUNTIME` says the same for every resource without the annotation.

`decide(obj)` answers for a whole manifest without starting anything: what the upstream
examples' sweep (docs/fidelity.md) asks of each example: "would this run in a container
here, and with which engine?".
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
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


# --- whole manifests (the sweep's question) ------------------------------------------------

def containers_of(obj: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """(field path, image) of every workload container a kind runs on the local backend."""
    kind = obj.get("kind")
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
    if kind in ("PyTorchJob", "TFJob"):
        from lab.backends.local.training.spec import flavor_for

        flavor = flavor_for(str(kind))
        for rtype, rs in (spec.get(flavor.specs_key) or {}).items():
            yield from _named(rs, f"spec.{flavor.specs_key}.{rtype}", flavor.container)
    elif kind == "TrainJob":
        trainer = spec.get("trainer") if isinstance(spec.get("trainer"), dict) else {}
        if trainer.get("image"):
            yield "spec.trainer.image", trainer["image"]
        else:
            from lab.backends.local.training.runtimes import SHIPPED

            ref = (spec.get("runtimeRef") or {}).get("name") \
                if isinstance(spec.get("runtimeRef"), dict) else None
            runtime = SHIPPED.get(str(ref))
            if runtime is not None and runtime.image:
                yield f"ClusterTrainingRuntime {ref} (its node container)", runtime.image
    elif kind == "Experiment":
        tt = spec.get("trialTemplate") if isinstance(spec.get("trialTemplate"), dict) else {}
        trial = tt.get("trialSpec")
        if isinstance(trial, dict):
            yield from _all(trial, "spec.trialTemplate.trialSpec")
    elif kind == "InferenceService":
        pred = spec.get("predictor") if isinstance(spec.get("predictor"), dict) else {}
        for i, c in enumerate(pred.get("containers") or []):
            if isinstance(c, dict):
                yield f"spec.predictor.containers[{i}].image", c.get("image")
    elif kind == "Notebook":
        pod = ((spec.get("template") or {}).get("spec") or {}) \
            if isinstance(spec.get("template"), dict) else {}
        for i, c in enumerate((pod.get("containers") or [])[:1]):
            if isinstance(c, dict):
                yield f"spec.template.spec.containers[{i}].image", c.get("image")


def _named(replica: Any, where: str, name: str) -> Iterator[tuple[str, Any]]:
    pod = ((replica or {}).get("template") or {}).get("spec") or {} \
        if isinstance(replica, dict) else {}
    for i, c in enumerate(pod.get("containers") or [] if isinstance(pod, dict) else []):
        if isinstance(c, dict) and c.get("name") == name:
            yield f"{where}.template.spec.containers[{i}].image", c.get("image")


def _all(node: Any, where: str) -> Iterator[tuple[str, Any]]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "containers" and isinstance(value, list):
                for i, c in enumerate(value):
                    if isinstance(c, dict):
                        yield f"{where}.containers[{i}].image", c.get("image")
            else:
                yield from _all(value, f"{where}.{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _all(value, f"{where}[{i}]")


@dataclass(frozen=True)
class Decision:
    """How the local backend would run a manifest's workload here."""

    runtime: str  # process | container | refused
    engine: str | None  # podman | docker, for containers
    images: tuple[str, ...]  # the images that need a container
    reason: str  # why (the refusal's message for `refused`)


def forced(obj: dict[str, Any]) -> dict[str, Any]:
    """The object as the choice reads it: a KServe custom predictor always runs its image
    (the local model servers serve only modelFormat predictors)."""
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
    pred = spec.get("predictor") if isinstance(spec.get("predictor"), dict) else {}
    if obj.get("kind") == "InferenceService" and pred.get("containers"):
        return {"metadata": {"annotations": {ANNOTATION: "container"}}}
    return obj


def decide(obj: dict[str, Any]) -> Decision:
    """Process, container (and which engine) or refused, for any manifest, starting nothing."""
    found = list(containers_of(obj))
    obj = forced(obj) | {"kind": obj.get("kind")}
    try:
        first = needs_container(found, obj)
    except LabError as exc:
        return Decision("refused", None, (), str(exc).splitlines()[0])
    if first is None:
        why = ("the annotation asks for processes" if override(obj) == "process" else
               "every image is one kflab runs as a local process" if found else
               "no workload container")
        return Decision("process", None, (), why)
    wanted = tuple(dict.fromkeys(str(i) for _, i in found
                                 if override(obj) == "container" or
                                 not images.runs_locally(i)))
    try:
        engine = engines.require(f"{obj.get('kind')}: image {first[1]} ({first[0]})")
    except LabError as exc:
        return Decision("refused", None, wanted, str(exc).splitlines()[0])
    return Decision("container", engine.name, wanted,
                    f"{len(wanted)} image(s) kflab does not run as processes; "
                    f"{engine.label} runs them")
