"""Read and validate a Katib `kubeflow.org/v1beta1` Experiment for the local backend.

The checks follow what Katib's admission webhook refuses (types, objective, feasible spaces,
trial template references), so a file that passes here also passes on a cluster; the errors
name the field and the fix. Fields that only matter on a cluster are collected, never
silently dropped: the caller prints them in one warning. The trial template is read in
template.py; every field goes through reader.py's Reader.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from lab import limits
from lab.backends.local.tuning import tfevent
from lab.backends.local.tuning.metrics import FilterError, compile_filter
from lab.backends.local.tuning.reader import Reader, short
from lab.backends.local.tuning.space import Param, grid_size
from lab.backends.local.tuning.template import read_template
from lab.deps import install_extras

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


def katib_string(r: Reader, raw: Any, path: str) -> str:
    """A field Katib's CRD types as a string (feasibleSpace bounds, algorithm and early
    stopping settings): the API server refuses a YAML number or boolean there, so a
    manifest that runs here runs on a cluster too."""
    if not isinstance(raw, str):
        json_type = {bool: "boolean", int: "integer", float: "number"}.get(type(raw),
                                                                           type(raw).__name__)
        raise r.fail(path, f"Invalid value: \"{json_type}\": must be of type string "
                           "(Katib's API keeps it as a string; the API server refuses "
                           f"{short(raw)})",
                     f"quote it: \"{str(raw).lower() if isinstance(raw, bool) else raw}\"")
    return raw


def _number(r: Reader, raw: Any, path: str, *, integer: bool) -> float:
    """A number, given as a YAML number or (Katib's string fields) a string."""
    if isinstance(raw, bool) or not isinstance(raw, str | int | float):
        raise r.fail(path, f"expected a number, got {type(raw).__name__} ({short(raw)})")
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
        raise r.fail(path, f"'{short(raw)}' does not fit in 64 bits")
    return value


def _param(r: Reader, raw: Any, path: str) -> Param:
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


def _objective(r: Reader, spec: dict[str, Any]) -> Objective:
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


def _algorithm(r: Reader, spec: dict[str, Any]) -> tuple[str, dict[str, str]]:
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


def _collector(r: Reader, spec: dict[str, Any]) -> Collector:
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


def _tfevent(r: Reader, source: dict[str, Any], filters: tuple[str, ...]) -> Collector:
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
                     f"(kind: Directory and an absolute path; got kind {short(kind)}, path "
                     f"{short(path)})",
                     "e.g. fileSystemPath: {kind: Directory, path: /var/log/katib/tfevent/}, "
                     "the folder the trial's summary writer writes into")
    fmt = r.get(fsp, "format", str, fp, default="")
    if fmt:
        raise r.fail(f"{fp}.format", f"must be empty for the TensorFlowEvent collector "
                                     f"(got {short(fmt)})", "remove format")
    if not tfevent.available():
        raise r.fail("spec.metricsCollectorSpec.collector.kind",
                     "the TensorFlowEvent collector reads event files with TensorBoard, "
                     "which is not installed", f"install the tf extra: {install_extras('tf')}")
    return Collector("TensorFlowEvent", path, "", filters)


def _early(r: Reader, spec: dict[str, Any]) -> EarlyStop | None:
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


def parse(obj: dict[str, Any]) -> Spec:
    """Validate an Experiment object; raise InputError naming the first bad field."""
    meta = obj.get("metadata") or {}
    name, namespace = str(meta.get("name", "")), str(meta.get("namespace", "default"))
    r = Reader(f"experiment '{name}'")
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

    tparams, trial_spec, cpath, primary, images, in_container = read_template(
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
