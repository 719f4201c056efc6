"""Read and validate a Katib `kubeflow.org/v1beta1` Experiment for the local backend.

The checks follow what Katib's admission webhook refuses (types, objective, feasible spaces,
trial template references), so a file that passes here also passes on a cluster; the errors
name the field and the fix. Fields that only matter on a cluster are collected, never
silently dropped: the caller prints them in one warning.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from lab import limits
from lab.backends.local import entrypoint
from lab.backends.local.tuning import tfevent
from lab.backends.local.tuning.metrics import FilterError, compile_filter
from lab.backends.local.tuning.space import Param, grid_size
from lab.errors import InputError

ALGORITHMS = ("random", "grid", "tpe", "multivariate-tpe", "cmaes", "sobol",
              "bayesianoptimization", "hyperband")
# Katib algorithms this backend refuses, with the reason and the way out.
_ON_CLUSTER = "or run this Experiment on a cluster (`kflab up`)"
REFUSED = {
    "enas": ("neural architecture search needs Katib's NAS controllers", _ON_CLUSTER[3:]),
    "darts": ("neural architecture search needs Katib's NAS controllers", _ON_CLUSTER[3:]),
    "pbt": ("Katib's population based training keeps its population in a long-lived "
            "suggestion service, and its webhook mounts each trial's own checkpoint folder "
            "(a copy of the parent trial's) at suggestion_trial_dir, the same absolute path "
            "in every trial pod; trial processes on one machine share one filesystem, so "
            "they cannot each see their own folder there without kflab rewriting the "
            "trial's command",
            "use tpe or random with earlyStopping medianstop to cut bad trials, "
            + _ON_CLUSTER),
}
PARAM_TYPES = ("int", "double", "categorical", "discrete")
DISTRIBUTIONS = ("uniform", "logUniform", "normal", "logNormal")
STRATEGIES = ("min", "max", "latest")
COLLECTORS = ("StdOut", "File", "TensorFlowEvent")
# Katib's defaults (pkg/apis/controller/common/v1beta1/common_types.go).
DEFAULT_TFEVENT_DIR = "/var/log/katib/tfevent/"
# Katib's default metrics filter: `name=value`, value possibly signed, decimal, exponent.
DEFAULT_FILTER = r"([\w|-]+)\s*=\s*([+-]?\d*(\.\d+)?([Ee][+-]?\d+)?)"
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


@dataclass(frozen=True)
class Objective:
    type: str  # minimize | maximize
    metric: str
    goal: float | None
    additional: tuple[str, ...]
    strategies: dict[str, str]  # metric name -> min | max | latest, in Katib's stored order

    @property
    def names(self) -> tuple[str, ...]:
        return (self.metric, *self.additional)


@dataclass(frozen=True)
class Collector:
    kind: str  # StdOut | File | TensorFlowEvent
    path: str | None = None  # File: the file; TensorFlowEvent: the directory
    format: str = "TEXT"  # TEXT | JSON (File only)
    filters: tuple[str, ...] = (DEFAULT_FILTER,)


@dataclass(frozen=True)
class EarlyStop:
    algorithm: str  # medianstop
    min_trials_required: int = 3
    start_step: int = 4


@dataclass
class Spec:
    name: str
    namespace: str
    objective: Objective
    algorithm: str
    settings: dict[str, str]
    params: tuple[Param, ...]
    parallel: int
    max_trials: int | None
    max_failed: int | None
    collector: Collector
    early: EarlyStop | None
    trial_parameters: dict[str, str]  # trialParameter name -> reference
    trial_spec: dict[str, Any]
    container_path: tuple[str | int, ...]  # where the primary container sits in trial_spec
    primary: str
    warnings: list[str] = field(default_factory=list)
    # (field, image) of the first workload image that needs a container (containers/
    # choice.py), None when trials run as local processes
    container_image: tuple[str, str] | None = None
    images: tuple[tuple[str, Any], ...] = ()  # (field, image) of every trial container run

    @property
    def container(self) -> dict[str, Any]:
        node: Any = self.trial_spec
        for key in self.container_path:
            node = node[key]
        return node

    @property
    def gpus(self) -> int:
        """GPUs each trial asks for: the primary container's nvidia.com/gpu limit."""
        res = self.container.get("resources")
        limits = res.get("limits") if isinstance(res, dict) else None
        raw = limits.get("nvidia.com/gpu") if isinstance(limits, dict) else None
        text = str(raw) if isinstance(raw, int | str) and not isinstance(raw, bool) else ""
        return int(text) if text.isascii() and text.isdigit() else 0


