"""Load and validate scenario folders; every error names the file, the line and the field."""

from __future__ import annotations

import difflib
import math
import os
import re
from pathlib import Path
from typing import Any

from lab import content
from lab.errors import InputError, LabError
from lab.scenarios.actions import ACTION_TYPES
from lab.scenarios.checks import CHECK_TYPES, COMMON_FIELDS
from lab.scenarios.model import (
    BACKENDS,
    CLEANUP_KINDS,
    COMPONENTS,
    LEVELS,
    Action,
    Check,
    Scenario,
    Step,
)
from lab.yamlio import Located, PathKey, dotted, is_file, load_file, user_path

SCENARIO_FILE = "scenario.yaml"
TOP_KEYS = {"id", "title", "level", "duration", "description", "requires", "backends", "steps",
            "cleanup"}
STEP_KEYS = {"id", "title", "text", "hints", "solve", "checks", "needs"}
SLUG = re.compile(r"^[a-z0-9][a-z0-9-]*$")
# Check fields holding a regular expression (re.search), checked when the scenario loads.
REGEX_FIELDS = frozenset({"contains", "stdout"})
DEFAULT_TIMEOUT = 30.0


def search_path() -> list[Path]:
    """Where scenarios are found: $KFLAB_SCENARIOS (os.pathsep-separated), then the bundled set."""
    paths = [Path(p) for p in os.environ.get("KFLAB_SCENARIOS", "").split(os.pathsep) if p]
    bundled = content.scenarios_dir()
    return [*paths, bundled]


def _suggest(word: str, options: Any) -> str:
    close = difflib.get_close_matches(word, list(options), n=1)
    return f"did you mean '{close[0]}'?" if close else f"use one of: {', '.join(sorted(options))}"


