"""A compiled pipeline edited by hand (or by an attacker) is refused before any task runs:
a cycle of dependentTasks (it used to "succeed" without running them), a component that
contains itself (it used to recurse until killed), task names with path characters (they
used to write executor_input.json outside the state folder), unknown components, executors
and upstream tasks, ParallelFor lists and conditions over the limits. Only the plan is
built: no process starts."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from lab.backends.local.pipelines import cel, taskproc
from lab.backends.local.pipelines import plan as planning
from lab.backends.local.pipelines.runner import load_spec
from lab.errors import InputError, LabError

PIPELINE = '''
from kfp import dsl

@dsl.component
def add(a: int, b: int) -> int:
    return a + b

@dsl.pipeline(name="demo")
def demo(n: int = 1):
    t = add(a=n, b=2)
    with dsl.If(t.output > 1):
        add(a=1, b=1)
    with dsl.ParallelFor([1, 2, 3]) as i:
        add(a=i, b=1)
'''


@pytest.fixture(scope="module")
def ir(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    taskproc.import_kfp()
    from kfp import compiler

    from lab.backends.local.pipelines.runner import load_pipeline

    folder = tmp_path_factory.mktemp("ir")
    (folder / "p.py").write_text(PIPELINE)
    compiler.Compiler().compile(load_pipeline(folder / "p.py"), str(folder / "p.yaml"))
    return yaml.safe_load((folder / "p.yaml").read_text())


def _root(d: dict[str, Any]) -> dict[str, Any]:
    return d["root"]["dag"]["tasks"]


def _task(name: str, key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    return lambda d: _root(d)[name].__setitem__(key, value)


def _rename(new: str) -> Callable[[dict[str, Any]], None]:
    def edit(d: dict[str, Any]) -> None:
        task = _root(d).pop("add")
        _root(d)[new] = task
        for other in _root(d).values():
            if "add" in other.get("dependentTasks", []):
                other["dependentTasks"] = [new]
                for p in other.get("inputs", {}).get("parameters", {}).values():
                    if "taskOutputParameter" in p:
                        p["taskOutputParameter"]["producerTask"] = new
    return edit


def _loop(raw: str) -> Callable[[dict[str, Any]], None]:
    def edit(d: dict[str, Any]) -> None:
        loop = next(t for t in _root(d).values() if "parameterIterator" in t)
        loop["parameterIterator"]["items"]["raw"] = raw
    return edit


def _condition(text: str) -> Callable[[dict[str, Any]], None]:
    def edit(d: dict[str, Any]) -> None:
        next(t for t in _root(d).values() if "triggerPolicy" in t)["triggerPolicy"][
            "condition"] = text
    return edit


def _self_loop(d: dict[str, Any]) -> None:
    name = next(n for n in d["components"] if n.startswith("comp-for-loop"))
    d["components"][name]["dag"]["tasks"]["again"] = {
        "componentRef": {"name": name}, "taskInfo": {"name": "again"}}


CASES: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "cycle": (lambda d: [t.__setitem__("dependentTasks", [n]) for n, t in
                         [("condition-1", _root(d)["add"])]], "form a cycle"),
    "self-dependency": (_task("add", "dependentTasks", ["add"]), "cycle: add -> add"),
    "unknown-upstream": (_task("add", "dependentTasks", ["ghost"]), "no task 'ghost'"),
    "unknown-component": (_task("add", "componentRef", {"name": "comp-ghost"}),
                          "no component 'comp-ghost'"),
    "unknown-executor": (lambda d: d["components"]["comp-add"].__setitem__(
        "executorLabel", "exec-ghost"), "no executor 'exec-ghost'"),
    "bogus-executor": (lambda d: d["deploymentSpec"]["executors"].__setitem__(
        "exec-add", {"bogus": {}}), "deploymentSpec.executors"),
    "dag-contains-itself": (_self_loop, "a DAG contains itself"),
    "name-dotdot": (_rename("../../../escape"), "not a plain name"),
    "name-absolute": (_rename("/tmp/escape"), "not a plain name"),
    "name-slash": (_rename("a/b"), "not a plain name"),
    "name-nul": (_rename("a\x00b"), "not a plain name"),
    "name-empty": (_rename(""), "not a plain name"),
    "name-long": (_rename("a" * 500), "not a plain name"),
    "items-huge": (_loop(json.dumps(list(range(1_001)))), "MAX_PARALLELFOR_ITEMS"),
    "items-string": (_loop('"abc"'), "not a JSON list"),
    "items-dict": (_loop('{"a": 1}'), "not a JSON list"),
    "items-broken": (_loop("[1, 2"), "invalid JSON"),
    "items-deep": (_loop("[" * 50_000 + "]" * 50_000), "MAX_DEPTH"),
    "condition-huge": (_condition("'" + "a" * 66_000 + "' == 'b'"), "MAX_CONDITION_CHARS"),
    "condition-deep": (_condition("(" * 5_000 + "true" + ")" * 5_000), "cannot read"),
    "condition-not-deep": (_condition("!" * 30_000 + "true"), "cannot read"),
    "condition-bigint": (_condition("9" * 5_000 + " > 1"), "cannot read"),
    "condition-call": (_condition("__import__('os').system('id') == 0"), "are known"),
    "condition-syntax": (_condition("int(inputs.parameter_values['x']) >"), "cannot read"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_hostile_ir_is_refused_before_the_run(ir: dict[str, Any], tmp_path: Path,
                                              case: str) -> None:
    edit, expect = CASES[case]
    doc = copy.deepcopy(ir)
    edit(doc)
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(doc))
    spec, platform = load_spec(path)
    with pytest.raises(planning.Refused) as err:
        planning.plan(spec, platform)
    assert expect in str(err.value), str(err.value)
    assert "compile the pipeline again" in (err.value.hint or "")


def test_the_untouched_ir_plans(ir: dict[str, Any], tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(ir))
    spec, platform = load_spec(tmp_path / "p.yaml")
    assert set(planning.plan(spec, platform).programs) == {"exec-add", "exec-add-2",
                                                         "exec-add-3"}


@pytest.mark.parametrize("text", ["42", "'yes'", "1 / 0 == 1", "int('x') > 1"])
def test_a_condition_that_is_no_bool_or_fails_is_a_lab_error(text: str) -> None:
    with pytest.raises(LabError, match="condition"):
        cel.evaluate(text, {})


def test_run_via_cli_names_the_file(ir: dict[str, Any], tmp_path: Path) -> None:
    """The runner turns the refusal into an InputError naming the file (exit 2)."""
    from lab.backends.local.pipelines.runner import prepare

    doc = copy.deepcopy(ir)
    _rename("../x")(doc)
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(doc))
    with pytest.raises(InputError) as err:
        prepare({"spec": {"pipeline": "p.yaml"}}, tmp_path)
    assert str(tmp_path / "p.yaml") in str(err.value)


@pytest.mark.parametrize("content", [b"", b"\xff\xfe", b"[1, 2]", b'"x"', b"null",
                                     b"[" * 100_000 + b"]" * 100_000,
                                     b'{"task_root": 5, "files": []}',
                                     b'{"task_root": "/tmp", "files": 5}',
                                     b'{"task_root": "/etc", "run_id": "r", "files": []}'])
def test_a_corrupt_cache_entry_is_a_miss_and_is_removed(tmp_path: Path, content: bytes) -> None:
    """The cache is a shortcut: a truncated, hand-edited or foreign entry is a miss (the task
    runs again), never a failed task or exit 70 (a list used to crash `kflab delete`)."""
    from lab.backends.local.pipelines.cache import Cache, referenced_runs

    cache = Cache(tmp_path, "default", "demo")
    cache.folder.mkdir(parents=True)
    entry = cache.folder / f"{'0' * 64}.json"
    entry.write_bytes(content)
    assert referenced_runs(tmp_path) == ({"r"} if b'"run_id"' in content else set())
    assert cache.get("0" * 64) is None
    assert not entry.exists()
