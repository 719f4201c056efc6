#!/usr/bin/env python3
"""Generate lab/kube/fields.json: the field tree `kflab apply` checks manifests against.

Katib's CRDs keep every unknown field (their schema is an open object), so a misspelled
`algorithmSetings` reaches no validation at all; kflab warns about it from its own
knowledge of the real fields, derived here from:
- the upstream CRDs' openAPIV3Schema in ../shared/upstream (PyTorchJob, InferenceService);
- Katib's v1beta1 API types (v0.19.0, the release in kubeflow/manifests 26.03): the field
  names are listed below, as facts, because the CRD schema carries none;
- the kubernetes Python client's models (pinned in locks/) for core types:
  ObjectMeta, Container, HTTPGetAction and batch/v1 Job (a Katib trial template's kind).

Output: {"kinds": {"group/version/Kind": type id}, "types": {id: {field: child}}} where a
child is a type id, 0 (a value of any shape: scalars, open objects, maps of text) or "@" (an
embedded object checked by its own apiVersion/kind). A "*" field stands for any key of a map.
Identical subtrees share one id (a hash of their content), which keeps the file small.

Usage: python scripts/gen_fields.py [--shared ../shared] [--check]
(default --shared: $KFLAB_SHARED, ../shared, or .cache/shared from scripts/fetch_upstream.py)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "lab" / "kube" / "fields.json"
APPS = Path("upstream/kubeflow-manifests-26.03/applications")
CRDS = {  # kind key -> (file under ../shared, CRD kind, served version)
    "kubeflow.org/v1/PyTorchJob": (
        APPS / "training-operator/upstream/base/crds/kubeflow.org_pytorchjobs.yaml",
        "PyTorchJob", "v1"),
    "serving.kserve.io/v1beta1/InferenceService": (
        APPS / "kserve/kserve/kserve.yaml", "InferenceService", "v1beta1"),
    "trainer.kubeflow.org/v1alpha1/TrainJob": (
        APPS / "trainer/upstream/base/crds/trainer.kubeflow.org_trainjobs.yaml",
        "TrainJob", "v1alpha1"),
}

# Katib v1beta1 (v0.19.0) field names by Go type. A string names another type here,
# "client:X" a kubernetes client model, "@" an embedded object, 0 any value.
KATIB: dict[str, dict[str, Any]] = {
    "ExperimentSpec": {
        "parameters": "ParameterSpec", "objective": "ObjectiveSpec",
        "algorithm": "AlgorithmSpec", "earlyStopping": "EarlyStoppingSpec",
        "trialTemplate": "TrialTemplate", "parallelTrialCount": 0, "maxTrialCount": 0,
        "maxFailedTrialCount": 0, "metricsCollectorSpec": "MetricsCollectorSpec",
        "nasConfig": "NasConfig", "resumePolicy": 0},
    "ParameterSpec": {"name": 0, "parameterType": 0, "feasibleSpace": "FeasibleSpace"},
    "FeasibleSpace": {"max": 0, "min": 0, "list": 0, "step": 0, "distribution": 0},
    "ObjectiveSpec": {"type": 0, "goal": 0, "objectiveMetricName": 0,
                      "additionalMetricNames": 0, "metricStrategies": "NameValue"},
    "AlgorithmSpec": {"algorithmName": 0, "algorithmSettings": "NameValue"},
    "EarlyStoppingSpec": {"algorithmName": 0, "algorithmSettings": "NameValue"},
    "NameValue": {"name": 0, "value": 0},
    "TrialTemplate": {"retain": 0, "trialSpec": "@", "configMap": "ConfigMapSource",
                      "trialParameters": "TrialParameterSpec", "primaryPodLabels": 0,
                      "primaryContainerName": 0, "successCondition": 0,
                      "failureCondition": 0},
    "ConfigMapSource": {"configMapName": 0, "configMapNamespace": 0, "templatePath": 0},
    "TrialParameterSpec": {"name": 0, "description": 0, "reference": 0},
    "MetricsCollectorSpec": {"source": "SourceSpec", "collector": "CollectorSpec"},
    "SourceSpec": {"httpGet": "client:V1HTTPGetAction", "fileSystemPath": "FileSystemPath",
                   "filter": "FilterSpec"},
    "FileSystemPath": {"path": 0, "kind": 0, "format": 0},
    "FilterSpec": {"metricsFormat": 0},
    "CollectorSpec": {"kind": 0, "customCollector": "client:V1Container"},
    "NasConfig": {"graphConfig": "GraphConfig", "operations": "Operation"},
    "GraphConfig": {"numLayers": 0, "inputSizes": 0, "outputSizes": 0},
    "Operation": {"operationType": 0, "parameters": "ParameterSpec"},
    "TrialSpec": {"objective": "ObjectiveSpec", "parameterAssignments": "NameValue",
                  "earlyStoppingRules": "EarlyStoppingRule", "runSpec": "@", "retainRun": 0,
                  "metricsCollector": "MetricsCollectorSpec", "primaryPodLabels": 0,
                  "primaryContainerName": 0, "successCondition": 0, "failureCondition": 0,
                  "labels": 0},
    "EarlyStoppingRule": {"name": 0, "value": 0, "comparison": 0, "startStep": 0},
}
# kflab's own kind: what `kflab pipeline run` and the scenario `pipeline` action apply.
PIPELINE_RUN_SPEC = {"pipeline": 0, "function": 0, "arguments": 0}
SCALARS = {"str", "int", "float", "bool", "object", "datetime", "date"}


class Tree:
    """Types deduplicated by content: equal subtrees get one id."""

    def __init__(self) -> None:
        self.types: dict[str, dict[str, Any]] = {}

    def add(self, fields: dict[str, Any]) -> str:
        if not fields:
            raise ValueError("empty type")
        text = json.dumps(fields, sort_keys=True, separators=(",", ":"))
        tid = hashlib.sha256(text.encode()).hexdigest()[:10]
        if self.types.setdefault(tid, fields) != fields:
            raise RuntimeError(f"hash collision on {tid}")
        return tid

    # --- a CRD's openAPIV3Schema ---
    def from_schema(self, s: dict[str, Any]) -> Any:
        if s.get("x-kubernetes-embedded-resource"):
            return "@"
        if s.get("type") == "array":
            return self.from_schema(s["items"]) if isinstance(s.get("items"), dict) else 0
        props, extra = s.get("properties") or {}, s.get("additionalProperties")
        if not props and not isinstance(extra, dict):
            return 0  # a scalar, or an object without a schema: anything goes
        fields = {k: self.from_schema(v) for k, v in sorted(props.items())}
        if s.get("x-kubernetes-preserve-unknown-fields") or extra is True:
            fields["*"] = 0
        elif isinstance(extra, dict):
            fields["*"] = self.from_schema(extra)
        return self.add(fields) if fields != {"*": 0} else 0

    # --- a kubernetes client model ---
    def from_client(self, name: str, seen: tuple[str, ...] = ()) -> Any:
        import kubernetes.client

        if name in seen:  # recursive types (none in PodSpec today): stop checking there
            return 0
        cls = getattr(kubernetes.client, name)
        fields = {cls.attribute_map[attr]: self.from_type(t, (*seen, name))
                  for attr, t in cls.openapi_types.items()}
        return self.add(dict(sorted(fields.items())))

    def from_type(self, t: str, seen: tuple[str, ...]) -> Any:
        if m := re.fullmatch(r"list\[(.+)\]", t):
            return self.from_type(m.group(1), seen)
        if m := re.fullmatch(r"dict\(str, (.+)\)", t):
            inner = self.from_type(m.group(1), seen)
            return 0 if inner == 0 else self.add({"*": inner})
        return 0 if t in SCALARS else self.from_client(t, seen)

    # --- Katib's types (the table above) ---
    def from_katib(self, name: str) -> str:
        fields = {}
        for key, ref in KATIB[name].items():
            if isinstance(ref, str) and ref.startswith("client:"):
                fields[key] = self.from_client(ref.removeprefix("client:"))
            elif isinstance(ref, str) and ref != "@":
                fields[key] = self.from_katib(ref)
            else:
                fields[key] = ref
        return self.add(dict(sorted(fields.items())))

    def kind(self, spec: Any, status: Any = 0) -> str:
        """A top-level object: apiVersion, kind, metadata (ObjectMeta), spec, status."""
        return self.add({"apiVersion": 0, "kind": 0, "metadata": self.from_client("V1ObjectMeta"),
                         "spec": spec, "status": status})


def crd_schema(shared: Path, file: Path, kind: str, version: str) -> dict[str, Any]:
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    for chunk in (shared / file).read_text().split("\n---\n"):  # kserve.yaml is 3.5 MB
        if "CustomResourceDefinition" not in chunk or f"kind: {kind}\n" not in chunk:
            continue
        doc = yaml.load(chunk, Loader=loader)  # noqa: S506 (CSafeLoader or SafeLoader)
        if doc and doc.get("kind") == "CustomResourceDefinition" and \
                doc["spec"]["names"]["kind"] == kind:
            served = next(v for v in doc["spec"]["versions"] if v["name"] == version)
            return served["schema"]["openAPIV3Schema"]
    raise LookupError(f"no {kind} CRD in {file}")


def generate(shared: Path) -> dict[str, Any]:
    import kubernetes

    tree = Tree()
    kinds: dict[str, str] = {}
    for key, (file, kind, version) in CRDS.items():
        schema = crd_schema(shared, file, kind, version)
        spec = tree.from_schema(schema["properties"]["spec"])
        kinds[key] = tree.kind(spec)
    kinds["kubeflow.org/v1beta1/Experiment"] = tree.kind(tree.from_katib("ExperimentSpec"))
    kinds["kubeflow.org/v1beta1/Trial"] = tree.kind(tree.from_katib("TrialSpec"))
    kinds["batch/v1/Job"] = tree.kind(tree.from_client("V1JobSpec"))
    kinds["kflab.dev/v1/PipelineRun"] = tree.kind(tree.add(PIPELINE_RUN_SPEC))
    used = _reachable(tree.types, kinds.values())
    return {
        "about": "Generated by scripts/gen_fields.py; do not edit. Field names of "
                 + ", ".join(sorted(kinds)) + " from the upstream CRDs of kubeflow/manifests "
                 f"26.03, Katib v0.19.0's API types and kubernetes client "
                 f"{kubernetes.__version__}.",
        "kinds": dict(sorted(kinds.items())),
        "types": {tid: tree.types[tid] for tid in sorted(used)},
    }


def _reachable(types: dict[str, dict[str, Any]], roots: Any) -> set[str]:
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        tid = todo.pop()
        if tid in seen:
            continue
        seen.add(tid)
        todo.extend(c for c in types[tid].values() if isinstance(c, str) and c in types)
    return seen


def render(data: dict[str, Any]) -> str:
    """One type per line: small, and a regenerated file diffs readably."""
    lines = ["{", f'"about": {json.dumps(data["about"])},',
             f'"kinds": {json.dumps(data["kinds"], separators=(",", ":"))},', '"types": {']
    items = list(data["types"].items())
    for i, (tid, fields) in enumerate(items):
        comma = "," if i < len(items) - 1 else ""
        lines.append(f'"{tid}":{json.dumps(fields, separators=(",", ":"))}{comma}')
    lines += ["}", "}"]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    from fetch_upstream import shared_root  # $KFLAB_SHARED, ../shared, or the fetched copy

    parser.add_argument("--shared", type=Path, default=shared_root(REPO)[0])
    parser.add_argument("--check", action="store_true",
                        help="exit 1 if lab/kube/fields.json is not what would be generated")
    args = parser.parse_args()
    text = render(generate(args.shared))
    if args.check:
        same = OUT.read_text() == text
        print("lab/kube/fields.json is up to date" if same else "lab/kube/fields.json differs")
        return 0 if same else 1
    OUT.write_text(text)
    print(f"wrote {OUT.relative_to(REPO)} ({len(text)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
