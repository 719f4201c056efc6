"""The images a class bundle holds by default: what the labs use (issue 35: 65 images, every
serving runtime and two CUDA PyTorch images, were bundled for labs that use few)."""

from __future__ import annotations

from lab.components import release
from lab.components.reference import normalize
from lab.teaching import imageset


def _refs(chosen: list[imageset.Chosen]) -> dict[str, list[str]]:
    return {c.image: c.why for c in chosen}


def test_the_default_set_is_what_the_labs_use() -> None:
    chosen = _refs(imageset.select())
    every = {normalize(i.image) for i in release.images()}
    assert set(chosen) < every
    # serving runtimes no lab uses are left out; the one KServe picks for the kserve lab's
    # sklearn model (protocol v1) is kept
    for unused in ("nvcr.io/nvidia/tritonserver:23.05-py3",
                   "docker.io/kserve/huggingfaceserver:v0.16.0",
                   "docker.io/pytorch/torchserve-kfs:0.9.0", "docker.io/seldonio/mlserver:1.5.0",
                   "docker.io/kserve/paddleserver:v0.16.0", "docker.io/kserve/pmmlserver:v0.16.0",
                   "docker.io/tensorflow/serving:2.6.2", "docker.io/kserve/art-explainer:latest",
                   "ghcr.io/kubeflow/katib/suggestion-darts:v0.19.0",
                   "ghcr.io/kubeflow/katib/enas-cnn-cifar10-cpu:v0.19.0",
                   "quay.io/jetstack/cert-manager-acmesolver:v1.19.4"):
        assert unused in every and unused not in chosen, unused
    assert "kserve-runtime:kserve-sklearnserver" in chosen[
        "docker.io/kserve/sklearnserver:v0.16.0"]
    # the labs' algorithms: random and tpe (hyperopt), grid (optuna)
    assert {"katib-suggestion:random", "katib-suggestion:tpe"} <= set(
        chosen["ghcr.io/kubeflow/katib/suggestion-hyperopt:v0.19.0"])
    assert chosen["ghcr.io/kubeflow/katib/suggestion-optuna:v0.19.0"] == ["katib-suggestion:grid"]
    # what every pipeline run starts, and the PyTorchJob init container
    for ref in ("quay.io/argoproj/argoexec:v3.7.3", "ghcr.io/kubeflow/kfp-driver:2.16.0",
                "ghcr.io/kubeflow/kfp-launcher:2.16.0", "docker.io/library/alpine:3.10"):
        assert ref in chosen, ref
    assert "docker.io/library/python:3.11-slim" in chosen
    assert all(ref == normalize(ref) for ref in chosen)  # fully qualified


def test_all_runtimes_keeps_everything() -> None:
    every = {normalize(i.image) for i in release.images()}
    assert set(_refs(imageset.select(all_runtimes=True))) == every


def test_an_image_of_unknown_use_is_kept() -> None:
    assert imageset._needed(["other"], set(), gpu=False) == ["other"]
    assert imageset._needed(["kserve-runtime:kserve-tritonserver"], set(), gpu=False) == []
    assert imageset._needed(["versions:gpu"], set(), gpu=True) == ["versions:gpu"]
