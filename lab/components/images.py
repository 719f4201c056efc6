"""Every container image the lab can run: what an offline image bundle must hold.

Deployments name only the controllers. The images a lab pulls while it works are in their
runtime configuration: Argo's executor and KFP's driver/launcher (container args and env),
KServe's storage initializer, agent and model servers (the inferenceservice-config ConfigMap,
ClusterServingRuntimes, ClusterStorageContainers), Katib's suggestion, early-stopping and
metrics-collector images (the katib-config ConfigMap), cert-manager's ACME solver (an arg),
plus the images manifests/versions.yaml lists (workload images, compiled-in defaults).

One generic reader finds them all, so a new upstream release needs no new code:
- any `image` string (with KServe's `defaultImageVersion` beside it, the tag it implies);
- a string under a key named like an image (`cacheImage`, `defaultJobImage`, `*_IMAGE`);
- a container env var whose name ends in IMAGE;
- a `--...-image` flag in args/command (`--flag=VALUE` or `--flag VALUE`);
- the same, inside ConfigMap values that hold JSON or YAML.
Strings are kept exactly as written (tags, digests, registries); templated values
(`$(VAR)`, `{{ }}`) are not images yet and are left out.

Each image also says what it is used for (`uses`), read from the objects that name it, so an
offline bundle can hold only what the labs use (lab/teaching/imageset.py):
- `controller`: a container of a component's own workload (Deployment, StatefulSet, ...);
- `argo-executor`, `kfp-driver`, `kfp-launcher`, `kfp-cache-image`: what every pipeline run
  starts (workflow-controller's --executor-image, ml-pipeline's V2_DRIVER_IMAGE and
  V2_LAUNCHER_IMAGE, pipeline-install-config's cacheImage);
- `acme-solver`: cert-manager's HTTP-01 solver (ACME issuers only);
- `katib-suggestion:ALGO`, `katib-earlystopping:ALGO`, `katib-collector:KIND` (katib-config),
  `katib-trial-template` (the example trial templates);
- `kserve-runtime:NAME` (a ClusterServingRuntime), `kserve-config:KEY` (inferenceservice-
  config: agent, batcher, router, storageInitializer, localModel; a ClusterStorageContainer
  is `storageInitializer`), `kserve-explainer:NAME`;
- `trainer-runtime:NAME` (a ClusterTrainingRuntime's default image);
- `versions:GROUP` (manifests/versions.yaml `images:`); anything else `other`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from lab.components.catalog import IMAGE_RE, Catalog

WORKLOADS = ("Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob", "Pod", "ReplicaSet")
_KEY_RE = re.compile(r"(?:^image$|Image$|_IMAGE$|-image$)")
_FLAG_RE = re.compile(r"^--?[A-Za-z0-9.-]*image(?:=(?P<value>.*))?$", re.IGNORECASE)


@dataclass
class Image:
    """One image and every place that names it (component: where)."""

    image: str
    sources: list[str] = field(default_factory=list)
    uses: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"image": self.image, "sources": self.sources, "uses": self.uses}


def is_image(value: str) -> bool:
    return bool(IMAGE_RE.match(value))


def _where(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    name = f"{meta['namespace']}/{meta.get('name')}" if meta.get("namespace") else meta.get("name")
    return f"{obj.get('kind')} {name}"


def _embedded(text: str) -> Any:
    """A ConfigMap value parsed as JSON, else YAML; None when it is neither (plain text)."""
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return None


def _flags(argv: list[Any], path: str) -> Iterator[tuple[str, str]]:
    for i, arg in enumerate(argv):
        if not isinstance(arg, str):
            continue
        m = _FLAG_RE.match(arg)
        if not m:
            continue
        flag = arg.split("=", 1)[0]
        value = m.group("value")
        if value is None and i + 1 < len(argv) and isinstance(argv[i + 1], str):
            value = argv[i + 1]
        if value:
            yield value, f"{path} {flag}"


def _walk(node: Any, path: str) -> Iterator[tuple[str, str]]:
    """(image, where) for every image named in a parsed document."""
    if isinstance(node, list):
        for i, item in enumerate(node):
            yield from _walk(item, f"{path}[{i}]")
        return
    if not isinstance(node, dict):
        return
    name, value = node.get("name"), node.get("value")
    if isinstance(name, str) and isinstance(value, str) and name.upper().endswith("IMAGE"):
        yield value, f"{path} env {name}"
    for key, val in node.items():
        here = f"{path}.{key}" if path else str(key)
        if isinstance(val, str) and isinstance(key, str) and _KEY_RE.search(key):
            version = node.get("defaultImageVersion") if key == "image" else None
            if isinstance(version, str) and version and ":" not in val.rsplit("/", 1)[-1] \
                    and "@" not in val:
                val = f"{val}:{version}"  # KServe explainers: image + defaultImageVersion
            yield val, here
        elif key in ("args", "command") and isinstance(val, list):
            yield from _flags(val, here)
        else:
            yield from _walk(val, here)


def object_images(obj: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(image, where) for one Kubernetes object, its ConfigMap payloads included."""
    where = _where(obj)
    if obj.get("kind") == "CustomResourceDefinition":
        return  # schemas and descriptions, never an image that runs
    if obj.get("kind") == "ConfigMap":
        for key, text in (obj.get("data") or {}).items():
            if not isinstance(text, str):
                continue
            if _KEY_RE.search(str(key)):
                yield text.strip(), f"{where} data.{key}"
                continue
            parsed = _embedded(text)
            if isinstance(parsed, (dict, list)):
                for image, path in _walk(parsed, ""):
                    yield image, f"{where} data.{key}: {path}"
        return
    for image, path in _walk(obj.get("spec") or {}, "spec"):
        yield image, f"{where} {path}"


