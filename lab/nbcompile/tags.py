"""Read a notebook's tagged cells into a pipeline plan, without running any of it.

The tags (cell metadata `tags`, what JupyterLab's property inspector edits) follow Kale's
idea -- cells tagged with step names and dependencies become pipeline steps -- in kflab's own
small grammar (docs/notebooks.md):

  imports              code run at the start of every step
  functions            code run after the imports in every step (helpers, classes)
  pipeline-parameters  `NAME = literal` lines: the pipeline's parameters and their defaults
  step:NAME            the cell starts (or continues) step NAME
  prev:NAME            the cell's step runs after step NAME (repeatable)
  pipeline-metrics     bare variable names, one per line: logged as the run's metrics
  skip                 never part of the pipeline

An untagged code cell continues the step of the cell before it. The notebook is user input:
its size, cell count, names and code are checked (code only parsed, never run) and every
error names the cell (its number and first line) and the tag.
"""

from __future__ import annotations

import ast
import keyword
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lab import limits
from lab.errors import InputError

STEP_NAME = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
KIND_TAGS = ("imports", "functions", "pipeline-parameters", "pipeline-metrics", "skip")
RESERVED_STEPS = ("pipeline-metrics",)
METRICS_STEP = "pipeline-metrics"
# tags that look like ours but are not: caught instead of silently ignored
_NEAR = re.compile(r"^(steps?|prev(ious)?s?|block|after|depends(-on)?|imports?|functions?|"
                   r"skip|pipeline[-_][-\w]*)([-_:=\s]|$)", re.IGNORECASE)


@dataclass
class Cell:
    index: int  # 1-based, as a learner counts them
    source: str

    @property
    def first_line(self) -> str:
        line = next((ln.strip() for ln in self.source.splitlines() if ln.strip()), "")
        return line if len(line) <= 60 else line[:57] + "..."

    @property
    def where(self) -> str:
        return f"cell {self.index} ({self.first_line!r})"


@dataclass
class Step:
    name: str
    cells: list[Cell] = field(default_factory=list)
    prev: list[str] = field(default_factory=list)
    first: Cell | None = None  # where the step was declared (for errors)

    @property
    def function(self) -> str:
        """The component's Python function name (KFP names the task after it: load-data)."""
        return self.name.replace("-", "_")


@dataclass
class Plan:
    """What the notebook asks for, in notebook order."""

    source: str  # the notebook's file name, for messages and the compiled file's header
    imports: list[Cell] = field(default_factory=list)
    functions: list[Cell] = field(default_factory=list)
    parameters: dict[str, Any] = field(default_factory=dict)  # name -> default (a literal)
    steps: dict[str, Step] = field(default_factory=dict)
    metrics: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def ordered(self) -> list[Step]:
        """Steps in an order where every step follows its prev steps (notebook order kept
        where the dependencies allow)."""
        done: list[Step] = []
        seen: set[str] = set()
        pending = list(self.steps.values())
        while pending:
            ready = next(s for s in pending if all(p in seen for p in s.prev))
            pending.remove(ready)
            done.append(ready)
            seen.add(ready.name)
        return done

    def leaves(self) -> list[Step]:
        """Steps no other step runs after."""
        used = {p for s in self.steps.values() for p in s.prev}
        return [s for s in self.steps.values() if s.name not in used]


class NotebookError(InputError):
    """A problem in one cell of the notebook, naming the cell and the tag."""

    def __init__(self, file: str, cell: Cell | None, tag: str | None, problem: str,
                 hint: str) -> None:
        where = []
        if cell is not None:
            where.append(cell.where)
        if tag is not None:
            where.append(f"tag '{tag}'")
        super().__init__(file, None, f"{', '.join(where)}: {problem}" if where else problem,
                         hint=hint)