class _Reader:
    """Field access that raises InputError with the dotted path of the field."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, path: str, problem: str, hint: str | None = None) -> InputError:
        return InputError(self.source, path, problem, hint=hint)

    def get(self, data: dict[str, Any], key: str, kind: type | tuple[type, ...], path: str,
            *, required: bool = False, default: Any = None) -> Any:
        where = f"{path}.{key}" if path else key
        if key not in data or data[key] is None:
            if required:
                raise self.fail(where, "missing", f"add '{key}:' under {path or 'the object'}")
            return default
        value = data[key]
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            names = " or ".join(k.__name__ for k in kinds)
            raise self.fail(where, f"expected {names}, got {type(value).__name__} "
                                   f"({_short(value)})")
        return value

    def count(self, data: dict[str, Any], key: str, path: str, *, minimum: int,
              maximum: tuple[int, str] = (limits.INT32_MAX, "INT32_MAX")) -> int | None:
        """An integer field; `maximum` is (limit, its name in lab/limits.py)."""
        value = self.get(data, key, int, path)
        if value is not None and value < minimum:
            raise self.fail(f"{path}.{key}", f"must be >= {minimum}, got {value}")
        if value is not None and value > maximum[0]:
            raise self.fail(f"{path}.{key}", limits.limit(key, value, *maximum),
                            f"set {key} to at most {maximum[0]}")
        return value


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def katib_string(r: _Reader, raw: Any, path: str) -> str:
    """A field Katib's CRD types as a string (feasibleSpace bounds, algorithm and early
    stopping settings): the API server refuses a YAML number or boolean there, so a
    manifest that runs here runs on a cluster too."""
    if not isinstance(raw, str):
        json_type = {bool: "boolean", int: "integer", float: "number"}.get(type(raw),
                                                                           type(raw).__name__)
        raise r.fail(path, f"Invalid value: \"{json_type}\": must be of type string "
                           "(Katib's API keeps it as a string; the API server refuses "
                           f"{_short(raw)})",
                     f"quote it: \"{str(raw).lower() if isinstance(raw, bool) else raw}\"")
    return raw


def _number(r: _Reader, raw: Any, path: str, *, integer: bool) -> float:
    """A number, given as a YAML number or (Katib's string fields) a string."""
    if isinstance(raw, bool) or not isinstance(raw, str | int | float):
        raise r.fail(path, f"expected a number, got {type(raw).__name__} ({_short(raw)})")
    try:
        value = int(str(raw)) if integer else float(str(raw))
    except ValueError:
        kind = "an integer" if integer else "a number"
        raise r.fail(path, f"'{raw}' is not {kind}",
                     hint="write it as e.g. \"1\"" if integer else "write it as e.g. \"0.01\"") \
            from None
    if not math.isfinite(value):
        raise r.fail(path, f"'{raw}' is not a finite number")
    if integer and abs(value) > limits.INT64_MAX:
        raise r.fail(path, f"'{_short(raw)}' does not fit in 64 bits")
    return value


def _param(r: _Reader, raw: Any, path: str) -> Param:
    if not isinstance(raw, dict):
        raise r.fail(path, "a parameter must be a mapping",
                     "give name, parameterType and feasibleSpace")
    name = r.get(raw, "name", str, path, required=True)
    if not name:
        raise r.fail(f"{path}.name", "must not be empty")
    ptype = r.get(raw, "parameterType", str, path, required=True)
    if ptype not in PARAM_TYPES:
        raise r.fail(f"{path}.parameterType", f"unknown parameter type '{ptype}'",
                     f"use one of: {', '.join(PARAM_TYPES)}")
    space = r.get(raw, "feasibleSpace", dict, path, required=True)
    sp = f"{path}.feasibleSpace"
    dist = r.get(space, "distribution", str, sp, default="uniform") or "uniform"
    if dist not in DISTRIBUTIONS:
        raise r.fail(f"{sp}.distribution", f"unknown distribution '{dist}'",
                     f"use one of: {', '.join(DISTRIBUTIONS)}")
    if ptype in ("categorical", "discrete"):
        extra = [k for k in ("min", "max", "step") if space.get(k) not in (None, "")]
        if extra:
            raise r.fail(f"{sp}.{extra[0]}", f"not allowed for {ptype} parameters",
                         "give the values in feasibleSpace.list")
        values = r.get(space, "list", list, sp)
        if not values:
            raise r.fail(f"{sp}.list", f"empty feasible space for {ptype} parameter '{name}'",
                         "list at least one value")
        if len(values) > limits.MAX_FEASIBLE_VALUES:
            raise r.fail(f"{sp}.list", limits.limit("number of values", len(values),
                                                    limits.MAX_FEASIBLE_VALUES,
                                                    "MAX_FEASIBLE_VALUES"))
        out = []
        for i, v in enumerate(values):
            if isinstance(v, dict | list):
                raise r.fail(f"{sp}.list[{i}]", f"expected a scalar, got {type(v).__name__}")
            katib_string(r, v, f"{sp}.list[{i}]")
            if ptype == "discrete":
                _number(r, v, f"{sp}.list[{i}]", integer=False)
            out.append(str(v))
        if len(set(out)) != len(out):
            raise r.fail(f"{sp}.list", "values must be unique")
        return Param(name, ptype, values=tuple(out))
    integer = ptype == "int"
    if space.get("list"):
        raise r.fail(f"{sp}.list", f"not allowed for {ptype} parameters",
                     "give feasibleSpace.min and max (and step), or make it discrete")
    for key in ("min", "max"):
        if space.get(key) in (None, ""):
            raise r.fail(f"{sp}.{key}", f"missing for {ptype} parameter '{name}'",
                         f"set feasibleSpace.{key}")
    lo = _number(r, katib_string(r, space["min"], f"{sp}.min"), f"{sp}.min", integer=integer)
    hi = _number(r, katib_string(r, space["max"], f"{sp}.max"), f"{sp}.max", integer=integer)
    if lo > hi:
        raise r.fail(sp, f"empty feasible space: min {space['min']} > max {space['max']}",
                     "swap min and max")
    step = None
    if space.get("step") not in (None, ""):
        step = _number(r, katib_string(r, space["step"], f"{sp}.step"), f"{sp}.step",
                       integer=integer)
        if step <= 0:
            raise r.fail(f"{sp}.step", f"must be > 0, got {space['step']}")
    if dist in ("logUniform", "logNormal") and lo <= 0:
        raise r.fail(f"{sp}.min", f"{dist} needs min > 0, got {space['min']}")
    return Param(name, ptype, lo, hi, step, distribution=dist)


def _objective(r: _Reader, spec: dict[str, Any]) -> Objective:
    obj = r.get(spec, "objective", dict, "spec", required=True)
    p = "spec.objective"
    otype = r.get(obj, "type", str, p, required=True)
    if otype not in ("minimize", "maximize"):
        raise r.fail(f"{p}.type", f"unknown objective type '{otype}'",
                     "use minimize or maximize")
    metric = r.get(obj, "objectiveMetricName", str, p, required=True)
    if not metric:
        raise r.fail(f"{p}.objectiveMetricName", "must not be empty")
    goal = r.get(obj, "goal", (int, float, str), p)
    if goal is not None:
        goal = _number(r, goal, f"{p}.goal", integer=False)
    additional = r.get(obj, "additionalMetricNames", list, p, default=[])
    for i, m in enumerate(additional):
        if not isinstance(m, str) or not m:
            raise r.fail(f"{p}.additionalMetricNames[{i}]", "expected a metric name")
        if m == metric:
            raise r.fail(f"{p}.additionalMetricNames[{i}]",
                         f"'{m}' is already the objective metric", "remove it from this list")
    given: dict[str, str] = {}
    for i, s in enumerate(r.get(obj, "metricStrategies", list, p, default=[])):
        sp = f"{p}.metricStrategies[{i}]"
        if not isinstance(s, dict):
            raise r.fail(sp, "expected a mapping with name and value")
        name = r.get(s, "name", str, sp, required=True)
        value = r.get(s, "value", str, sp, required=True)
        if value not in STRATEGIES:
            raise r.fail(f"{sp}.value", f"unknown strategy '{value}'",
                         f"use one of: {', '.join(STRATEGIES)}")
        if name != metric and name not in additional:
            raise r.fail(f"{sp}.name", f"metric '{name}' is not the objective nor an "
                                       "additional metric", "declare it in additionalMetricNames")
        given[name] = value
    # Katib's defaulting webhook (pkg/apis/controller/experiments/v1beta1/
    # experiment_defaults.go, `setDefaultObjective`): given strategies stay first, then the
    # objective's and every additional metric's default -- min when minimizing, max when
    # maximizing, for additional metrics too.
    default = "min" if otype == "minimize" else "max"
    strategies = dict(given)
    for name in (metric, *additional):
        strategies.setdefault(name, default)
    return Objective(otype, metric, goal, tuple(additional), strategies)


def _algorithm(r: _Reader, spec: dict[str, Any]) -> tuple[str, dict[str, str]]:
    algo = r.get(spec, "algorithm", dict, "spec", required=True)
    name = r.get(algo, "algorithmName", str, "spec.algorithm", required=True)
    if name in REFUSED:
        why, fix = REFUSED[name]
        raise r.fail("spec.algorithm.algorithmName",
                     f"'{name}' is not supported on the local backend: {why}", fix)
    if name not in ALGORITHMS:
        raise r.fail("spec.algorithm.algorithmName", f"unknown algorithm '{name}'",
                     f"use one of: {', '.join(a for a in ALGORITHMS if a not in REFUSED)}")
    settings: dict[str, str] = {}
    for i, s in enumerate(r.get(algo, "algorithmSettings", list, "spec.algorithm", default=[])):
        sp = f"spec.algorithm.algorithmSettings[{i}]"
        if not isinstance(s, dict):
            raise r.fail(sp, "expected a mapping with name and value")
        key = r.get(s, "name", str, sp, required=True)
        if s.get("value") is None:
            raise r.fail(f"{sp}.value", "missing", f"add 'value:' under {sp}")
        settings[key] = katib_string(r, s["value"], f"{sp}.value")
    return name, settings


def _collector(r: _Reader, spec: dict[str, Any]) -> Collector:
    mc = r.get(spec, "metricsCollectorSpec", dict, "spec", default={})
    p = "spec.metricsCollectorSpec"
    coll = r.get(mc, "collector", dict, p, default={})
    kind = r.get(coll, "kind", str, f"{p}.collector", default="StdOut")
    if kind == "Custom":
        raise r.fail(f"{p}.collector.kind",
                     "a Custom collector is not supported on the local backend: Katib runs "
                     "its container as a sidecar that must report metrics itself to "
                     "katib-db-manager over gRPC, and reads nothing from its stdout",
                     "print name=value lines from the training container (the StdOut "
                     "collector) or write them to a File collector's path")
    if kind not in COLLECTORS:
        raise r.fail(f"{p}.collector.kind",
                     f"metrics collector '{kind}' is not supported on the local backend",
                     "print metrics as name=value lines (StdOut), write them to a File, or write "
                     "TensorBoard event files (TensorFlowEvent)")
    source = r.get(mc, "source", dict, p, default={})
    filters: tuple[str, ...] = (DEFAULT_FILTER,)
    mf = r.get(source, "filter", dict, f"{p}.source")
    if mf is not None:
        raw = r.get(mf, "metricsFormat", list, f"{p}.source.filter", default=[])
        for i, f in enumerate(raw):
            fp = f"{p}.source.filter.metricsFormat[{i}]"
            if not isinstance(f, str):
                raise r.fail(fp, "expected a regular expression")
            try:
                groups = compile_filter(f).groups
            except FilterError as exc:
                raise r.fail(fp, f"invalid regular expression for Katib's collector (RE2 "
                                 f"syntax, as Go's regexp): {exc}",
                             "write it without backreferences or lookarounds") from None
            if groups < 2:
                raise r.fail(fp, "the expression needs two groups: (name) then (value)",
                             r"e.g. '([\w-]+)\s*:\s*([0-9.]+)'")
        filters = tuple(raw) or filters
    if kind == "StdOut":
        return Collector(kind, filters=filters)
    if kind == "TensorFlowEvent":
        return _tfevent(r, source, filters)
    fsp = r.get(source, "fileSystemPath", dict, f"{p}.source", required=True)
    fp = f"{p}.source.fileSystemPath"
    path = r.get(fsp, "path", str, fp, required=True)
    fmt = r.get(fsp, "format", str, fp, default="TEXT")
    if fmt not in ("TEXT", "JSON"):
        raise r.fail(f"{fp}.format", f"unknown format '{fmt}'", "use TEXT or JSON")
    kind_ = r.get(fsp, "kind", str, fp, default="File")
    if kind_ != "File":
        raise r.fail(f"{fp}.kind", f"'{kind_}' is not supported", "use kind: File")
    return Collector(kind, path, fmt, filters)


def _tfevent(r: _Reader, source: dict[str, Any], filters: tuple[str, ...]) -> Collector:
    """Katib's defaults and webhook rules for the TensorFlowEvent collector: fileSystemPath
    defaults to {kind: Directory, path: /var/log/katib/tfevent/}
    (pkg/apis/controller/experiments/v1beta1/experiment_defaults.go
    setDefaultMetricsCollector); the kind must be Directory, the path absolute and the
    format empty (pkg/webhook/v1beta1/experiment/validator/validator.go
    validateMetricsCollector)."""
    fp = "spec.metricsCollectorSpec.source.fileSystemPath"
    fsp = r.get(source, "fileSystemPath", dict, "spec.metricsCollectorSpec.source",
                default={})
    kind = r.get(fsp, "kind", str, fp, default="Directory")
    path = r.get(fsp, "path", str, fp, default="") or DEFAULT_TFEVENT_DIR
    if kind != "Directory" or not path.startswith("/"):
        raise r.fail(fp if kind != "Directory" else f"{fp}.path",
                     "the directory path where the TensorFlow event files are is required "
                     f"(kind: Directory and an absolute path; got kind {_short(kind)}, path "
                     f"{_short(path)})",
                     "e.g. fileSystemPath: {kind: Directory, path: /var/log/katib/tfevent/}, "
                     "the folder the trial's summary writer writes into")
    fmt = r.get(fsp, "format", str, fp, default="")
    if fmt:
        raise r.fail(f"{fp}.format", f"must be empty for the TensorFlowEvent collector "
                                     f"(got {_short(fmt)})", "remove format")
    if not tfevent.available():
        raise r.fail("spec.metricsCollectorSpec.collector.kind",
                     "the TensorFlowEvent collector reads event files with TensorBoard, "
                     "which is not installed", f"install the tf extra: {tfevent.EXTRA}")
    return Collector("TensorFlowEvent", path, "", filters)


def _early(r: _Reader, spec: dict[str, Any]) -> EarlyStop | None:
    es = r.get(spec, "earlyStopping", dict, "spec")
    if es is None:
        return None
    p = "spec.earlyStopping"
    name = r.get(es, "algorithmName", str, p, required=True)
    if name != "medianstop":
        raise r.fail(f"{p}.algorithmName", f"unknown early stopping algorithm '{name}'",
                     "use medianstop")
    out = {"min_trials_required": 3, "start_step": 4}
    for i, s in enumerate(r.get(es, "algorithmSettings", list, p, default=[])):
        sp = f"{p}.algorithmSettings[{i}]"
        if not isinstance(s, dict):
            raise r.fail(sp, "expected a mapping with name and value")
        key = r.get(s, "name", str, sp, required=True)
        if key not in out:
            raise r.fail(f"{sp}.name", f"unknown medianstop setting '{key}'",
                         "use min_trials_required or start_step")
        if s.get("value") is None:
            raise r.fail(f"{sp}.value", "missing", f"add 'value:' under {sp}")
        value = int(_number(r, katib_string(r, s["value"], f"{sp}.value"), f"{sp}.value",
                            integer=True))
        if value < 1:
            raise r.fail(f"{sp}.value", f"{key} must be >= 1")
        out[key] = value
    return EarlyStop(name, **out)


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


def _template(r: _Reader, spec: dict[str, Any], params: tuple[Param, ...],
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


def _trainjob_trainer(r: _Reader, trial_spec: dict[str, Any], primary: str,
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


def parse(obj: dict[str, Any]) -> Spec:
    """Validate an Experiment object; raise InputError naming the first bad field."""
    meta = obj.get("metadata") or {}
    name, namespace = str(meta.get("name", "")), str(meta.get("namespace", "default"))
    r = _Reader(f"experiment '{name}'")
    if not re.match(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", name) or len(name) > 40:
        raise r.fail("metadata.name", f"'{name}' is not a valid name",
                     "use lower-case letters, digits and '-', at most 40 characters")
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        raise r.fail("spec", "missing or not a mapping", "add spec: with objective, algorithm, "
                                                         "parameters and trialTemplate")
    warnings: list[str] = []
    objective = _objective(r, spec)
    algorithm, settings = _algorithm(r, spec)
    raw_params = r.get(spec, "parameters", list, "spec", required=True)
    if not raw_params:
        raise r.fail("spec.parameters", "empty search space", "declare at least one parameter")
    if len(raw_params) > limits.MAX_PARAMETERS:
        raise r.fail("spec.parameters", limits.limit("number of parameters", len(raw_params),
                                                     limits.MAX_PARAMETERS, "MAX_PARAMETERS"))
    params = tuple(_param(r, q, f"spec.parameters[{i}]") for i, q in enumerate(raw_params))
    seen: set[str] = set()
    for i, q in enumerate(params):
        if q.name in seen:
            raise r.fail(f"spec.parameters[{i}].name", f"duplicate parameter '{q.name}'")
        seen.add(q.name)
    parallel = r.count(spec, "parallelTrialCount", "spec", minimum=1,
                       maximum=(limits.MAX_PARALLEL_TRIALS, "MAX_PARALLEL_TRIALS")) or 3
    max_trials = r.count(spec, "maxTrialCount", "spec", minimum=1,
                         maximum=(limits.MAX_TRIAL_COUNT, "MAX_TRIAL_COUNT"))
    max_failed = r.count(spec, "maxFailedTrialCount", "spec", minimum=0)
    if max_trials is not None and max_failed is not None and max_failed > max_trials:
        raise r.fail("spec.maxFailedTrialCount",
                     f"{max_failed} is larger than maxTrialCount {max_trials}",
                     "lower maxFailedTrialCount")
    if max_trials is not None and parallel > max_trials:
        raise r.fail("spec.parallelTrialCount",
                     f"{parallel} is larger than maxTrialCount {max_trials}",
                     "lower parallelTrialCount")
    collector = _collector(r, spec)
    early = _early(r, spec)
    if early is not None and collector.kind == "TensorFlowEvent":
        raise r.fail("spec.earlyStopping",
                     "Katib v0.19's TensorFlowEvent collector takes no early-stopping rules "
                     "(cmd/metricscollector/v1beta1/tfevent-metricscollector/main.py defines "
                     "no -stop-rule flag, so its sidecar would exit on the first trial "
                     "given rules)",
                     "remove earlyStopping, or report the metric with the StdOut or File "
                     "collector, which apply median stopping")
    from lab.backends.local.containers.choice import override

    tparams, trial_spec, cpath, primary, images, in_container = _template(
        r, spec, params, warnings, override(obj))
    from lab.backends.local.tuning.search import check_settings

    problem = check_settings(algorithm, settings, params, max_trials, parallel)
    if problem:
        fld, _, text = problem.partition(": ")
        raise r.fail(fld, text, "see docs/tuning.md for each algorithm's settings")
    if algorithm == "grid" and (size := grid_size(params)) > limits.MAX_GRID_POINTS:
        raise r.fail("spec.parameters", limits.limit("grid size (points)", size,
                                                     limits.MAX_GRID_POINTS, "MAX_GRID_POINTS"),
                     "use a larger feasibleSpace.step, fewer values, or another algorithm")
    if "nasConfig" in spec:
        raise r.fail("spec.nasConfig", "neural architecture search needs a cluster")
    resume = spec.get("resumePolicy", "Never")
    if resume not in ("Never", "LongRunning", "FromVolume"):
        raise r.fail("spec.resumePolicy", f"unknown resumePolicy {resume!r}",
                     "use Never, LongRunning or FromVolume")
    return Spec(name, namespace, objective, algorithm, settings, params, parallel, max_trials,
                max_failed, collector, early, tparams, trial_spec, cpath, primary, warnings,
                in_container, tuple(images))


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
