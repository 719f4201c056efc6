"""The lab profile rendered for real: kustomize over ../shared/upstream (the kubeflow/manifests
26.03 tree), every object validated (built-in kinds: kubernetes-validate, strict, current
Kubernetes; custom resources: their CRD's openAPIV3Schema with Draft 4), plus the promises of
the profile (one replica, every container sized, <= 4 GiB requested, catalog in sync)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from lab.components.catalog import load
from lab.components.footprint import Footprint, footprint, quantity
from lab.components.render import images, render
from lab.kube.namespaces import LAB_LABELS

K8S = kubernetes_validate.latest_version()
CATALOG = load()
PROFILE = [c for c in CATALOG.components]
_cache: dict[str, list[dict[str, Any]]] = {}


@pytest.fixture(scope="module")
def upstream() -> Path:
    from tests.conftest import need_upstream

    return need_upstream("kubeflow-manifests-26.03")


def rendered(name: str, upstream: Path) -> list[dict[str, Any]]:
    """Each overlay is rendered once per session (kustomize over KFP takes ~10 s)."""
    if name not in _cache:
        overlay = CATALOG.get(name).overlay if name in CATALOG.names() else name
        _cache[name] = render(overlay, upstream)
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


def isvc_config(objects: list[dict[str, Any]]) -> dict[str, str]:
    return next(o for o in objects if o["kind"] == "ConfigMap"
                and o["metadata"]["name"] == "inferenceservice-config")["data"]


def kserve_ingress_errors(ingress: dict[str, Any]) -> list[str]:
    """KServe v0.16's ingress-config rules (pkg/apis/serving/v1beta1/configmap.go,
    NewIngressConfig), read for facts: what the controller refuses to start reconciling with."""
    errors = []
    if ingress.get("enableGatewayApi"):
        gw = ingress.get("kserveIngressGateway") or ""
        if len(gw.split("/")) != 2:
            errors.append("kserveIngressGateway must be <namespace>/<name>")
    if not ingress.get("ingressGateway"):
        errors.append("invalid ingress config - ingressGateway is required")
    if ingress.get("pathTemplate") and not ingress.get("ingressDomain"):
        errors.append("ingressDomain is required if pathTemplate is given")
    return errors


def test_kserve_is_standard_mode_without_knative_or_istio(upstream: Path) -> None:
    objects = rendered("kserve", upstream)
    config = isvc_config(objects)
    assert json.loads(config["deploy"]) == {"defaultDeploymentMode": "Standard"}
    assert json.loads(config["ingress"])["disableIngressCreation"] is True
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
                  "kserve/kserve-controller:v0.16.0",
                  "ghcr.io/kubeflow/trainer/trainer-controller-manager:v2.1.0",
                  "registry.k8s.io/jobset/jobset:v0.10.1"):
        assert image in found, image
    assert not any("visualization" in i or "staging" in i for i in found)


def test_trainer_installs_only_the_torch_runtime_cluster_scoped(upstream: Path) -> None:
    """The trainer overlay: Trainer and JobSet controllers in `kubeflow`, the
    torch-distributed ClusterTrainingRuntime only (no namespace: it is cluster-scoped)."""
    objects = rendered("trainer", upstream)
    runtimes = [o for o in objects if o["kind"] == "ClusterTrainingRuntime"]
    assert [r["metadata"]["name"] for r in runtimes] == ["torch-distributed"]
    assert "namespace" not in runtimes[0]["metadata"]
    deployments = {o["metadata"]["name"]: o["metadata"]["namespace"] for o in objects
                   if o["kind"] == "Deployment"}
    assert deployments == {"jobset-controller-manager": "kubeflow",
                           "kubeflow-trainer-controller-manager": "kubeflow"}
    assert not [o for o in objects if o["kind"] == "Namespace"]


def upstream_isvc_config(upstream: Path) -> dict[str, str]:
    path = upstream / "applications" / "kserve" / "kserve" / "kserve.yaml"
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    for chunk in path.read_text().split("\n---\n"):
        if "name: inferenceservice-config" in chunk:
            doc = yaml.load(chunk, Loader=loader)
            if doc and doc.get("kind") == "ConfigMap":
                return doc["data"]
    raise LookupError("no inferenceservice-config in kserve.yaml")


def test_kserve_ingress_keeps_every_upstream_key_and_flips_only_istio(upstream: Path) -> None:
    """Defect 1: replacing the whole `ingress` JSON dropped ingressGateway, which KServe's
    parser requires in every mode ("invalid ingress config - ingressGateway is required")."""
    ours = json.loads(isvc_config(rendered("kserve", upstream))["ingress"])
    theirs = json.loads(upstream_isvc_config(upstream)["ingress"])
    assert kserve_ingress_errors(theirs) == []
    assert kserve_ingress_errors(ours) == []
    assert set(ours) == set(theirs), set(ours) ^ set(theirs)
    changed = {k: (theirs[k], ours[k]) for k in theirs if ours[k] != theirs[k]}
    assert changed == {"disableIstioVirtualHost": (False, True),
                       "disableIngressCreation": (False, True)}, changed


def test_the_ingress_check_refuses_the_old_overlay() -> None:
    """The rule above can fail: the ingress value kflab shipped before (no ingressGateway)."""
    old = {"enableGatewayApi": False, "ingressDomain": "example.com",
           "domainTemplate": "{{ .Name }}-{{ .Namespace }}.{{ .IngressDomain }}",
           "urlScheme": "http", "disableIstioVirtualHost": True, "disableIngressCreation": True}
    assert kserve_ingress_errors(old) == ["invalid ingress config - ingressGateway is required"]


def test_no_component_render_carries_a_shared_namespace(upstream: Path) -> None:
    """Defect 2: each render carried its own `Namespace kubeflow` under one field manager, so
    a later apply dropped the label an earlier one set. Shared namespaces now come from the
    namespaces overlay only."""
    for comp in PROFILE:
        names = [o["metadata"]["name"] for o in rendered(comp.name, upstream)
                 if o["kind"] == "Namespace"]
        assert "kubeflow" not in names and CATALOG.lab_namespace not in names, (comp.name, names)


def test_namespaces_overlay_labels_the_lab_namespace_not_kubeflow(upstream: Path) -> None:
    """Katib's pod webhook (failurePolicy Fail, no objectSelector) selects namespaces by the
    injection label: it belongs on the lab namespace, never on `kubeflow`."""
    objects = {o["metadata"]["name"]: o for o in rendered("namespaces", upstream)}
    assert set(objects) == {"kubeflow", CATALOG.lab_namespace}
    for obj in objects.values():
        kubernetes_validate.validate(obj, K8S, strict=True)
    injection = "katib.kubeflow.org/metrics-collector-injection"
    assert injection not in (objects["kubeflow"]["metadata"].get("labels") or {})
    # the same labels the cluster backend applies to the namespace (lab/kube/namespaces.py)
    assert objects[CATALOG.lab_namespace]["metadata"]["labels"] == LAB_LABELS
    assert LAB_LABELS[injection] == "enabled"
    hook = next(w for o in rendered("katib", upstream)
                if o["kind"] == "MutatingWebhookConfiguration" for w in o["webhooks"]
                if w["name"] == "mutator.pod.katib.kubeflow.org")
    assert hook["namespaceSelector"] == {"matchLabels": {injection: "enabled"}}
    assert hook.get("failurePolicy", "Fail") == "Fail" and "objectSelector" not in hook


def test_kubeflow_namespace_keeps_what_the_components_asked_for(upstream: Path) -> None:
    """The labels upstream renders put on `kubeflow` (except Katib's injection label) are on
    the one Namespace object kflab applies."""
    import subprocess

    from lab.components.render import kubectl

    ours = next(o for o in rendered("namespaces", upstream)
                if o["metadata"]["name"] == "kubeflow")["metadata"].get("labels") or {}
    path = upstream / "applications/pipeline/upstream/cluster-scoped-resources"
    out = subprocess.run([kubectl(), "kustomize", str(path)], capture_output=True, text=True,
                         check=True, timeout=300).stdout
    theirs = next(d for d in yaml.safe_load_all(out) if d and d["kind"] == "Namespace"
                  and d["metadata"]["name"] == "kubeflow")["metadata"]["labels"]
    assert theirs and all(ours.get(k) == v for k, v in theirs.items()), (theirs, ours)


def test_seaweedfs_admits_the_lab_namespace_on_its_s3_port(upstream: Path) -> None:
    """Defect 10: SeaweedFS's NetworkPolicy admitted only its own namespace, Istio and profile
    namespaces, so KServe's storage-initializer in the lab namespace could not pull models."""
    policy = next(o for o in rendered("pipelines", upstream)
                  if o["kind"] == "NetworkPolicy" and o["metadata"]["name"] == "seaweedfs")
    kubernetes_validate.validate(policy, K8S, strict=True)

    def admits(namespace_labels: dict[str, str], port: int) -> bool:
        for rule in policy["spec"]["ingress"]:
            ports = [p["port"] for p in rule.get("ports") or []]
            if ports and port not in ports:
                continue
            for peer in rule.get("from") or []:
                sel = peer.get("namespaceSelector")
                if sel is None:
                    continue
                ok = all(namespace_labels.get(k) == v
                         for k, v in (sel.get("matchLabels") or {}).items())
                for expr in sel.get("matchExpressions") or []:
                    ok = ok and expr["operator"] == "In" and \
                        namespace_labels.get(expr["key"]) in expr["values"]
                if ok:
                    return True
        return False

    lab = {"kubernetes.io/metadata.name": CATALOG.lab_namespace, **LAB_LABELS}
    assert admits(lab, 8333)
    assert not admits({"kubernetes.io/metadata.name": "elsewhere"}, 8333)
    assert admits({"kubernetes.io/metadata.name": "x",
                   "app.kubernetes.io/part-of": "kubeflow-profile"}, 8333)  # upstream's rule
