"""Defect 8: `kflab components images` must list every image an offline bundle needs: the
controllers AND what they pull at runtime (executor, driver/launcher, storage initializer,
model servers, suggestion/collector images), plus versions.yaml's `images:`.

The upstream test reads the expected images out of the rendered kubeflow/manifests 26.03
objects by their documented structure (katib-config YAML, inferenceservice-config JSON,
ClusterServingRuntimes, env vars, flags), independently of the generic reader under test,
and names a few by hand so that a reader and a test that agree on a wrong rule still fail."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from lab.components import catalog, images
from lab.components.images import Image, collect, object_images
from lab.errors import InputError
from tests.unit.test_overlays import CATALOG, rendered, upstream  # noqa: F401 - fixture

DIGEST = "sha256:" + "ab" * 32


def _names(objs: list[dict[str, Any]]) -> list[str]:
    found: dict[str, Image] = {}
    for obj in objs:
        collect(found, object_images(obj), "t")
    return sorted(found)


def test_reader_keeps_references_as_written() -> None:
    """Tags, digests and registry ports are kept byte for byte; each image once; templated
    values and CRD schemas are not images; env, both flag forms and ConfigMap payloads are."""
    pod = {"containers": [
        {"name": "a", "image": f"localhost:5000/team/app:1.2@{DIGEST}",
         "args": ["--executor-image", "quay.io/x/exec:v1", f"--solver-image=reg.io/s@{DIGEST}",
                  "--image-pull-policy=Always"],
         "env": [{"name": "V2_DRIVER_IMAGE", "value": "ghcr.io/d/driver:2"},
                 {"name": "SIDECAR_IMAGE", "value": "$(OTHER_IMAGE)"},
                 {"name": "LOG_LEVEL", "value": "info"}]},
        {"name": "b", "image": "localhost:5000/team/app:1.2@" + DIGEST}]}
    objs = [
        {"kind": "Deployment", "metadata": {"name": "d", "namespace": "n"},
         "spec": {"template": {"spec": pod}}},
        {"kind": "ConfigMap", "metadata": {"name": "c", "namespace": "n"}, "data": {
            "cacheImage": "registry.k8s.io/busybox",
            "storageInitializer": json.dumps({"image": "kserve/storage-initializer:v1",
                                              "memoryRequest": "100Mi"}),
            "explainers": json.dumps({"art": {"image": "kserve/art-explainer",
                                              "defaultImageVersion": "latest"}}),
            "config.yaml": "runtime:\n  suggestions:\n  - algorithmName: tpe\n"
                           "    image: ghcr.io/k/suggestion:v0\n",
            "notes": "image: this is prose, not YAML: [",
            "domainTemplate": "{{ .Name }}-{{ .Namespace }}"}},
        {"kind": "CustomResourceDefinition", "metadata": {"name": "x"},
         "spec": {"versions": [{"schema": {"openAPIV3Schema": {"properties": {
             "image": {"type": "string", "default": "should-not:appear"}}}}}]}},
    ]
    assert _names(objs) == sorted([
        f"localhost:5000/team/app:1.2@{DIGEST}", "quay.io/x/exec:v1", f"reg.io/s@{DIGEST}",
        "ghcr.io/d/driver:2", "registry.k8s.io/busybox", "kserve/storage-initializer:v1",
        "kserve/art-explainer:latest", "ghcr.io/k/suggestion:v0"])


def test_versions_images_are_read_generically(tmp_path: Path) -> None:
    """Any nesting under `images:` (a list, a mapping of role -> image, deeper); a group
    named gpu only for a GPU lab; a value that is not an image reference names its field."""
    text = catalog.VERSIONS_FILE.read_text()
    head, _, _ = text.partition("\nimages:\n")
    tail = text[text.index("\ncomponents:\n"):]
    good = tmp_path / "versions.yaml"
    good.write_text(head + "\nimages:\n  gpu:\n    device-plugin: nvcr.io/n/plugin:v1\n"
                    f"    cuda-check: [ghcr.io/w/cuda@{DIGEST}]\n  workloads:\n"
                    "    katib: [ghcr.io/w/trial:1, ghcr.io/w/trial:1]\n"
                    "    serving: {sklearn: kserve/sklearnserver:v0.16.0}\n"
                    "  single: docker.io/library/python:3.11-slim\n" + tail)
    cat = catalog.load(good)
    assert cat.images == {"gpu": ("nvcr.io/n/plugin:v1", f"ghcr.io/w/cuda@{DIGEST}"),
                          "workloads": ("ghcr.io/w/trial:1", "ghcr.io/w/trial:1",
                                        "kserve/sklearnserver:v0.16.0"),
                          "single": ("docker.io/library/python:3.11-slim",)}
    cpu = [i for i, _ in images.catalog_images(cat, gpu=False)]
    gpu = [i for i, _ in images.catalog_images(cat, gpu=True)]
    assert cpu == ["ghcr.io/w/trial:1", "ghcr.io/w/trial:1", "kserve/sklearnserver:v0.16.0",
                   "docker.io/library/python:3.11-slim"]
    assert set(gpu) - set(cpu) == {"nvcr.io/n/plugin:v1", f"ghcr.io/w/cuda@{DIGEST}"}
    bad = tmp_path / "bad.yaml"
    bad.write_text(head + "\nimages:\n  workloads:\n    katib: ['not an image']\n" + tail)
    with pytest.raises(InputError, match=r"images\.workloads\.katib\[0\].*not a container"):
        catalog.load(bad)


def _expected_runtime(objs: list[dict[str, Any]]) -> set[str]:
    """The runtime images, read by each upstream configuration's documented structure."""
    want: set[str] = set()
    for obj in objs:
        kind, name = obj["kind"], obj["metadata"]["name"]
        if kind in ("Deployment", "StatefulSet", "DaemonSet", "Job"):
            for c in obj["spec"]["template"]["spec"]["containers"]:
                want.add(c["image"])
                want |= {e["value"] for e in c.get("env", []) if e["name"].endswith("_IMAGE")
                         and "value" in e}
                args = c.get("args", [])
                want |= {args[i + 1] for i, a in enumerate(args) if a == "--executor-image"}
                want |= {a.split("=", 1)[1] for a in args
                         if a.startswith("--acme-http01-solver-image=")}
        elif kind == "ClusterServingRuntime":
            want |= {c["image"] for c in obj["spec"]["containers"]}
        elif kind == "ClusterStorageContainer":
            want.add(obj["spec"]["container"]["image"])
        elif kind == "ConfigMap" and name == "katib-config":
            cfg = yaml.safe_load(obj["data"]["katib-config.yaml"])["runtime"]
            for part in ("metricsCollectors", "suggestions", "earlyStoppings"):
                want |= {entry["image"] for entry in cfg[part]}
        elif kind == "ConfigMap" and name == "inferenceservice-config":
            for key in ("storageInitializer", "agent", "batcher", "logger", "router"):
                want.add(json.loads(obj["data"][key])["image"])
        elif kind == "ConfigMap" and name == "pipeline-install-config":
            want.add(obj["data"]["cacheImage"])
    return want