class _Validator:
    def __init__(self, doc: Located, root: Path) -> None:
        self.doc, self.root = doc, root

    def fail(self, path: PathKey, problem: str, hint: str | None = None) -> InputError:
        return self.doc.error(path, problem, hint)

    def known_keys(self, data: dict[str, Any], allowed: set[str], path: PathKey) -> None:
        for key in data:
            if key not in allowed:
                raise self.fail((*path, key), "unknown field", _suggest(key, allowed))

    def get(self, data: dict[str, Any], key: str, kind: type | tuple[type, ...], path: PathKey,
            *, required: bool = True, default: Any = None) -> Any:
        if key not in data or data[key] is None:
            if required:
                raise self.fail((*path, key) if path else (key,), "missing",
                                f"add '{key}:' here")
            return default
        value = data[key]
        if not isinstance(value, kind) or (isinstance(value, bool) and bool not in
                                           (kind if isinstance(kind, tuple) else (kind,))):
            names = kind.__name__ if isinstance(kind, type) else " or ".join(
                k.__name__ for k in kind)
            raise self.fail((*path, key), f"expected {names}, got {type(value).__name__}")
        return value

    def scenario(self) -> Scenario:
        data = self.doc.data
        if not isinstance(data, dict):
            raise self.fail((), "a scenario file must be a mapping", "start with 'id:'")
        self.known_keys(data, TOP_KEYS, ())
        sid = self.get(data, "id", str, ())
        if sid != self.root.name:
            raise self.fail(("id",), f"id '{sid}' does not match the folder '{self.root.name}'",
                            f"set id: {self.root.name}")
        level = self.get(data, "level", str, ())
        if level not in LEVELS:
            raise self.fail(("level",), f"unknown level '{level}'", _suggest(level, LEVELS))
        requires = self.get(data, "requires", list, (), required=False, default=[])
        for i, comp in enumerate(requires):
            if comp not in COMPONENTS:
                raise self.fail(("requires", i), f"unknown component '{comp}'",
                                _suggest(str(comp), COMPONENTS))
        backends, unsupported = self.backends(data)
        cleanup = self.cleanup(data)
        steps_raw = self.get(data, "steps", list, ())
        if not steps_raw:
            raise self.fail(("steps",), "a scenario needs at least one step")
        steps = [self.step(s, ("steps", i)) for i, s in enumerate(steps_raw)]
        seen: set[str] = set()
        for i, step in enumerate(steps):
            if step.id in seen:
                raise self.fail(("steps", i, "id"), f"duplicate step id '{step.id}'")
            seen.add(step.id)
        return Scenario(
            id=sid, title=self.get(data, "title", str, ()), level=level,
            duration=str(self.get(data, "duration", (str, int), ())),
            description=self.get(data, "description", str, (), required=False, default=""),
            requires=tuple(requires), backends=tuple(backends), steps=tuple(steps),
            root=self.root, unsupported=unsupported, cleanup=cleanup,
        )

    def cleanup(self, data: dict[str, Any]) -> tuple[str, ...]:
        """`cleanup: [InferenceService]`: the kinds the lab's text tells learners to delete
        when they are done (servers only: see model.CLEANUP_KINDS)."""
        from lab.kube.kinds import lookup

        raw = self.get(data, "cleanup", list, (), required=False, default=[])
        kinds = []
        for i, name in enumerate(raw):
            try:
                kind = lookup(str(name)).kind if isinstance(name, str) else None
            except LabError:
                kind = None
            if kind not in CLEANUP_KINDS:
                raise self.fail(("cleanup", i), f"'{name}' is not a kind a lab asks learners "
                                "to delete (a finished run holds nothing; a missing one "
                                "grades failed)", f"use one of: {', '.join(CLEANUP_KINDS)}")
            kinds.append(str(kind))
        return tuple(dict.fromkeys(kinds))

    def backends(self, data: dict[str, Any]) -> tuple[list[str], dict[str, str]]:
        """`backends: [local, cluster]`, or a mapping naming why one cannot run it:
        `backends: {local: true, cluster: "needs a GPU node pool"}`."""
        raw = self.get(data, "backends", (list, dict), (), required=False,
                       default=list(BACKENDS))
        items = raw.items() if isinstance(raw, dict) else ((n, True) for n in raw)
        supported, unsupported = [], {}
        for i, (name, ok) in enumerate(items):
            where = ("backends", name if isinstance(raw, dict) else i)
            if name not in BACKENDS:
                raise self.fail(where, f"unknown backend '{name}'",
                                _suggest(str(name), BACKENDS))
            if ok is True:
                supported.append(name)
            elif isinstance(ok, str) and ok.strip():
                unsupported[name] = ok.strip()
            else:
                raise self.fail(where, "give true, or the reason it cannot run there",
                                f'e.g. {name}: "needs a GPU"')
        if not supported:
            raise self.fail(("backends",), "no backend can run this scenario")
        return supported, unsupported

    def step(self, raw: Any, path: PathKey) -> Step:
        if not isinstance(raw, dict):
            raise self.fail(path, "a step must be a mapping", "give id, title, text, checks")
        self.known_keys(raw, STEP_KEYS, path)
        sid = self.get(raw, "id", str, path)
        if not SLUG.match(sid):
            raise self.fail((*path, "id"), f"'{sid}' is not a valid id",
                            "use lower-case letters, digits and '-'")
        text = self.get(raw, "text", str, path)
        text_file = user_path(self.root, text, file=self.doc.file, field=dotted((*path, "text")))
        if not is_file(text_file):
            raise self.fail((*path, "text"), f"file '{text}' not found",
                            f"create {text} in {self.root}")
        hints = self.get(raw, "hints", list, path, required=False, default=[])
        for i, hint in enumerate(hints):
            if isinstance(hint, dict) and len(hint) == 1:
                key, value = next(iter(hint.items()))
                raise self.fail((*path, "hints", i),
                                f"a hint must be text, and this one reads as a mapping "
                                f"({key!r}: ...) because of the ': ' in it",
                                f"quote it: - \"{key}: {value}\"")
            if not isinstance(hint, str):
                raise self.fail((*path, "hints", i), "a hint must be text",
                                "write it as one line of text; quote it if it holds ': '")
        solve = self.get(raw, "solve", list, path, required=False, default=[])
        checks = self.get(raw, "checks", list, path)
        if not checks:
            raise self.fail((*path, "checks"), "a step needs at least one check")
        needs = self.get(raw, "needs", list, path, required=False, default=[])
        return Step(
            id=sid, title=self.get(raw, "title", str, path), text_file=text_file,
            hints=tuple(hints),
            solve=tuple(self.action(a, (*path, "solve", i)) for i, a in enumerate(solve)),
            checks=tuple(self.check(c, (*path, "checks", i)) for i, c in enumerate(checks)),
            needs=tuple(self.need(c, (*path, "needs", i)) for i, c in enumerate(needs)),
        )

    def where(self, path: PathKey) -> str:
        return f"{self.doc.file}:{self.doc.line(path)}"

    def action(self, raw: Any, path: PathKey) -> Action:
        if not isinstance(raw, dict) or len(raw) != 1:
            raise self.fail(path, "an action is a mapping with exactly one key",
                            f"e.g. '- apply: file.yaml'; verbs: {', '.join(ACTION_TYPES)}")
        verb, args = next(iter(raw.items()))
        if verb not in ACTION_TYPES:
            raise self.fail((*path, verb), f"unknown action '{verb}'",
                            _suggest(verb, ACTION_TYPES))
        problem = ACTION_TYPES[verb].validate(args)
        if problem:
            raise self.fail((*path, verb), problem)
        if verb == "copy":  # the source ships with the scenario: it must be there now
            src = user_path(self.root, str(args["from"]), file=self.doc.file,
                            field=dotted((*path, verb, "from")))
            if not is_file(src):
                raise self.fail((*path, verb, "from"), f"file '{args['from']}' not found in "
                                f"the scenario folder", f"create {args['from']} in {self.root}")
        return Action(verb, args, self.where(path))

    def param(self, name: str, value: Any, path: PathKey) -> None:
        """What every check's fields share: numbers are finite, regular expressions
        compile, and a resource kind is one kflab knows -- so a check that could never
        pass (or never end) is refused by `kflab scenario validate`, not met in class."""
        if isinstance(value, float) and not math.isfinite(value):
            raise self.fail((*path, name), f"must be a finite number, got {value}")
        if name in REGEX_FIELDS and isinstance(value, str):
            try:
                re.compile(value)
            except re.error as exc:
                raise self.fail((*path, name), f"invalid regular expression: {exc}",
                                "escape special characters with a backslash") from None
        if name == "kind" and isinstance(value, str):
            from lab.kube.kinds import KINDS, lookup

            try:
                lookup(value)
            except LabError:
                raise self.fail((*path, name), f"kflab does not read the kind '{value}'",
                                f"use one of: {', '.join(k.kind for k in KINDS)}") from None

    def need(self, raw: Any, path: PathKey) -> Check:
        """A step's precondition: a check, plus `extra` (tf, notebooks, sdk) for a need that
        kflab's extra meets, so messages give the one command that installs it."""
        need = self.check(raw, path, extra_keys={"extra"})
        if "extra" not in need.params:
            return need
        from lab.deps import extras
        from lab.scenarios.availability import imported_modules

        extra = self.get(need.params, "extra", str, path)
        known = extras()
        if known and extra not in known:
            raise self.fail((*path, "extra"), f"kflab has no extra '{extra}'",
                            _suggest(extra, known))
        if imported_modules(need) is None:
            raise self.fail((*path, "extra"), "only a need that imports modules can name an "
                            "extra", 'give it argv: [python, -c, "import a, b"], or remove extra')
        return need

    def check(self, raw: Any, path: PathKey, extra_keys: frozenset[str] | set[str] =
              frozenset()) -> Check:
        if not isinstance(raw, dict):
            raise self.fail(path, "a check must be a mapping", "start with 'type:'")
        ctype = self.get(raw, "type", str, path)
        if ctype not in CHECK_TYPES:
            raise self.fail((*path, "type"), f"unknown check type '{ctype}'",
                            _suggest(ctype, CHECK_TYPES))
        spec = CHECK_TYPES[ctype]
        self.known_keys(raw, COMMON_FIELDS | set(spec.fields) | extra_keys, path)
        message = self.get(raw, "message", str, path)
        timeout = self.get(raw, "timeout", (int, float), path, required=False,
                           default=DEFAULT_TIMEOUT)
        if not math.isfinite(timeout) or timeout < 0:
            raise self.fail((*path, "timeout"), f"must be a number of seconds >= 0, got "
                            f"{timeout}", "e.g. timeout: 60")
        params = {k: v for k, v in raw.items() if k not in COMMON_FIELDS}
        for name, fld in spec.fields.items():
            value = self.get(params, name, fld.types, path, required=fld.required)
            if value is not None and fld.choices and value not in fld.choices:
                raise self.fail((*path, name), f"'{value}' is not allowed",
                                _suggest(str(value), [str(c) for c in fld.choices]))
            self.param(name, value, path)
        if spec.validate and (problem := spec.validate(params)):
            field, _, text = problem.partition(": ")
            raise self.fail((*path, field) if text else path, text or problem)
        if ctype == "condition":
            self.lint_condition(params, path)
        title = self.get(raw, "title", str, path, required=False)
        return Check(ctype, message, float(timeout), params, self.where(path), title)

    def lint_condition(self, params: dict[str, Any], path: PathKey) -> None:
        """A condition name one letter off a kind's known condition types ('Succeded') can
        never be set by the controller: the check could never pass. A name far from all of
        them is left alone (a controller may add types this list does not hold)."""
        from lab.kube.kinds import lookup

        try:
            kind = lookup(params["kind"]).kind
        except LabError:
            return
        known = KNOWN_CONDITIONS.get(kind)
        name = params["condition"]
        if not known or name in known:
            return
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.75) or \
            [k for k in known if k.lower() == name.lower()]
        if close:
            raise self.fail((*path, "condition"),
                            f"{kind} has no condition '{name}'",
                            f"did you mean '{close[0]}'? {kind}'s conditions: "
                            f"{', '.join(known)}")


