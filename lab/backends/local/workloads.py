"""Which runtime a whole manifest's workload gets on the local backend, starting nothing.

`decide(obj)` is the question the upstream examples' sweep (docs/fidelity.md) asks of each
example: would this run as local processes, in containers (and with which engine), or be
refused (and why)? It reads each kind's workload containers as its handler does
(`containers_of`) and applies the same rule (containers/choice.py), so its answer is the
handler's; an engine is probed only when a container is needed. Above the kinds' modules
and the containers package (it imports them; they never import it).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from lab.backends.local.containers import engine as engines
from lab.backends.local.containers import images
from lab.backends.local.containers.choice import ANNOTATION, needs_container, override
from lab.backends.local.serving import runtime_images
from lab.backends.local.serving.spec import image_runtime
from lab.backends.local.training.kinds import flavor_for
from lab.backends.local.training.runtimes import SHIPPED
from lab.errors import LabError


def containers_of(obj: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """(field path, image) of every workload container a kind runs on the local backend."""
    kind = obj.get("kind")
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
    if kind in ("PyTorchJob", "TFJob"):
        flavor = flavor_for(str(kind))
        for rtype, rs in (spec.get(flavor.specs_key) or {}).items():
            yield from _named(rs, f"spec.{flavor.specs_key}.{rtype}", flavor.container)
    elif kind == "TrainJob":
        trainer = spec.get("trainer") if isinstance(spec.get("trainer"), dict) else {}
        if trainer.get("image"):
            yield "spec.trainer.image", trainer["image"]
        else:
            ref = (spec.get("runtimeRef") or {}).get("name") \
                if isinstance(spec.get("runtimeRef"), dict) else None
            runtime = SHIPPED.get(str(ref))
            if runtime is not None and runtime.image:
                yield f"ClusterTrainingRuntime {ref} (its node container)", runtime.image
    elif kind == "Experiment":
        tt = spec.get("trialTemplate") if isinstance(spec.get("trialTemplate"), dict) else {}
        trial = tt.get("trialSpec")
        if isinstance(trial, dict) and trial.get("kind") == "TrainJob":  # its trainer's image
            yield from (("spec.trialTemplate.trialSpec." + where, image)
                        for where, image in containers_of(trial))
        elif isinstance(trial, dict):
            yield from _all(trial, "spec.trialTemplate.trialSpec")
    elif kind == "InferenceService":
        pred = spec.get("predictor") if isinstance(spec.get("predictor"), dict) else {}
        for i, c in enumerate(pred.get("containers") or []):
            if isinstance(c, dict):
                yield f"spec.predictor.containers[{i}].image", c.get("image")
        if (found := image_runtime(obj)) is not None:  # a format only its runtime serves
            runtime, model, where, _ = found
            image = runtime_images.container(runtime, "", model)["image"]
            yield f"KServe's runtime {runtime} for {where}", image
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
    if obj.get("kind") == "InferenceService" and image_runtime(obj) is not None:
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
