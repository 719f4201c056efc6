"""The resource kinds kflab understands, with the names users type for them.

One table for both backends, so `kflab get isvc` means the same thing locally and on a cluster.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lab.errors import LabError
from lab.kube.katib import objective_column

# A column is a JMESPath over the object, or a function of it where JMESPath cannot say it
# (a Trial's objective depends on the metric strategy named in its own spec).
Column = tuple[str, "str | Callable[[dict[str, Any]], Any]"]


@dataclass(frozen=True)
class Kind:
    kind: str
    group: str
    version: str
    plural: str
    short: tuple[str, ...] = ()
    # (header, JMESPath or function), like a CRD's additionalPrinterColumns
    columns: tuple[Column, ...] = ()

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


LAST_CONDITION = ("STATUS", "status.conditions[-1].type")
# The GPUs a local workload holds (backends/local/gpus.py); `get` adds a GPUS column when
# an object listed carries it.
GPUS_ANNOTATION = "kflab.dev/gpus"
KINDS: tuple[Kind, ...] = (
    Kind("PipelineRun", "kflab.dev", "v1", "pipelineruns", ("run", "runs", "pipelinerun", "pr"),
         (("STATE", "status.state"),
          # tasks done: those that ran and those reused from the cache (SKIPPED, cached)
          ("TASKS", "length(status.run_details.task_details[?state=='SUCCEEDED' || cached])"),
          ("PIPELINE", "status.pipeline_name"))),
    Kind("Experiment", "kubeflow.org", "v1beta1", "experiments", ("experiment", "exp"),
         (LAST_CONDITION, ("TRIALS", "status.trials || `0`"),
          ("SUCCEEDED", "status.trialsSucceeded || `0`"),
          # what Katib counts against maxFailedTrialCount: failed + metrics unavailable
          ("FAILED", "sum([status.trialsFailed || `0`, status.trialMetricsUnavailable || `0`])"),
          ("BEST", "status.currentOptimalTrial.bestTrialName"))),
    Kind("Trial", "kubeflow.org", "v1beta1", "trials", ("trial",),
         (LAST_CONDITION, ("EXPERIMENT", "metadata.labels.\"katib.kubeflow.org/experiment\""),
          ("OBJECTIVE", objective_column))),
    Kind("PyTorchJob", "kubeflow.org", "v1", "pytorchjobs", ("pytorchjob", "ptj"),
         (("STATE", "status.conditions[-1].type"),)),
    Kind("TFJob", "kubeflow.org", "v1", "tfjobs", ("tfjob", "tfj"),
         (("STATE", "status.conditions[-1].type"),)),
    # Kubeflow Trainer v2: no Running condition; the last condition is Complete or Failed
    Kind("TrainJob", "trainer.kubeflow.org", "v1alpha1", "trainjobs", ("trainjob", "tj"),
         (("STATE", "status.conditions[-1].type"),
          ("NODES", "spec.trainer.numNodes"),
          ("RUNTIME", "spec.runtimeRef.name"))),
    Kind("Notebook", "kubeflow.org", "v1", "notebooks", ("notebook", "nb"),
         (("READY", "status.readyReplicas"),
          ("STATE", "keys(status.containerState || `{}`) | [0]"))),
    Kind("InferenceService", "serving.kserve.io", "v1beta1", "inferenceservices",
         ("inferenceservice", "isvc"),
         (("URL", "status.url"), ("READY", "status.conditions[?type=='Ready'].status | [0]"))),
)

_BY_NAME: dict[str, Kind] = {}
for _k in KINDS:
    for _name in (_k.kind, _k.plural, *_k.short):
        _BY_NAME[_name.lower()] = _k


def column_value(query: str | Callable[[dict[str, Any]], Any], obj: dict[str, Any]) -> Any:
    """One table cell: the JMESPath's result, or the function's."""
    if callable(query):
        return query(obj)
    import jmespath

    return jmespath.search(query, obj)


# Kinds of the Kubeflow components the lab cluster installs that kflab itself does not run:
# the Training Operator v1.9 CRDs beside PyTorchJob and TFJob (kubeflow/manifests
# applications/training-operator/upstream/base/crds) and Trainer v2's runtimes. Named as
# such, never as an unknown type: kind -> (plurals and short names, what serves it).
CLUSTER_ONLY: dict[str, tuple[tuple[str, ...], str]] = {
    "JAXJob": (("jaxjobs", "jaxjob"), "the Training Operator"),
    "MPIJob": (("mpijobs", "mpijob"), "the Training Operator"),
    "PaddleJob": (("paddlejobs", "paddlejob"), "the Training Operator"),
    "XGBoostJob": (("xgboostjobs", "xgboostjob"), "the Training Operator"),
    "ClusterTrainingRuntime": (("clustertrainingruntimes", "clustertrainingruntime"),
                               "Kubeflow Trainer"),
    "TrainingRuntime": (("trainingruntimes", "trainingruntime"), "Kubeflow Trainer"),
}
_CLUSTER_ONLY = {n.lower(): kind for kind, (names, _) in CLUSTER_ONLY.items()
                 for n in (kind, *names)}


def cluster_only(kind: str) -> LabError:
    """The error for a kind kflab does not run: where it runs, and the command for that."""
    serves = CLUSTER_ONLY[kind][1]
    if kind.endswith("TrainingRuntime"):
        return LabError(f"{kind} runs on a cluster only: {serves} there serves it, and "
                        "kflab's local backend runs TrainJobs on the runtimes the Trainer "
                        "ships (torch-distributed, deepspeed-distributed, ...)",
                        hint="name a shipped runtime in a TrainJob's runtimeRef, or `kflab up` "
                             "for a lab cluster and apply it there with kubectl")
    return LabError(f"{kind} runs on a cluster only: kflab runs PyTorchJob, TFJob and "
                    f"TrainJob, and {serves} of a lab cluster runs {kind}",
                    hint="`kflab up` makes the lab cluster; apply it there with kubectl and the "
                         "lab's kubeconfig (~/.kflab/labs/NAME/kubeconfig)")


def lookup(name: str) -> Kind:
    """Resolve a kind, plural or short name (case-insensitive)."""
    try:
        return _BY_NAME[name.lower()]
    except KeyError:
        if name.lower() in _CLUSTER_ONLY:
            raise cluster_only(_CLUSTER_ONLY[name.lower()]) from None
        known = ", ".join(sorted({k.plural for k in KINDS}))
        raise LabError(f"unknown resource type '{name}'", hint=f"use one of: {known}") from None


# Kinds users meet in Kubeflow's examples that kflab does not take, with what to do instead.
# The Training Operator v1.9 kinds other than PyTorchJob and TFJob run on a cluster (the lab
# installs the operator); Kubernetes' own objects are the cluster's plumbing.
OTHER_KUBEFLOW = {"MPIJob", "XGBoostJob", "PaddleJob", "JAXJob", "MXJob"}
KUBERNETES = {"Pod", "Service", "Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job",
              "CronJob", "ConfigMap", "Secret", "PersistentVolume", "PersistentVolumeClaim",
              "StorageClass", "Namespace", "ServiceAccount", "Ingress"}


def not_taken_locally(obj: dict) -> LabError | None:
    """A clear refusal for a kind the local backend knows of but does not take, else None
    (a kind kflab knows nothing of gets `lookup`'s unknown resource type)."""
    kind, api = str(obj.get("kind", "")), str(obj.get("apiVersion", ""))
    runs = "PyTorchJob, TFJob and TrainJob"
    if kind in OTHER_KUBEFLOW:
        return LabError(f"{kind} ({api}) is a Training Operator kind the local backend does "
                        f"not run: it runs {runs} (and Katib, KServe, Notebook, pipelines)",
                        hint=f"run it on a cluster (`kflab up`, or --context for yours), or "
                             f"write the job as a {runs.replace(' and', ' or')}")
    if kind in KUBERNETES:
        return LabError(f"a Kubernetes {kind} is cluster plumbing the local backend has no "
                        "use for: it has no pods, services or volumes; local workloads read "
                        "files from the manifest's folder and listen on 127.0.0.1",
                        hint=f"leave the {kind} out locally, or apply it on a cluster "
                             "(`kflab up`, or --context for yours)")
    return None


def for_object(obj: dict) -> Kind:
    """The Kind of a manifest, checking that its apiVersion group matches."""
    kind = lookup(str(obj.get("kind", "")))
    api = str(obj.get("apiVersion", ""))
    group = api.rsplit("/", 1)[0] if "/" in api else ""
    if group != kind.group:
        raise LabError(
            f"{kind.kind} has apiVersion '{api}', expected group '{kind.group}'",
            hint=f"set apiVersion: {kind.api_version}",
        )
    return kind


def parse_refs(args: tuple[str, ...] | list[str]) -> list[tuple[Kind, str | None]]:
    """kubectl's ways to name resources: `KIND`, `KIND NAME...` or `KIND/NAME...`; returns
    (kind, name or None for every one of the kind). Names are checked by the caller."""
    if not args:
        return []
    if "/" in args[0]:
        out = []
        for arg in args:
            kind, sep, name = arg.partition("/")
            if not sep or not kind or not name:
                raise LabError(f"'{arg}' is not TYPE/NAME",
                               hint="name resources as TYPE/NAME (e.g. run/first-run) or as "
                                    "TYPE NAME, not both")
            out.append((lookup(kind), name))
        return out
    kind = lookup(args[0])
    for name in args[1:]:
        if "/" in name:
            raise LabError(f"'{name}': a TYPE/NAME cannot follow a type",
                           hint=f"write `{args[0]} NAME` or `TYPE/NAME` alone")
    return [(kind, name) for name in args[1:]] or [(kind, None)]
