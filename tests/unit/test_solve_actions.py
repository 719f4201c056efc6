"""`kflab solve` runs a step's reference solution as written, whatever the learner did in the
steps before: it copies every reference module the step's files import, says which of the
learner's files it replaced, and keeps them aside.

The walk over every bundled scenario is static (no run): for each step, a work folder holding
only the scenario's starting assets -- a learner who did the earlier steps by hand has their
own files, not the reference ones --, the step's own copy actions run for real, then every
Python file the step runs or copied must find each name it imports from the work folder."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from lab.scenarios import actions, loader
from lab.scenarios.context import Context
from lab.scenarios.runner import copy_assets, solve_step


def _defined(path: Path) -> set[str] | None:
    """Top-level names a module defines; None when it has `import *` (cannot tell)."""
    tree = ast.parse(path.read_text(), str(path))
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            if any(alias.name == "*" for alias in node.names):
                return None
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, (ast.If, ast.Try, ast.With)):
            return None  # conditional definitions: not judged statically
    return names


def _gaps(file: Path, work: Path, scenario_root: Path) -> list[str]:
    """What `file` imports from the work folder that is not there."""
    out = []
    tree = ast.parse(file.read_text(), str(file))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            module = work / f"{node.module}.py"
            if not module.is_file():
                if list(scenario_root.rglob(f"{node.module}.py")):
                    out.append(f"{file.name}: module {node.module} is not in the work folder")
                continue
            defined = _defined(module)
            if defined is None:
                continue
            missing = [a.name for a in node.names if a.name not in defined]
            if missing:
                out.append(f"{file.name}: {', '.join(missing)} not in {module.name}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".")[0]
                if not (work / f"{top}.py").is_file() and \
                        list(scenario_root.rglob(f"{top}.py")):
                    out.append(f"{file.name}: module {top} is not in the work folder")
    return out


def _runs(step: object) -> list[str]:
    """The Python files a step's solve actions run or put in place."""
    out = []
    for action in step.solve:  # type: ignore[attr-defined]
        if action.verb == "pipeline" and str(action.args["file"]).endswith(".py"):
            out.append(action.args["file"])
        elif action.verb == "command":
            argv = action.args["argv"] if isinstance(action.args, dict) else action.args
            out += [str(a) for a in argv if str(a).endswith(".py")]
        elif action.verb == "copy" and str(action.args["to"]).endswith(".py"):
            out.append(action.args["to"])
    return out


CASES = [(s.id, step.id) for s in loader.load_all() for step in s.steps if step.solve]


@pytest.mark.parametrize(("scenario_id", "step_id"), CASES)
def test_every_solve_step_has_what_its_files_import(scenario_id: str, step_id: str,
                                                     tmp_path: Path) -> None:
    scenario = loader.find(scenario_id)
    step = next(s for s in scenario.steps if s.id == step_id)
    work = tmp_path / "work"
    copy_assets(scenario, work)
    ctx = Context(backend=None, workdir=work, source=scenario.root)  # type: ignore[arg-type]
    for action in step.solve:
        if action.verb == "copy":
            actions.ACTION_TYPES["copy"].run(ctx, action.args)
    gaps = []
    for name in _runs(step):
        if (work / name).is_file():
            gaps += _gaps(work / name, work, scenario.root)
    assert not gaps, f"{scenario_id} step {step_id}: " + "; ".join(gaps)


def test_solve_of_the_last_classifiers_step_after_step_two_by_hand(tmp_path: Path) -> None:
    """Issue 33 Why 3: the learner wrote five trainers in components.py by hand (no
    compare_models); solve copies the reference components.py the reference pipeline.py
    imports, keeps theirs aside and says so; the pipeline then compiles."""
    from lab.backends.local.pipelines import runner

    scenario = loader.find("pipeline-classifiers")
    work = tmp_path / "work"
    copy_assets(scenario, work)
    reference = (scenario.root / "solutions" / "components.py").read_text()
    theirs = reference[:reference.index("@component\ndef compare_models")]
    (work / "components.py").write_text(theirs)
    (work / "pipeline.py").write_text((scenario.root / "solutions" /
                                       "pipeline_five.py").read_text())
    step = scenario.steps[2]
    copy_only = type(step)(**{**step.__dict__, "solve": tuple(
        a for a in step.solve if a.verb == "copy")})
    done = solve_step(copy_only, Context(backend=None, workdir=work,  # type: ignore[arg-type]
                                         source=scenario.root))
    lines = "\n".join(done).splitlines()
    assert lines == [
        "copied solutions/pipeline.py -> pipeline.py (your version kept as pipeline.py.orig)",
        "copied solutions/components.py -> components.py, which pipeline.py imports "
        "(your version kept as components.py.orig)"]
    assert (work / "components.py.orig").read_text() == theirs
    assert (work / "components.py").read_text() == reference
    assert runner.load_pipeline(work / "pipeline.py").name == "classifiers"
    # solved again: the same files are not copied nor kept twice
    again = solve_step(copy_only, Context(backend=None, workdir=work,  # type: ignore[arg-type]
                                          source=scenario.root))
    assert again == ["copied solutions/pipeline.py -> pipeline.py"]
    assert not (work / "components.py.orig2").exists()
