"""What one student's lab workloads ask of the server, from the lab's own manifests.

The labs' manifests (assets/ and solutions/) mostly declare no requests; on a class server
every container then gets the LimitRange defaults below, so a lab's need is its peak number
of containers times those defaults (or the requests a container declares). Peak: every
workload manifest of the lab at once (a student may start the next before the last ends),
counted as its controller runs it:

- Katib Experiment: parallelTrialCount trials at once (Katib's default 3 when unset), each the
  trial's pods plus Katib's injected metrics-collector sidecar, and one suggestion pod;
- PyTorchJob / TFJob: the sum of replicas; TrainJob: numNodes; InferenceService: one
  predictor pod (plus a transformer when given); Notebook, Pod: one; Job: parallelism (1);
  Deployment/StatefulSet: replicas.

Pipeline runs do not count here: single-user KFP runs every pipeline pod in the `kubeflow`
namespace, outside the student's quota (plan.py counts them server-wide).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from lab.components.footprint import quantity
from lab.errors import LabError
from lab.scenarios.model import Scenario

GI, MI = 2**30, 2**20
# LimitRange defaults for a container that declares nothing: enough for the labs' scikit-learn
# and small torch scripts (defaultRequest), with room to burst (default limit).
DEFAULT_REQUEST = {"cpu": "250m", "memory": "512Mi", "ephemeral-storage": "1Gi"}
DEFAULT_LIMIT = {"cpu": "2", "memory": "2Gi", "ephemeral-storage": "4Gi"}
KATIB_PARALLEL_DEFAULT = 3  # Katib's default parallelTrialCount
PIPELINE_PODS = 2  # concurrent task pods a student's pipeline run is planned for (estimate)
WORKLOAD_KINDS = ("Experiment", "PyTorchJob", "TFJob", "TrainJob", "InferenceService",
                  "Notebook", "Pod", "Job", "Deployment", "StatefulSet")


@dataclass
class Need:
    """Peak requests of one lab for one student (in the student's namespace)."""

    lab: str
    containers: int = 0
    pods: int = 0
    cpu: Decimal = Decimal(0)          # cores
    memory: Decimal = Decimal(0)       # bytes
    disk: Decimal = Decimal(0)         # bytes of ephemeral storage
    pipelines: bool = False            # runs KFP pipelines (pods in `kubeflow`, not here)
    sources: list[str] = field(default_factory=list)  # "file: Kind/name xN pods"

    def add_pod(self, spec: dict[str, Any], count: int = 1, *, sidecars: int = 0) -> None:
        for _ in range(count):
            self.pods += 1
            for c in list(spec.get("containers") or []) + [{}] * sidecars:
                req = ((c.get("resources") or {}).get("requests") or {}) if c else {}
                self.containers += 1
                self.cpu += quantity(req.get("cpu", DEFAULT_REQUEST["cpu"]))
                self.memory += quantity(req.get("memory", DEFAULT_REQUEST["memory"]))
                self.disk += quantity(req.get("ephemeral-storage",
                                              DEFAULT_REQUEST["ephemeral-storage"]))


def _pod_spec(template: Any) -> dict[str, Any]:
    spec = ((template or {}).get("spec") or {}) if isinstance(template, dict) else {}
    return spec if isinstance(spec, dict) else {}


def _replica_pods(specs: dict[str, Any]) -> list[tuple[dict[str, Any], int]]:
    out = []
    for rs in (specs or {}).values():
        if isinstance(rs, dict):
            out.append((_pod_spec(rs.get("template")), int(rs.get("replicas", 1) or 1)))
    return out


def _workload_pods(obj: dict[str, Any]) -> list[tuple[dict[str, Any], int, int]]:
    """(pod spec, how many at once, sidecars per pod) for one workload manifest."""
    kind, spec = obj.get("kind"), obj.get("spec") or {}
    if kind == "Experiment":
        parallel = int(spec.get("parallelTrialCount") or KATIB_PARALLEL_DEFAULT)
        trial = (spec.get("trialTemplate") or {}).get("trialSpec") or {}
        pods = [(p, n * parallel, 1) for p, n, _ in _workload_pods(trial)]
        return [*pods, ({"containers": [{}]}, 1, 0)]  # the suggestion pod
    if kind == "PyTorchJob":
        return [(p, n, 0) for p, n in _replica_pods(spec.get("pytorchReplicaSpecs"))]
    if kind == "TFJob":
        return [(p, n, 0) for p, n in _replica_pods(spec.get("tfReplicaSpecs"))]
    if kind == "TrainJob":
        return [({"containers": [{}]}, int((spec.get("trainer") or {}).get("numNodes", 1)), 0)]
    if kind == "InferenceService":
        return [({"containers": [{}]}, 1, 0) for part in ("predictor", "transformer")
                if part in spec]
    if kind == "Notebook":
        return [(_pod_spec(spec.get("template")), 1, 0)]
    if kind == "Pod":
        return [(spec, 1, 0)]
    if kind == "Job":
        return [(_pod_spec(spec.get("template")), int(spec.get("parallelism", 1) or 1), 0)]
    if kind in ("Deployment", "StatefulSet"):
        return [(_pod_spec(spec.get("template")), int(spec.get("replicas", 1) or 1), 0)]
    return []


def lab_need(scenario: Scenario) -> Need:
    """The peak need of one lab (every workload manifest it ships, at once)."""
    from lab.yamlio import load_documents, read_text

    need = Need(scenario.id, pipelines="pipelines" in scenario.requires)
    seen: set[tuple[str, str]] = set()
    for folder in (scenario.assets, scenario.root / "solutions"):
        for path in sorted(folder.rglob("*.y*ml")) if folder.is_dir() else []:
            try:
                docs = load_documents(read_text(path), str(path))
            except LabError:  # not a manifest (a data file, a pipeline config)
                continue
            for doc in docs:
                obj = doc.data
                if not isinstance(obj, dict) or obj.get("kind") not in WORKLOAD_KINDS:
                    continue
                key = (str(obj["kind"]), str((obj.get("metadata") or {}).get("name")))
                if key in seen:  # a solution that replaces the asset of the same name
                    continue
                seen.add(key)
                before = need.pods
                for spec, count, sidecars in _workload_pods(obj):
                    need.add_pod(spec, count, sidecars=sidecars)
                need.sources.append(f"{path.relative_to(scenario.root)}: {key[0]}/{key[1]} "
                                    f"({need.pods - before} pods)")
    return need


def class_quota(needs: list[Need], headroom: float = 1.25) -> dict[str, str]:
    """A ResourceQuota's `hard` for one student: the largest lab's peak, with headroom,
    never below one default container (a student can always start something)."""
    cpu = max([n.cpu for n in needs] + [quantity(DEFAULT_REQUEST["cpu"])])
    mem = max([n.memory for n in needs] + [quantity(DEFAULT_REQUEST["memory"])])
    disk = max([n.disk for n in needs] + [quantity(DEFAULT_REQUEST["ephemeral-storage"])])
    pods = max([n.pods for n in needs] + [1])
    h = Decimal(str(headroom))
    return {"requests.cpu": f"{int((cpu * h * 1000).to_integral_value())}m",
            "requests.memory": f"{int((mem * h / MI).to_integral_value())}Mi",
            "requests.ephemeral-storage": f"{int((disk * h / MI).to_integral_value())}Mi",
            # x2: long-lived pods of an earlier lab (a model server, a notebook) may still run
            "pods": str(int(pods * 2)),
            "persistentvolumeclaims": "4"}


def limit_range() -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "LimitRange",
            "metadata": {"name": "kflab-class"},
            "spec": {"limits": [{"type": "Container", "defaultRequest": dict(DEFAULT_REQUEST),
                                 "default": dict(DEFAULT_LIMIT)}]}}
