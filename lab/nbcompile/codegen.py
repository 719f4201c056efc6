"""Write a plan (tags.py) as a KFP pipeline file that `kflab pipeline run` runs anywhere.

Each step becomes a lightweight component (KFP runs it in its own process, on a cluster its
own pod). A step runs the notebook's `imports` and `functions` cells, takes the variables
its prev steps left (their `state` artifacts: a pickle of every plain variable), sets the
pipeline parameters, runs its own cells and leaves its variables for the steps after it. The
cells' code is embedded as string literals (repr, so no cell can break out of its literal)
and compiled with the cell's number as its file name: a traceback names the cell. Nothing in
the notebook runs when the pipeline file is compiled or loaded; only when a step runs.
"""

from __future__ import annotations

from lab.nbcompile.tags import METRICS_STEP, Cell, Plan, Step

HEADER = '''"""Pipeline compiled from {source} by `kflab notebook compile` (compile again instead of
editing: the cells' code is below as text, each step runs it in its own process).

Run it with: kflab pipeline run {target} --name NAME
"""

from kfp import dsl
from kfp.dsl import Artifact, Input, Metrics, Output

_component = dsl.component(base_image={image!r}, packages_to_install={packages!r})
'''

# Executed inside every step (a KFP component is its function's source alone, so this is
# repeated in each one rather than imported).
LOAD = '''    import pickle as _kflab_pickle
    import types as _kflab_types

    _kflab_ns = {{"__name__": "__main__"}}

    def _kflab_run(_where, _code):
        exec(compile(_code, _where, "exec"), _kflab_ns)  # the notebook's own code

    for _kflab_where, _kflab_code in _KFLAB_PRELUDE:
        _kflab_run(_kflab_where, _kflab_code)
    for _kflab_input in ({inputs}):
        with open(_kflab_input.path, "rb") as _kflab_fh:
            _kflab_ns.update(_kflab_pickle.load(_kflab_fh))
    _kflab_ns.update({params})
'''

SAVE = '''    _kflab_keep = {}
    for _kflab_name, _kflab_value in list(_kflab_ns.items()):
        if _kflab_name.startswith("_") or isinstance(_kflab_value, (
                _kflab_types.ModuleType, _kflab_types.FunctionType, type)):
            continue
        try:
            _kflab_pickle.dumps(_kflab_value)
        except Exception as _kflab_exc:  # e.g. an open file: the next steps will not see it
            print(f"kflab: not passed to the next steps: {_kflab_name} ({_kflab_exc})")
            continue
        _kflab_keep[_kflab_name] = _kflab_value
    with open(state.path, "wb") as _kflab_fh:
        _kflab_pickle.dump(_kflab_keep, _kflab_fh)
'''

METRICS = '''    for _kflab_name in {names!r}:
        if _kflab_name not in _kflab_ns:
            raise SystemExit(f"pipeline-metrics: no step defined {{_kflab_name!r}}")
        try:
            _kflab_value = float(_kflab_ns[_kflab_name])
        except (TypeError, ValueError):
            raise SystemExit(f"pipeline-metrics: {{_kflab_name}} is not a number: "
                             f"{{_kflab_ns[_kflab_name]!r}}") from None
        metrics.log_metric(_kflab_name, _kflab_value)
        print(f"metric {{_kflab_name}} = {{_kflab_value}}")
'''


def literal(text: str, indent: str) -> str:
    """A string literal of `text`, one source line per line of text (repr: always valid)."""
    lines = text.splitlines(keepends=True) or [""]
    if len(lines) == 1:
        return repr(lines[0])
    return "(\n" + "".join(f"{indent}    {line!r}\n" for line in lines) + f"{indent})"


def _code_list(file: str, label: str, cells: list[Cell]) -> str:
    items = [f"        ({f'<{file} cell {c.index} ({label})>'!r},\n"
             f"         {literal(c.source, '         ')}),\n" for c in cells]
    return "[\n" + "".join(items) + "    ]"


