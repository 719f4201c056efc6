"""Which images an offline bundle holds: what the labs use, not everything the components
could run.

`kflab components images` lists every image the installed components name (65 for the lab
profile at 26.03): every KServe serving runtime, every Katib algorithm and example, two CUDA
PyTorch images. A class needs far fewer, and each image is stored twice on the lab machine
(the archive, then containerd's copy). The default set is:

- every component's own controllers (`controller`), and the verify role's images (it runs at
  every `kflab up`);
- what every pipeline run starts (Argo's executor, KFP's driver and launcher, the cache
  image), when a lab runs pipelines;
- the Katib suggestion of each algorithm the labs' Experiments name, the metrics collector
  of each collector kind they use (StdOut by default), an early-stopping service only when
  an Experiment asks for one;
- the KServe serving runtime KServe picks for each lab InferenceService's model format and
  protocol (the same choice the local backend makes: lab/backends/local/serving/runtimes.py),
  the storage initializer when a storageUri is not a local folder, the agent for a logger or
  batcher, an explainer only when asked for;
- a ClusterTrainingRuntime's image when a lab TrainJob uses that runtime without its own
  image; the training operator's init container (versions.yaml) when a lab runs PyTorchJobs;
- every image the labs' manifests name, and the pipeline steps' base images
  (lab/teaching/steps.py).
An image whose use kflab does not know is kept (a bundle must not miss what a lab needs).
`--all-runtimes` keeps everything.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lab.errors import LabError

ALWAYS = ("controller", "other", "versions:verify")
PIPELINE_RUN = ("argo-executor", "kfp-driver", "kfp-launcher", "kfp-cache-image")
WORKLOAD_KINDS = ("Experiment", "PyTorchJob", "TFJob", "TrainJob", "InferenceService",
                  "Notebook", "Pod", "Job", "Deployment", "StatefulSet")


@dataclass
class Chosen:
    image: str
    why: list[str] = field(default_factory=list)


@dataclass
class LabUse:
    """What the labs' manifests and pipelines use."""

    uses: set[str] = field(default_factory=set)
    images: dict[str, list[str]] = field(default_factory=dict)  # image -> labs naming it

    def image(self, image: str, lab: str) -> None:
        labs = self.images.setdefault(image, [])
        if lab not in labs:
            labs.append(lab)


def _walk_images(node: Any) -> list[str]:
    if isinstance(node, dict):
        out = []
        for key, value in node.items():
            if key == "image" and isinstance(value, str):
                out.append(value)
            else:
                out += _walk_images(value)
        return out
    if isinstance(node, list):
        return [i for item in node for i in _walk_images(item)]
    return []


def _serving(spec: dict[str, Any], use: LabUse) -> None:
    from lab.backends.local.serving import runtimes

    predictor = spec.get("predictor") or {}
    model = predictor.get("model") or {}
    fmt = (model.get("modelFormat") or {}) if isinstance(model, dict) else {}
    name = fmt.get("name")
    if not name:  # the older style: predictor.sklearn, predictor.xgboost, ...
        name = next((k for k in predictor if k in ("sklearn", "xgboost", "lightgbm",
                                                     "tensorflow", "pytorch", "onnx",
                                                     "triton", "pmml", "paddle",
                                                     "huggingface")), None)
        model = predictor.get(name) or {} if name else {}
    if name:
        # KServe refuses a model no runtime serves (it names none): nothing to bundle then
        with contextlib.suppress(runtimes.NoRuntime):
            use.uses.add("kserve-runtime:" + runtimes.choose(
                str(name), fmt.get("version"), model.get("protocolVersion"),
                model.get("runtime")))
    uri = str(model.get("storageUri") or "")
    if uri and not uri.startswith("file://"):  # kflab mounts file:// folders itself
        use.uses.update({"kserve-config:storageInitializer"})
    if predictor.get("logger") or predictor.get("batcher"):
        use.uses.update({"kserve-config:agent", "kserve-config:logger",
                         "kserve-config:batcher"})
    for part in ("explainer",):
        for key in (spec.get(part) or {}):
            use.uses.add(f"kserve-explainer:{key}")


def _object(obj: dict[str, Any], lab: str, use: LabUse) -> None:
    kind, spec = obj.get("kind"), obj.get("spec") or {}
    for image in _walk_images(spec):
        use.image(image, lab)
    if kind == "Experiment":
        algo = (spec.get("algorithm") or {}).get("algorithmName")
        if algo:
            use.uses.add(f"katib-suggestion:{algo}")
        early = (spec.get("earlyStopping") or {}).get("algorithmName")
        if early:
            use.uses.add(f"katib-earlystopping:{early}")
        collector = (((spec.get("metricsCollectorSpec") or {}).get("collector") or {})
                     .get("kind") or "StdOut")
        use.uses.add(f"katib-collector:{collector}")
    elif kind == "PyTorchJob":
        use.uses.add("versions:training-operator-defaults")
    elif kind == "InferenceService":
        _serving(spec, use)
    elif kind == "TrainJob":
        runtime = (spec.get("runtimeRef") or {}).get("name")
        if runtime and not (spec.get("trainer") or {}).get("image"):
            use.uses.add(f"trainer-runtime:{runtime}")


def lab_use(steps: dict[str, Any] | None = None) -> LabUse:
    """What every lab's manifests (assets and solutions) and pipelines use."""
    from lab.scenarios.loader import load_all
    from lab.yamlio import load_documents, read_text

    use = LabUse()
    for scenario in load_all():
        for folder in (scenario.assets, scenario.root / "solutions"):
            for path in sorted(folder.rglob("*.y*ml")) if folder.is_dir() else []:
                try:
                    docs = load_documents(read_text(path), str(path))
                except LabError:  # not a manifest
                    continue
                for doc in docs:
                    if isinstance(doc.data, dict) and doc.data.get("kind") in WORKLOAD_KINDS:
                        _object(doc.data, scenario.id, use)
        if "pipelines" in scenario.requires:
            use.uses.update(PIPELINE_RUN)
    if steps is None:
        from lab.teaching.steps import shipped

        steps = shipped()
    for lab, entries in (steps.get("labs") or {}).items():
        for entry in entries:
            use.image(entry["image"], f"{lab} (pipeline step)")
    return use


def _needed(uses: list[str], wanted: set[str], gpu: bool) -> list[str]:
    """The reasons an image with these uses is needed ([] = not needed)."""
    return [u for u in uses
            if u in ALWAYS or u in wanted or (gpu and u.startswith("versions:gpu"))]


def select(*, gpu: bool = False, all_runtimes: bool = False, upstream: Path | None = None,
           steps: dict[str, Any] | None = None) -> list[Chosen]:
    """The images a class bundle holds, each with why (sorted by reference)."""
    from lab.components import release
    from lab.components.images import lab_images
    from lab.components.reference import normalize

    every = lab_images(upstream, gpu) if upstream else release.images(gpu)
    use = lab_use(steps)
    chosen: dict[str, Chosen] = {}
    for img in every:
        why = list(img.uses) if all_runtimes else _needed(img.uses, use.uses, gpu)
        if why:
            chosen.setdefault(normalize(img.image), Chosen(normalize(img.image))).why += why
    for image, labs in use.images.items():
        ref = normalize(image)
        chosen.setdefault(ref, Chosen(ref)).why.append("named by " + ", ".join(labs))
    for c in chosen.values():
        c.why = list(dict.fromkeys(c.why))
    return [chosen[k] for k in sorted(chosen)]