def read(path: Path) -> tuple[Any, str]:
    """The notebook, parsed and validated by nbformat (size checked before reading)."""
    import nbformat

    name = path.name
    from lab.yamlio import read_bytes

    raw = read_bytes(path, limit=limits.MAX_NOTEBOOK_BYTES, limit_name="MAX_NOTEBOOK_BYTES",
                     hint="give an .ipynb file; a big one: clear the cells' outputs (Edit > "
                          "Clear Outputs of All Cells)")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(name, None, f"cannot read: {exc}",
                         hint="give a notebook saved by Jupyter (UTF-8 JSON)") from None
    try:
        nb = nbformat.reads(text, as_version=4)
        nbformat.validate(nb)
    except Exception as exc:  # nbformat raises json, validation and reader errors
        first = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else type(exc).__name__
        raise InputError(name, None, f"not a valid Jupyter notebook: {first}",
                         hint="open and save it in JupyterLab, or check the JSON") from None
    return nb, name


def _tags(raw: Any, file: str, cell: Cell) -> list[str]:
    tags = (raw.get("metadata") or {}).get("tags") or []
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise NotebookError(file, cell, None, "metadata.tags is not a list of strings",
                            "edit the cell's tags in JupyterLab's property inspector")
    return [t.strip() for t in tags]


def _step_name(file: str, cell: Cell, tag: str, name: str) -> str:
    if not STEP_NAME.match(name) or len(name) > limits.MAX_STEP_NAME:
        raise NotebookError(
            file, cell, tag, f"{name!r} is not a valid step name (it becomes the pipeline "
            f"task's name: lower-case letters, digits and '-', starting with a letter, at "
            f"most {limits.MAX_STEP_NAME} characters)", "e.g. step:load-data")
    if keyword.iskeyword(name.replace("-", "_")) or name in RESERVED_STEPS:
        raise NotebookError(file, cell, tag, f"{name!r} is reserved",
                            "choose another step name")
    return name


def _check_code(file: str, cell: Cell, tag: str | None) -> None:
    """The cell must be Python (parsed, never run): IPython magics and shell lines are not."""
    for n, line in enumerate(cell.source.splitlines(), 1):
        if line.lstrip().startswith(("%", "!")):
            raise NotebookError(file, cell, tag, f"line {n} ({line.strip()[:40]!r}) is an "
                                "IPython magic or shell command, which a pipeline step "
                                "cannot run", "remove the line, or tag the cell 'skip'")
    try:
        ast.parse(cell.source, filename=cell.where)
    except SyntaxError as exc:
        raise NotebookError(file, cell, tag, f"line {exc.lineno}: {exc.msg}",
                            "fix the Python syntax") from None


def _parameters(file: str, cell: Cell, tag: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for node in ast.parse(cell.source).body:
        target = node.targets[0] if isinstance(node, ast.Assign) and \
            len(node.targets) == 1 else None
        if not isinstance(target, ast.Name) or not isinstance(node.value, ast.Constant) \
                or type(node.value.value) not in (int, float, str, bool):
            raise NotebookError(file, cell, tag, f"line {node.lineno}: only `NAME = literal` "
                                "(a number, a string, True/False) can be a pipeline parameter",
                                "e.g. test_size = 0.25; compute other values in a step")
        name = target.id
        if name.startswith("_"):
            raise NotebookError(file, cell, tag, f"parameter {name!r} starts with '_'",
                                "rename it (names with '_' first are kflab's own)")
        out[name] = node.value.value
    return out


def _metrics(file: str, cell: Cell, tag: str) -> list[str]:
    names = []
    for node in ast.parse(cell.source).body:
        if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Name)):
            raise NotebookError(file, cell, tag, f"line {node.lineno}: write one variable "
                                "name per line", "e.g. accuracy")
        names.append(node.value.id)
    return names


