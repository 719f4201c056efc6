"""A Katib Experiment's trial template, read as Katib's webhook and experiment controller
read it: which kinds a trial may be (a Job, a training job's replicas, a TrainJob's nodes),
the primary container and its command, the `${trialParameters.*}` and `${trialSpec.*}`
references, the images the trials run, and the fields only a cluster acts on (named, never
silently dropped).
"""

from __future__ import annotations

import re
from typing import Any

from lab.backends.local import entrypoint
from lab.backends.local.tuning.reader import Reader
from lab.backends.local.tuning.space import Param

DEFAULT_PRIMARY = "training-container"
# Trial kinds run locally (a Job's container; a training job's replicas, a TrainJob's nodes):
# others need their own controller (Argo Workflow, Tekton PipelineRun, MPIJob's launcher...).
TRIAL_KINDS = ("Job", "PyTorchJob", "TFJob", "TrainJob")
JOB_TRIAL_KINDS = ("PyTorchJob", "TFJob", "TrainJob")  # every replica runs, as its operator does
# A TrainJob has no container list: its trainer (image, command, args, env) fills the
# runtime's container `node` in every node pod (Trainer v2.1.0 pkg/runtime/framework/plugins/
# torch/torch.go; manifests/base/runtimes torch_distributed.yaml names it node), and
# Katib v0.19.0 defaults a TrainJob trial's primary pod to node index 0
# (pkg/apis/controller/experiments/v1beta1/constants.go DefaultTrainJobPrimaryPodLabels).
TRAINJOB_API = "trainer.kubeflow.org/v1alpha1"
TRAINJOB_CONTAINER = "node"
PLACEHOLDER = re.compile(r"\$\{trialParameters\.([^}]*)\}")
META_REF = re.compile(r"^\$\{trialSpec\.(Name|Namespace|Kind|APIVersion|"
                      r"Labels\[[^\]]+\]|Annotations\[[^\]]+\])\}$")
META_KEY = re.compile(r"^\$\{trialSpec\.(Labels|Annotations)\[([^\]]+)\]\}$")
# Container fields a local process honours; every other one is cluster-only.
CONTAINER_LOCAL = {"name", "command", "args", "env", "workingDir"}
# ... and those a trial's container of its image honours too (containers/spec.py)
IN_CONTAINER = {"image", "imagePullPolicy", "resources"}
TEMPLATE_CLUSTER_ONLY = ("retain", "primaryPodLabels", "successCondition", "failureCondition")


def _find_containers(node: Any, path: tuple[str | int, ...] = ()) -> list[tuple[Any, ...]]:
    """Paths of every `containers` list in a trial spec (Job, PyTorchJob, ... alike)."""
    found: list[tuple[Any, ...]] = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "containers" and isinstance(value, list):
                found.extend((*path, key, i) for i in range(len(value)))
            else:
                found.extend(_find_containers(value, (*path, key)))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            found.extend(_find_containers(value, (*path, i)))
    return found


def _dotted(path: tuple[str | int, ...]) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)


def _workload_images(trial_spec: dict[str, Any], cpath: tuple[Any, ...],
                     job_trial: bool) -> list[tuple[str, Any]]:
    """(field, image) of the containers a trial runs: a Job's primary container, or each
    replica's container that the Training Operator runs for a training-job trial."""
    where = "spec.trialTemplate.trialSpec"
    if not job_trial:
        return [(f"{where}{_dotted(cpath)}.image", _at(trial_spec, cpath).get("image"))]
    from lab.backends.local.workloads import containers_of

    return [(f"{where}.{f}", img) for f, img in containers_of(trial_spec)]