def _cells(cells: list[Cell]) -> str:
    numbers = ", ".join(str(c.index) for c in cells)
    return f"cell {numbers}" if len(cells) == 1 else f"cells {numbers}"


def _signature(plan: Plan, inputs: list[str], outputs: list[str]) -> str:
    params = [f"{name}: {type(value).__name__}" for name, value in plan.parameters.items()]
    ins = [f"after_{name.replace('-', '_')}: Input[Artifact]" for name in inputs]
    return ", ".join([*params, *ins, *outputs])


def _body(plan: Plan, inputs: list[str]) -> str:
    names = [f"after_{n.replace('-', '_')}" for n in inputs]
    return LOAD.format(inputs="".join(f"{n}, " for n in names),
                       params=", ".join(f"{k}={k}" for k in plan.parameters))


def step_source(plan: Plan, step: Step) -> str:
    prelude = [*((c, "imports") for c in plan.imports),
               *((c, "functions") for c in plan.functions)]
    sig = _signature(plan, step.prev, ["state: Output[Artifact]"])
    out = [f"\n\n@_component\ndef {step.function}({sig}) -> None:\n",
           f'    """Step {step.name}: {_cells(step.cells)} of {plan.source}."""\n',
           "    _KFLAB_PRELUDE = [\n"]
    for cell, label in prelude:
        out.append(f"        ({f'<{plan.source} cell {cell.index} ({label})>'!r},\n"
                   f"         {literal(cell.source, '         ')}),\n")
    out.append("    ]\n")
    out.append(f"    _KFLAB_CELLS = {_code_list(plan.source, f'step {step.name}', step.cells)}\n")
    out.append(_body(plan, step.prev))
    out.append("    for _kflab_where, _kflab_code in _KFLAB_CELLS:\n"
               "        _kflab_run(_kflab_where, _kflab_code)\n")
    out.append(SAVE)
    return "".join(out)


def metrics_source(plan: Plan) -> str:
    leaves = [s.name for s in plan.leaves()]
    sig = _signature(plan, leaves, ["metrics: Output[Metrics]"])
    return (f"\n\n@_component\ndef pipeline_metrics({sig}) -> None:\n"
            f'    """The variables the pipeline-metrics cell names, as the run\'s metrics."""\n'
            "    _KFLAB_PRELUDE = []\n" + _body(plan, leaves) +
            METRICS.format(names=list(plan.metrics)))


def pipeline_source(plan: Plan, name: str) -> str:
    params = ", ".join(f"{k}: {type(v).__name__} = {v!r}" for k, v in plan.parameters.items())
    args = [f"{k}={k}" for k in plan.parameters]
    description = f"Compiled from {plan.source} by kflab notebook compile"
    out = [f"\n\n@dsl.pipeline(name={name!r},\n"
           f"              description={description!r})\n"
           f"def notebook_pipeline({params}):\n"]
    for step in plan.ordered():
        call = [*args, *(f"after_{p.replace('-', '_')}={p.replace('-', '_')}_task"
                         f'.outputs["state"]' for p in step.prev)]
        out.append(f"    {step.function}_task = {step.function}({', '.join(call)})\n")
    if plan.metrics:
        call = [*args, *(f"after_{s.function}={s.function}_task.outputs[\"state\"]"
                         for s in plan.leaves())]
        out.append(f"    pipeline_metrics({', '.join(call)})\n")
    return "".join(out)


def render(plan: Plan, *, name: str, target: str, image: str, packages: list[str]) -> str:
    """The pipeline file's text."""
    parts = [HEADER.format(source=plan.source, target=target, image=image,
                           packages=list(packages))]
    parts += [step_source(plan, step) for step in plan.ordered()]
    if plan.metrics:
        parts.append(metrics_source(plan))
    parts.append(pipeline_source(plan, name))
    return "".join(parts)


__all__ = ["METRICS_STEP", "render"]
