"""The CEL conditions the kfp compiler writes for dsl.If / dsl.Elif / dsl.Else.

kfp's compiler (kfp/compiler/compiler_utils.py, pinned 2.17.3) writes a task's
`trigger_policy.condition` as CEL over the task's own inputs:
`inputs.parameter_values['pipelinechannel--flip-coin-Output'] == 'heads'`, numbers cast with
`int(...)` / `double(...)`, Elif/Else as `!(a) && b`. The KFP driver evaluates it with a CEL
library; here the same small grammar is translated to a Python expression whose syntax tree
is checked node by node (literals, comparisons, and/or/not, the casts) before it is
evaluated: no name, attribute or call outside that list can run.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from lab.errors import LabError

_INPUT = re.compile(r"inputs\.parameter_values\[\s*(['\"])(.*?)\1\s*\]")
_ALLOWED = (ast.Expression, ast.BoolOp, ast.And, ast.Or, ast.UnaryOp, ast.Not, ast.USub,
            ast.UAdd, ast.Compare, ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE,
            ast.In, ast.NotIn, ast.Constant, ast.Call, ast.Name, ast.Load, ast.List,
            ast.Tuple, ast.Subscript)
_FUNCS = {"int": int, "double": float, "string": str, "bool": bool}


def _translate(expr: str, values: list[Any]) -> str:
    def sub(m: re.Match[str]) -> str:
        values.append(m.group(2))
        return f"_v[{len(values) - 1}]"

    out = _INPUT.sub(sub, expr)
    out = out.replace("&&", " and ").replace("||", " or ")
    out = re.sub(r"!(?!=)", " not ", out)
    return re.sub(r"\b(true|false|null)\b",
                  lambda m: {"true": "True", "false": "False", "null": "None"}[m.group(1)],
                  out)


def check(expr: str) -> tuple[Any, list[str]]:
    """The condition's checked syntax tree and the inputs it reads; LabError for anything
    outside the grammar (said before the run: plan() calls it for every condition)."""
    from lab import limits

    if len(expr) > limits.MAX_CONDITION_CHARS:
        raise LabError(limits.limit("a condition of", f"{len(expr)} characters",
                                    limits.MAX_CONDITION_CHARS, "MAX_CONDITION_CHARS"))
    names: list[Any] = []
    text = _translate(expr, names)
    short = expr if len(expr) <= 80 else expr[:77] + "..."
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise LabError(f"cannot read the condition {short!r}: {exc.msg}") from None
    except (RecursionError, MemoryError, ValueError) as exc:  # nesting; 4300+ digit ints
        raise LabError(f"cannot read the condition {short!r}: "
                       f"{'nested too deeply' if not isinstance(exc, ValueError) else exc}"
                       ) from None
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED):
            raise LabError(f"condition {short!r}: {type(node).__name__} is not supported")
        if isinstance(node, ast.Name) and node.id not in (*_FUNCS, "_v", "True", "False",
                                                           "None"):
            raise LabError(f"condition {short!r}: unknown name {node.id}")
        if isinstance(node, ast.Call) and not (isinstance(node.func, ast.Name)
                                               and node.func.id in _FUNCS):
            raise LabError(f"condition {short!r}: only int(), double(), string() are known")
        if isinstance(node, ast.Subscript) and not (isinstance(node.value, ast.Name)
                                                    and node.value.id == "_v"):
            raise LabError(f"condition {short!r}: indexing is not supported")
    return tree, names


def evaluate(expr: str, inputs: dict[str, Any]) -> bool:
    """The condition's value given the task's resolved inputs (a CEL condition must be a
    bool: the driver fails the task otherwise)."""
    tree, names = check(expr)
    short = expr if len(expr) <= 80 else expr[:77] + "..."
    missing = [n for n in names if n not in inputs]
    if missing:
        raise LabError(f"condition {short!r}: no input {', '.join(missing)}")
    values = [inputs[n] for n in names]
    try:
        out = eval(compile(tree, "<condition>", "eval"),  # noqa: S307 - checked tree
                   {"__builtins__": {}, **_FUNCS, "_v": values})
    except (ArithmeticError, TypeError, ValueError, RecursionError) as exc:
        raise LabError(f"condition {short!r}: {type(exc).__name__}: {exc}") from None
    if not isinstance(out, bool):
        raise LabError(f"condition {short!r} is {type(out).__name__} {out!r}, not a bool")
    return out