def read_template(r: Reader, spec: dict[str, Any], params: tuple[Param, ...],
                  warnings: list[str], runtime: str | None = None,
                  ) -> tuple[dict[str, str], dict[str, Any], tuple[Any, ...], str,
                             list[tuple[str, Any]], tuple[str, str] | None]:
    tt = r.get(spec, "trialTemplate", dict, "spec", required=True)
    p = "spec.trialTemplate"
    if "configMap" in tt:
        raise r.fail(f"{p}.configMap", "trial templates from a ConfigMap need a cluster",
                     "inline the template under trialTemplate.trialSpec")
    trial_spec = r.get(tt, "trialSpec", dict, p, required=True)
    names = {q.name for q in params}
    tparams: dict[str, str] = {}
    for i, tp in enumerate(r.get(tt, "trialParameters", list, p, default=[])):
        tpp = f"{p}.trialParameters[{i}]"
        if not isinstance(tp, dict):
            raise r.fail(tpp, "expected a mapping with name and reference")
        tname = r.get(tp, "name", str, tpp, required=True)
        ref = r.get(tp, "reference", str, tpp, required=True)
        if tname in tparams:
            raise r.fail(f"{tpp}.name", f"duplicate trial parameter '{tname}'")
        if ref in tparams.values():
            raise r.fail(f"{tpp}.reference", f"'{ref}' is referenced twice",
                         "each parameter is referenced by one trial parameter")
        if ref not in names and not META_REF.match(ref):
            raise r.fail(f"{tpp}.reference", f"'{ref}' is not a parameter of the experiment",
                         f"reference one of: {', '.join(sorted(names))}")
        _check_meta_ref(r, f"{tpp}.reference", ref, trial_spec)
        tparams[tname] = ref
    used: set[str] = set()
    for text in _strings(trial_spec):
        for m in PLACEHOLDER.finditer(text):
            if m.group(1) not in tparams:
                raise r.fail(f"{p}.trialSpec", f"'${{trialParameters.{m.group(1)}}}' is used "
                                               "but not declared",
                             f"add {{name: {m.group(1)}, reference: <parameter>}} to "
                             "trialTemplate.trialParameters")
            used.add(m.group(1))
    for i, tname in enumerate(tparams):
        if tname not in used:
            raise r.fail(f"{p}.trialParameters[{i}].name",
                         f"'{tname}' is never used in trialSpec",
                         f"put ${{trialParameters.{tname}}} in the command, or remove it")
    primary = r.get(tt, "primaryContainerName", str, p, default=DEFAULT_PRIMARY)
    paths = _find_containers(trial_spec)
    tkind, api = trial_spec.get("kind"), trial_spec.get("apiVersion")
    if tkind == "TrainJob":
        paths = _trainjob_trainer(r, trial_spec, primary, f"{p}.trialSpec")
    if not paths or (tkind is not None and tkind not in TRIAL_KINDS):
        if tkind not in (None, *TRIAL_KINDS):  # Argo Workflow, MPIJob, XGBoostJob...
            raise r.fail(f"{p}.trialSpec.kind", f"a trial of kind {tkind} ({api}) needs its own "
                         "controller on a cluster: the local backend runs trials of kind "
                         "Job, PyTorchJob, TFJob or TrainJob",
                         "run this Experiment on a cluster (`kflab up`), or write the trial "
                         "as a batch/v1 Job running the same command")
        raise r.fail(f"{p}.trialSpec", "no containers found",
                     "give a Job (spec.template.spec.containers) or a training job template")
    chosen = [q for q in paths if _at(trial_spec, q).get("name") == primary] \
        if all(isinstance(_at(trial_spec, q), dict) for q in paths) else []
    if tkind == "TrainJob":
        chosen = paths
    if not chosen and len(paths) == 1:
        chosen = paths
    if not chosen:
        raise r.fail(f"{p}.primaryContainerName", f"no container named '{primary}'",
                     "set primaryContainerName to the training container's name")
    cpath = chosen[0]
    container = _at(trial_spec, cpath)
    where = f"{p}.trialSpec{_dotted(cpath)}"
    if not isinstance(container, dict):
        raise r.fail(where, "a container must be a mapping")
    command = r.get(container, "command", list, where)
    args = r.get(container, "args", list, where, default=[])
    job_trial = tkind in JOB_TRIAL_KINDS
    images = _workload_images(trial_spec, cpath, job_trial)
    from lab.backends.local.containers.choice import ANNOTATION, needs_container

    in_container = needs_container(
        images, {"metadata": {"annotations": {ANNOTATION: runtime} if runtime else {}}})
    if not command and in_container is None:
        raise r.fail(f"{where}.command", entrypoint.problem(container),
                     entrypoint.hint(container, "python3", "/path/to/train.py"))
    for key, seq in (("command", command), ("args", args)):
        for i, a in enumerate(seq):
            if isinstance(a, bool) or not isinstance(a, str | int | float):
                raise r.fail(f"{where}.{key}[{i}]", f"expected a string, got {type(a).__name__}")
    env = r.get(container, "env", list, where, default=[])
    for i, e in enumerate(env):
        if not isinstance(e, dict) or not isinstance(e.get("name"), str):
            raise r.fail(f"{where}.env[{i}]", "expected {name: ..., value: ...}")
        if "valueFrom" in e:
            warnings.append(f"{where}.env[{i}].valueFrom ({e['name']}): needs a cluster, unset")
    workdir = r.get(container, "workingDir", str, where)
    del workdir  # validated only; resolved when trials start
    honoured = CONTAINER_LOCAL | (IN_CONTAINER if in_container else set())
    # a job trial's other replicas run too: their containers' cluster-only fields as well
    # (a TrainJob's trainer: the training flavour lists what it ignores, trainer.image...)
    for q in ([cpath] if tkind != "TrainJob" else []) + (
            [q for q in paths if q != cpath and q[:-1] != cpath[:-1]] if job_trial else []):
        other = _at(trial_spec, q)
        skip = [k for k in other if k not in honoured] if isinstance(other, dict) \
            else []
        if skip:
            warnings.append(f"{p}.trialSpec{_dotted(q)}: {', '.join(sorted(skip))}")
    # A training job's replicas all run (tuning/jobtrial.py); other containers of the
    # primary's own pod (sidecars) do not.
    others = [_dotted(q) for q in paths if q != cpath
              and (not job_trial or q[:-1] == cpath[:-1])]
    if others:
        warnings.append(f"{p}.trialSpec: only the primary container '{primary}' runs; "
                        f"not {', '.join(others)}")
    for key in TEMPLATE_CLUSTER_ONLY:
        if key in tt:
            warnings.append(f"{p}.{key}")
    # A job trial's replicas, restart policies and run policy are the training
    # supervisor's to honour (it names what it ignores itself).
    around = [] if job_trial else _around(trial_spec, cpath)
    if around:
        warnings.append(f"{p}.trialSpec: {', '.join(around)}")
    return tparams, trial_spec, cpath, primary, images, in_container


