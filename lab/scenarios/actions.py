"""Solve actions: what a scenario's reference solution does, step by step.

Each action is a one-key mapping in scenario.yaml (`apply: file`, `pipeline: {...}`,
`command: [argv]`, `copy: {...}`, `delete: {...}`); commands are argv lists, never a shell.
"""

from __future__ import annotations

import ast
import filecmp
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lab.backends.shapes import pipeline_run_manifest
from lab.errors import LabError
from lab.kube.manifests import apply_document, plan
from lab.scenarios import prediction
from lab.scenarios.context import Context


@dataclass(frozen=True)
class ActionType:
    validate: Callable[[Any], str | None]
    run: Callable[[Context, Any], str]


def _is_str(v: Any) -> str | None:
    return None if isinstance(v, str) and v else "give a file path"


def _apply(ctx: Context, path: str) -> str:
    """Like `kflab apply -f`: every document is validated before the first is applied."""
    names = []
    emit = getattr(ctx.backend, "emit", None)
    planned = plan(ctx.backend, [ctx.workdir / path])
    for item in planned:
        for warning in item.warnings:
            if emit is not None:
                emit({"event": "message", "text": f"Warning: {warning}"})
    for item in planned:
        obj = apply_document(ctx.backend, item.doc, item.base_dir)
        names.append(f"{obj['kind']}/{obj['metadata']['name']}")
    return "applied " + ", ".join(names)


def _valid_pipeline(v: Any) -> str | None:
    if not isinstance(v, dict) or not {"file", "name"} <= set(v):
        return "give a mapping with 'file' and 'name' (and optional 'arguments', 'function')"
    extra = set(v) - {"file", "name", "arguments", "function", "cache"}
    return f"unknown key(s): {', '.join(sorted(extra))}" if extra else None


def _pipeline(ctx: Context, v: dict[str, Any]) -> str:
    obj = pipeline_run_manifest(v["file"], v["name"], v.get("arguments"), v.get("function"),
                                cache=v.get("cache"))
    obj = ctx.backend.apply(obj, base_dir=ctx.workdir)
    return f"pipeline run {v['name']}: {obj['status']['state']}"


def _argv(v: Any) -> list[str]:
    return [str(a) for a in (v["argv"] if isinstance(v, dict) else v)]


def _valid_command(v: Any) -> str | None:
    argv = v.get("argv") if isinstance(v, dict) else v
    if not isinstance(argv, list) or not argv:
        return "give an argv list, e.g. [python, train.py] (no shell)"
    return None


def _command(ctx: Context, v: Any) -> str:
    argv = _argv(v)
    timeout = v.get("timeout", 900) if isinstance(v, dict) else 900
    proc = subprocess.run(argv, cwd=ctx.workdir, env=ctx.env or None, capture_output=True,
                          text=True, timeout=timeout, check=False)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-10:])
        raise LabError(f"command {argv} exited with {proc.returncode}:\n{tail}")
    return f"ran {' '.join(argv)}"


def _valid_copy(v: Any) -> str | None:
    if not isinstance(v, dict) or set(v) != {"from", "to"}:
        return "give a mapping with 'from' (in the scenario folder) and 'to' (in the work folder)"
    return None


def backup_path(dest: Path) -> Path:
    n = 1
    while (candidate := dest.with_name(f"{dest.name}.orig{'' if n == 1 else n}")).exists():
        n += 1
    return candidate


def imported_modules(path: Path) -> set[str]:
    """The top-level names of the modules a Python file imports (absolute imports, anywhere
    in the file); nothing when it is not Python that parses."""
    try:
        tree = ast.parse(path.read_bytes(), str(path))
    except (OSError, SyntaxError, ValueError):
        return set()
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


def needed_modules(src: Path) -> list[Path]:
    """The modules beside a reference .py file that it imports, and theirs in turn: what the
    reference needs in the work folder to run as it was written (pipeline-classifiers' last
    pipeline.py imports compare_models from the reference components.py)."""
    out: list[Path] = []
    todo = [src]
    while todo:
        current = todo.pop()
        if current.suffix != ".py":
            continue
        for name in sorted(imported_modules(current)):
            found = src.parent / f"{name}.py"
            if name.isidentifier() and found.is_file() and found != src and found not in out:
                out.append(found)
                todo.append(found)
    return out


def _put(src: Path, dest: Path) -> str | None:
    """Copy a reference file into place; the learner's different file is kept aside.
    Returns what the learner's copy was kept as ('' when nothing was replaced), None when
    the work folder already holds the same bytes."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    kept = ""
    if dest.exists():
        if filecmp.cmp(src, dest, shallow=False):
            return None
        keep = backup_path(dest)
        shutil.copy2(dest, keep)
        kept = keep.name
    shutil.copy2(src, dest)
    return kept


def _copy(ctx: Context, v: dict[str, str]) -> str:
    """Put a reference file in place, and the reference modules it imports from beside it
    (a learner who did the earlier steps by hand has their own); each of the learner's
    different files is kept as NAME.orig, and the lines say which."""
    if ctx.source is None:
        raise LabError("copy needs the scenario folder")
    src, dest = ctx.source / v["from"], ctx.workdir / v["to"]
    kept = _put(src, dest)
    lines = [f"copied {v['from']} -> {v['to']}"
             + (f" (your version kept as {kept})" if kept else "")]
    for module in needed_modules(src):
        target = dest.parent / module.name
        kept = _put(module, target)
        if kept is None:
            continue
        rel = module.relative_to(ctx.source).as_posix() if module.is_relative_to(ctx.source) \
            else module.name
        lines.append(f"copied {rel} -> {target.relative_to(ctx.workdir).as_posix()}, which "
                     f"{dest.name} imports" + (f" (your version kept as {kept})" if kept else ""))
    return "\n".join(lines)


def _valid_delete(v: Any) -> str | None:
    if not isinstance(v, dict) or not {"kind", "name"} <= set(v):
        return "give a mapping with 'kind' and 'name' (and optional 'namespace')"
    return None


def _delete(ctx: Context, v: dict[str, str]) -> str:
    gone = ctx.backend.delete(v["kind"], v["name"], v.get("namespace", "default"))
    return f"deleted {v['kind']}/{v['name']}" if gone else f"{v['kind']}/{v['name']} was absent"


ACTION_TYPES: dict[str, ActionType] = {
    "apply": ActionType(_is_str, _apply),
    "pipeline": ActionType(_valid_pipeline, _pipeline),
    "command": ActionType(_valid_command, _command),
    "copy": ActionType(_valid_copy, _copy),
    "delete": ActionType(_valid_delete, _delete),
}


def register(verb: str, action_type: ActionType) -> None:
    """Add a solve action (e.g. `predict` from the serving feature)."""
    ACTION_TYPES[verb] = action_type


register("predict", ActionType(prediction.valid_action, prediction.run_action))
