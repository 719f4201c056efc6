"""The lab profile rendered for real: kustomize over ../shared/upstream (the kubeflow/manifests
26.03 tree), every object validated (built-in kinds: kubernetes-validate, strict, current
Kubernetes; custom resources: their CRD's openAPIV3Schema with Draft 4), plus the promises of
the profile (one replica, every container sized, <= 4 GiB requested, catalog in sync)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from lab.components.catalog import REPO_ROOT, load
from lab.components.footprint import Footprint, footprint, quantity
from lab.components.render import images, render

K8S = kubernetes_validate.latest_version()
CATALOG = load()
PROFILE = [c for c in CATALOG.components]
SMOKE = REPO_ROOT / "manifests" / "smoke"
_cache: dict[str, list[dict[str, Any]]] = {}


@pytest.fixture(scope="module")
def upstream() -> Path:
    from tests.conftest import SHARED

    root = SHARED / "upstream" / "kubeflow-manifests-26.03"
    if not root.is_dir():
        pytest.skip(f"upstream manifests not found at {root} (set KFLAB_SHARED)")
    return root


def rendered(name: str, upstream: Path) -> list[dict[str, Any]]:
    """Each overlay is rendered once per session (kustomize over KFP takes ~10 s)."""
    if name not in _cache:
        _cache[name] = render(CATALOG.get(name).overlay, upstream)
    return _cache[name]


def all_crds(upstream: Path) -> dict[tuple[str, str, str], dict[str, Any]]:
    """(group, version, kind) -> openAPIV3Schema, from every rendered component."""
    schemas = {}
    for comp in PROFILE:
        for obj in rendered(comp.name, upstream):
            if obj["kind"] != "CustomResourceDefinition":
                continue
            spec = obj["spec"]
            for v in spec["versions"]:
                schema = (v.get("schema") or {}).get("openAPIV3Schema")
                if schema:
                    schemas[(spec["group"], v["name"], spec["names"]["kind"])] = schema
    return schemas


def validate(obj: dict[str, Any], crds: dict[tuple[str, str, str], dict[str, Any]]) -> None:
    group, _, version = obj["apiVersion"].rpartition("/")
    key = (group, version, obj["kind"])
    if key in crds:
        # The API server checks metadata itself; the CRD schema governs the rest.
        schema = {**crds[key], "properties": {
            k: v for k, v in crds[key].get("properties", {}).items()
            if k not in ("apiVersion", "kind", "metadata")}}
        jsonschema.Draft4Validator(schema).validate(obj)
    else:
        kubernetes_validate.validate(obj, K8S, strict=True)


@pytest.mark.parametrize("name", [c.name for c in PROFILE])
def test_every_object_validates(name: str, upstream: Path) -> None:
    crds = all_crds(upstream)
    objects = rendered(name, upstream)
    assert objects, f"{name} rendered nothing"
    for obj in objects:
        try:
            validate(obj, crds)
        except (jsonschema.ValidationError, kubernetes_validate.ValidationError) as exc:
            pytest.fail(f"{name}: {obj['kind']}/{obj['metadata']['name']}: {exc}"[:3000])


@pytest.mark.parametrize("name", [c.name for c in PROFILE])
def test_profile_promises(name: str, upstream: Path) -> None:
    """One replica, every container with CPU/memory requests and limits, pinned images."""
    objects = rendered(name, upstream)
    for obj in objects:
        if obj["kind"] in ("Deployment", "StatefulSet"):
            assert obj["spec"].get("replicas") == 1, obj["metadata"]["name"]
        if obj["kind"] in ("Deployment", "StatefulSet", "DaemonSet"):
            for c in obj["spec"]["template"]["spec"]["containers"]:
                res = c.get("resources") or {}
                for part in ("requests", "limits"):
                    for what in ("cpu", "memory"):
                        assert (res.get(part) or {}).get(what), \
                            f"{name}: {obj['metadata']['name']}/{c['name']} has no {part}.{what}"
    for image in images(objects):
        tag = image.rsplit("/", 1)[-1]
        assert ("@sha256:" in image or ":" in tag) and not tag.endswith(":latest"), image


def test_catalog_ready_lists_match_rendered_deployments(upstream: Path) -> None:
    for comp in PROFILE:
        deployments = sorted(f"{o['metadata']['namespace']}/{o['metadata']['name']}"
                             for o in rendered(comp.name, upstream) if o["kind"] == "Deployment")
        assert sorted(comp.ready) == deployments, comp.name


def test_kserve_is_standard_mode_without_knative_or_istio(upstream: Path) -> None:
    objects = rendered("kserve", upstream)
    config = next(o for o in objects if o["kind"] == "ConfigMap"
                  and o["metadata"]["name"] == "inferenceservice-config")
    assert '"defaultDeploymentMode": "Standard"' in config["data"]["deploy"]
    assert '"disableIngressCreation": true' in config["data"]["ingress"]
    groups = {o["apiVersion"].split("/")[0] for o in objects}
    assert not {g for g in groups if "knative" in g or "istio" in g}, groups
    deployments = {o["metadata"]["name"] for o in objects if o["kind"] == "Deployment"}
    assert deployments == {"kserve-controller-manager"}, deployments
    hooks = [w for o in objects if o["kind"].endswith("WebhookConfiguration")
             for w in o["webhooks"]]
    services = {o["metadata"]["name"] for o in objects if o["kind"] == "Service"}
    for hook in hooks:  # no webhook may point at a service we removed
        assert hook["clientConfig"]["service"]["name"] in services, hook["name"]


def test_whole_lab_requests_at_most_4_gib(upstream: Path) -> None:
    total = Footprint()
    for comp in PROFILE:
        total += footprint(rendered(comp.name, upstream))
    assert total.unbounded == 0
    assert 0 < total.memory_requests <= 4 * 2**30, total


def test_smoke_objects_match_their_crds(upstream: Path) -> None:
    crds = all_crds(upstream)
    for comp in PROFILE:
        if comp.gpu_only:
            continue
        docs = [d for d in yaml.safe_load_all((SMOKE / f"{comp.name}.yaml").read_text()) if d]
        assert docs, comp.name
        for obj in docs:
            group, _, version = obj["apiVersion"].rpartition("/")
            assert (group, version, obj["kind"]) in crds, f"{comp.name}: no CRD for {obj['kind']}"
            validate(obj, crds)


def test_a_smoke_object_with_a_wrong_field_is_refused(upstream: Path) -> None:
    """The CRD check can fail: a PyTorchJob with a misspelt replica field."""
    crds = all_crds(upstream)
    obj = yaml.safe_load((SMOKE / "training-operator.yaml").read_text())
    obj["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"] = "one"
    with pytest.raises(jsonschema.ValidationError):
        validate(obj, crds)


def test_quantities() -> None:
    assert quantity("250m") * 4 == 1
    assert quantity("1Gi") == 2**30
    assert quantity("512M") == 512 * 10**6
    assert quantity(2) == 2


def test_images_list_for_an_offline_bundle(upstream: Path) -> None:
    """`kflab components images` lists what a bundle must hold: the controllers' images."""
    found = set()
    for comp in PROFILE:
        found |= images(rendered(comp.name, upstream))
    for image in ("quay.io/jetstack/cert-manager-controller:v1.19.4",
                  "ghcr.io/kubeflow/kfp-api-server:2.16.0",
                  "quay.io/argoproj/workflow-controller:v3.7.3",
                  "ghcr.io/kubeflow/katib/katib-controller:v0.19.0",
                  "kserve/kserve-controller:v0.16.0"):
        assert image in found, image
    assert not any("visualization" in i for i in found)