def _trainjob_trainer(r: Reader, trial_spec: dict[str, Any], primary: str,
                      where: str) -> list[tuple[Any, ...]]:
    """A TrainJob trial's one "container": spec.trainer, run in the runtime's node
    container. Katib's pod webhook finds the primary container by name in the node pod
    (pkg/webhook/v1beta1/pod/utils.go getPrimaryContainerIndex); a name other than the
    runtime's leaves it nothing to collect from, and the pod is refused there."""
    if trial_spec.get("apiVersion") != TRAINJOB_API:
        raise r.fail(f"{where}.apiVersion",
                     f"a TrainJob trial must be {TRAINJOB_API} (Kubeflow Trainer v2.1.0), "
                     f"got {trial_spec.get('apiVersion')!r}", f"set apiVersion: {TRAINJOB_API}")
    spec = trial_spec.get("spec")
    trainer = spec.get("trainer") if isinstance(spec, dict) else None
    if not isinstance(trainer, dict):
        raise r.fail(f"{where}.spec.trainer", "missing: a TrainJob trial runs its trainer",
                     "add spec.trainer with command (and numNodes)")
    if primary != TRAINJOB_CONTAINER:
        raise r.fail("spec.trialTemplate.primaryContainerName",
                     f"'{primary}': a TrainJob's trainer runs in the runtime's container "
                     f"'{TRAINJOB_CONTAINER}', so Katib finds no container '{primary}' to "
                     "collect metrics from", f"set primaryContainerName: {TRAINJOB_CONTAINER}")
    return [("spec", "trainer")]


def _around(trial_spec: dict[str, Any], cpath: tuple[Any, ...]) -> list[str]:
    """Fields beside the path to the primary container (Job's backoffLimit, the pod's
    restartPolicy, volumes, nodeSelector, a replica's `replicas`...): cluster-only."""
    out = []
    for depth in range(len(cpath) - 1):  # down to the pod spec holding `containers`
        node = _at(trial_spec, cpath[:depth])
        if not isinstance(node, dict):
            continue
        for key, value in node.items():
            if key == cpath[depth] or (depth == 0 and key in ("apiVersion", "kind",
                                                             "metadata")):
                continue
            if _find_containers(value):  # another replica: reported with the containers
                continue
            out.append(_dotted((*cpath[:depth], key))[1:])
    return out


def _at(node: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        node = node[key]
    return node


def _strings(node: Any) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, dict):
        return [s for v in node.values() for s in _strings(v)]
    if isinstance(node, list):
        return [s for v in node for s in _strings(v)]
    return []


def meta_source(trial_spec: dict[str, Any], group: str) -> dict[str, Any]:
    """The trial spec's own labels or annotations: Katib's generator reads
    `${trialSpec.Labels[k]}` from the trialSpec's metadata, not the Experiment's
    (pkg/controller.v1beta1/experiment/manifest/generator.go applyParameters)."""
    meta = trial_spec.get("metadata") if isinstance(trial_spec.get("metadata"), dict) else {}
    found = meta.get("labels" if group == "Labels" else "annotations")
    return found if isinstance(found, dict) else {}


def _check_meta_ref(r: Any, where: str, ref: str, trial_spec: dict[str, Any]) -> None:
    """A label or annotation key the trial spec lacks: Katib's controller fails every
    trial's creation ('illegal reference of trial metadata'), so the Experiment would never
    run a trial; refused here with that reason."""
    m = META_KEY.match(ref)
    if m is None:
        return
    group, key = m.group(1), m.group(2)
    if key not in meta_source(trial_spec, group):
        what = "Label" if group == "Labels" else "Annotation"
        raise r.fail(where, f"illegal reference of trial metadata: {ref}; failed to fetch "
                            f"{what}: {key} (Katib's controller would create no trial)",
                     f"add {key} under trialTemplate.trialSpec.metadata."
                     f"{group.lower()}, or reference another key")