# Condition types each kind's controller sets, at the pinned tags: katib v0.19.0
# pkg/apis/controller/{experiments,trials}/v1beta1 (ExperimentConditionType,
# TrialConditionType); training-operator v1.9.0 pkg/apis/kubeflow.org/v1 common_types.go
# (JobConditionType); kserve v0.16.0 pkg/apis/serving/v1beta1 inference_service_status.go
# (the ConditionType constants, and knative's Ready).
KNOWN_CONDITIONS: dict[str, tuple[str, ...]] = {
    "Experiment": ("Created", "Running", "Restarting", "Succeeded", "Failed"),
    "Trial": ("Created", "Running", "Succeeded", "Killed", "Failed", "MetricsUnavailable",
              "EarlyStopped"),
    "PyTorchJob": ("Created", "Running", "Restarting", "Succeeded", "Suspended", "Failed"),
    "TFJob": ("Created", "Running", "Restarting", "Succeeded", "Suspended", "Failed"),
    "InferenceService": ("Ready", "PredictorReady", "TransformerReady", "ExplainerReady",
                         "IngressReady", "RoutesReady", "LatestDeploymentReady",
                         "PredictorRouteReady", "PredictorConfigurationReady", "Stopped"),
}


def load_scenario(folder: Path) -> Scenario:
    """Load and validate one scenario folder."""
    file = folder / SCENARIO_FILE
    if not is_file(file):
        raise InputError(str(file), None, "scenario file not found",
                         hint=f"a scenario folder holds {SCENARIO_FILE}, steps/ and assets/")
    return _Validator(load_file(file), folder.resolve()).scenario()


def discover() -> dict[str, Path]:
    """Scenario id -> folder, first found on the search path wins."""
    found: dict[str, Path] = {}
    for base in search_path():
        if not base.is_dir():
            continue
        for sub in sorted(base.iterdir()):
            if (sub / SCENARIO_FILE).is_file():
                found.setdefault(sub.name, sub)
    return found


def find(name: str) -> Scenario:
    """A scenario by id, or by path to its folder."""
    as_path = Path(name)
    if is_file(as_path / SCENARIO_FILE):
        return load_scenario(as_path)
    known = discover()
    if name not in known:
        raise LabError(f"no scenario named '{name}'",
                       hint=_suggest(name, known) + " (see `kflab scenario list`)")
    return load_scenario(known[name])


def load_all() -> list[Scenario]:
    return [load_scenario(p) for p in discover().values()]