def test_every_runtime_image_of_the_lab_is_listed(upstream: Path,  # noqa: F811
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from lab.components import render

    by_overlay = {c.overlay: c.name for c in CATALOG.components}
    # the renders are real (kustomize over ../shared/upstream), cached across this session
    monkeypatch.setattr(render, "render", lambda overlay, up: rendered(by_overlay[overlay], up))
    listed = images.lab_images(upstream, gpu=True)
    names = [i.image for i in listed]
    assert names == sorted(set(names)), "each image once, sorted"

    want: set[str] = set()
    for comp in CATALOG.components:
        want |= _expected_runtime(rendered(comp.name, upstream))
    want |= {i for imgs in CATALOG.images.values() for i in imgs}
    assert want - set(names) == set()
    for image in (  # by hand: one of each kind the issue names
            "quay.io/argoproj/argoexec:v3.7.3",
            "ghcr.io/kubeflow/kfp-driver:2.16.0", "ghcr.io/kubeflow/kfp-launcher:2.16.0",
            "kserve/storage-initializer:v0.16.0", "kserve/sklearnserver:v0.16.0",
            "kserve/agent:v0.16.0",
            "ghcr.io/kubeflow/katib/suggestion-hyperopt:v0.19.0",
            "ghcr.io/kubeflow/katib/earlystopping-medianstop:v0.19.0",
            "ghcr.io/kubeflow/katib/file-metrics-collector:v0.19.0",
            "quay.io/jetstack/cert-manager-controller:v1.19.4",
            "quay.io/jetstack/cert-manager-acmesolver:v1.19.4",
            "nvcr.io/nvidia/k8s-device-plugin:v0.17.1", "alpine:3.10"):
        assert image in names, image
    by_image = {i.image: i.sources for i in listed}
    assert any("V2_DRIVER_IMAGE" in s for s in by_image["ghcr.io/kubeflow/kfp-driver:2.16.0"])
    # every listed string appears verbatim in what it was read from (nothing normalised),
    # except KServe's explainer, whose tag is its defaultImageVersion
    blob = "\n".join(yaml.safe_dump_all(rendered(c.name, upstream)) + json.dumps(
        [o.get("data") for o in rendered(c.name, upstream) if o["kind"] == "ConfigMap"])
        for c in CATALOG.components) + catalog.VERSIONS_FILE.read_text()
    assert [n for n in names if n not in blob] == ["kserve/art-explainer:latest"]

    cpu = [i.image for i in images.lab_images(upstream, gpu=False)]
    assert "nvcr.io/nvidia/k8s-device-plugin:v0.17.1" not in cpu and "alpine:3.10" in cpu