def plan(nb: Any, file: str) -> Plan:
    """The pipeline the tags describe; raises NotebookError naming the cell and the tag."""
    result = Plan(file)
    cells = nb.get("cells") or []
    if len(cells) > limits.MAX_NOTEBOOK_CELLS:
        raise InputError(file, None, limits.limit("cells", len(cells),
                                                  limits.MAX_NOTEBOOK_CELLS,
                                                  "MAX_NOTEBOOK_CELLS"),
                         hint="split the notebook")
    current: Step | None = None
    for i, raw in enumerate(cells, 1):
        if raw.get("cell_type") != "code":
            continue
        source = raw.get("source") or ""
        source = "".join(source) if isinstance(source, list) else str(source)
        cell = Cell(i, source)
        tags = _tags(raw, file, cell)
        kinds = [t for t in tags if t in KIND_TAGS or t.startswith("step:")]
        prevs = [t for t in tags if t.startswith("prev:")]
        for t in tags:
            if t not in kinds and t not in prevs and _NEAR.match(t):
                raise NotebookError(file, cell, t, "not a kflab tag",
                                    "use imports, functions, pipeline-parameters, step:NAME, "
                                    "prev:NAME, pipeline-metrics or skip (docs/notebooks.md)")
        if len(kinds) > 1:
            raise NotebookError(file, cell, kinds[1], f"the cell already has tag '{kinds[0]}'",
                                "give a cell one of imports, functions, pipeline-parameters, "
                                "step:NAME, pipeline-metrics, skip")
        kind = kinds[0] if kinds else None
        if prevs and not (kind or "").startswith("step:"):
            raise NotebookError(file, cell, prevs[0], "prev: needs a step: tag on the same "
                                "cell", "add step:NAME to this cell")
        if kind == "skip" or (kind is None and not source.strip()):
            continue
        _check_code(file, cell, kind)
        if kind == "imports":
            result.imports.append(cell)
        elif kind == "functions":
            result.functions.append(cell)
        elif kind == "pipeline-parameters":
            for name, value in _parameters(file, cell, kind).items():
                result.parameters[name] = value
        elif kind == "pipeline-metrics":
            result.metrics += _metrics(file, cell, kind)
        elif kind is not None:  # step:NAME
            name = _step_name(file, cell, kind, kind.split(":", 1)[1].strip())
            current = result.steps.get(name)
            if current is None:
                if len(result.steps) >= limits.MAX_PIPELINE_STEPS:
                    raise NotebookError(file, cell, kind, limits.limit(
                        "steps", len(result.steps) + 1, limits.MAX_PIPELINE_STEPS,
                        "MAX_PIPELINE_STEPS"), "merge small steps")
                current = result.steps[name] = Step(name, first=cell)
            for tag in prevs:
                prev = tag.split(":", 1)[1].strip()
                if prev == name:
                    raise NotebookError(file, cell, tag, "a step cannot run after itself",
                                        "remove the tag")
                if prev not in current.prev:
                    current.prev.append(prev)
            current.cells.append(cell)
        elif current is None:
            raise NotebookError(file, cell, None, "an untagged code cell before any step",
                                "tag it imports, functions or step:NAME, or skip")
        else:
            current.cells.append(cell)  # an untagged cell continues the step above
        if current is not None and sum(len(c.source) for c in current.cells) > \
                limits.MAX_STEP_CODE_BYTES:
            raise NotebookError(file, cell, None, limits.limit(
                f"code of step {current.name} (bytes)", sum(len(c.source) for c in
                                                            current.cells),
                limits.MAX_STEP_CODE_BYTES, "MAX_STEP_CODE_BYTES"), "split the step")
    _check_graph(result)
    return result


def _check_graph(result: Plan) -> None:
    file = result.source
    if not result.steps:
        raise InputError(file, None, "no cell is tagged step:NAME, so there is no pipeline",
                         hint="tag the cells of each step, e.g. step:load-data, then "
                              "step:train with prev:load-data (docs/notebooks.md)")
    for step in result.steps.values():
        for prev in step.prev:
            if prev not in result.steps:
                raise NotebookError(file, step.first, f"prev:{prev}",
                                    f"no step named {prev!r}",
                                    f"the steps are: {', '.join(result.steps)}")
    state: dict[str, int] = {}

    def visit(name: str, trail: list[str]) -> None:
        if state.get(name) == 2:
            return
        if state.get(name) == 1:
            loop = [*trail[trail.index(name):], name]
            step = result.steps[trail[-1]]
            raise NotebookError(file, step.first, f"prev:{name}",
                                f"the steps run in a circle: {' -> '.join(reversed(loop))}",
                                "remove one of the prev: tags")
        state[name] = 1
        for prev in result.steps[name].prev:
            visit(prev, [*trail, name])
        state[name] = 2

    for name in result.steps:
        visit(name, [])
    clash = [n for n in result.parameters if n in result.metrics]
    if clash:
        raise InputError(file, None, f"{clash[0]!r} is both a parameter and a metric",
                         hint="log a computed variable as the metric")