def _templated(value: str) -> bool:
    return "$(" in value or "{{" in value or "${" in value


def collect(found: dict[str, Image], pairs: Iterator[tuple[str, str]], component: str,
            uses: dict[str, set[str]] | None = None) -> None:
    for image, where in pairs:
        image = image.strip()
        if not image or _templated(image) or not is_image(image):
            continue
        entry = found.setdefault(image, Image(image))
        entry.sources.append(f"{component}: {where}")
        for use in sorted((uses or {}).get(image, {"other"})):
            if use not in entry.uses:
                entry.uses.append(use)


def _containers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for c in (spec.get("containers") or []) + (spec.get("initContainers") or [])
            if isinstance(c, dict)]


def runtime_uses(obj: dict[str, Any]) -> dict[str, set[str]]:
    """image -> what it is used for, for one rendered object (see the module's docstring)."""
    out: dict[str, set[str]] = {}

    def add(image: Any, use: str) -> None:
        if isinstance(image, str) and image.strip():
            out.setdefault(image.strip(), set()).add(use)

    kind, meta = obj.get("kind"), obj.get("metadata") or {}
    name, spec = meta.get("name"), obj.get("spec") or {}
    if kind in WORKLOADS:
        pod = spec
        if kind == "CronJob":
            pod = ((spec.get("jobTemplate") or {}).get("spec") or {})
        pod = ((pod.get("template") or {}).get("spec") or {}) if kind != "Pod" else pod
        for c in _containers(pod):
            add(c.get("image"), "controller")
            for value, flag in _flags(list(c.get("args") or []) + list(c.get("command") or []),
                                      ""):
                flag = flag.strip()
                add(value, {"--executor-image": "argo-executor",
                            "--acme-http01-solver-image": "acme-solver"}.get(flag, "other"))
            for env in c.get("env") or []:
                if isinstance(env, dict) and str(env.get("name", "")).upper().endswith("IMAGE"):
                    add(env.get("value"), {"V2_DRIVER_IMAGE": "kfp-driver",
                                           "V2_LAUNCHER_IMAGE": "kfp-launcher"}.get(
                                               str(env.get("name")), "other"))
    elif kind == "ConfigMap":
        data = obj.get("data") or {}
        if name == "pipeline-install-config":
            add(data.get("cacheImage"), "kfp-cache-image")
        elif name == "katib-config":
            config = _embedded(str(data.get("katib-config.yaml", ""))) or {}
            runtime = config.get("runtime") or {} if isinstance(config, dict) else {}
            for key, use, by in (("suggestions", "katib-suggestion", "algorithmName"),
                                 ("earlyStoppings", "katib-earlystopping", "algorithmName"),
                                 ("metricsCollectors", "katib-collector", "kind")):
                for entry in runtime.get(key) or []:
                    if isinstance(entry, dict):
                        add(entry.get("image"), f"{use}:{entry.get(by)}")
        elif name == "trial-templates":
            for text in data.values():
                for image, _ in _walk(_embedded(str(text)), ""):
                    add(image, "katib-trial-template")
        elif name == "inferenceservice-config":
            for key, text in data.items():
                parsed = _embedded(str(text))
                if key == "explainers" and isinstance(parsed, dict):
                    for explainer, conf in parsed.items():
                        for image, _ in _walk(conf, ""):
                            add(image, f"kserve-explainer:{explainer}")
                    continue
                for image, _ in _walk(parsed, ""):
                    add(image, f"kserve-config:{key}")
    elif kind in ("ClusterServingRuntime", "ServingRuntime"):
        for image, _ in _walk(spec, ""):
            add(image, f"kserve-runtime:{name}")
    elif kind == "ClusterStorageContainer":  # KServe's storage initializer, per URI kind
        for image, _ in _walk(spec, ""):
            add(image, "kserve-config:storageInitializer")
    elif kind in ("ClusterTrainingRuntime", "TrainingRuntime"):
        for image, _ in _walk(spec, ""):
            add(image, f"trainer-runtime:{name}")
    return out


def catalog_images(cat: Catalog, gpu: bool) -> Iterator[tuple[str, str]]:
    """Images manifests/versions.yaml lists (every string under `images:`); a group whose
    name says gpu only for a GPU lab."""
    for key, images in cat.images.items():
        if "gpu" in key.lower() and not gpu:
            continue
        for i, image in enumerate(images):
            yield image, f"images.{key}[{i}]"


def lab_images(upstream: Path, gpu: bool = False) -> list[Image]:
    """Every image the lab's components run or pull at runtime, sorted, each once."""
    from lab.components.catalog import load
    from lab.components.render import render

    cat = load()
    found: dict[str, Image] = {}
    for comp in cat.components:
        if comp.gpu_only and not gpu:
            continue
        for obj in render(comp.overlay, upstream):
            collect(found, object_images(obj), comp.name, runtime_uses(obj))
    add_catalog(found, cat, gpu)
    return [found[k] for k in sorted(found)]


def add_catalog(found: dict[str, Image], cat: Catalog, gpu: bool) -> None:
    """versions.yaml's images, each used as `versions:GROUP`."""
    for key, images in cat.images.items():
        if "gpu" in key.lower() and not gpu:
            continue
        collect(found, ((image, f"images.{key}[{i}]") for i, image in enumerate(images)),
                "versions.yaml", {image: {f"versions:{key}"} for image in images})
