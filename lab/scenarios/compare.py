"""Comparisons used by field checks: `value OP expected`, with no eval anywhere."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any


def _num(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{value!r} is not a number")
    return float(value)


def _contains(a: Any, b: Any) -> bool:
    return a is not None and b in a


def _length(a: Any) -> int:
    return len(a) if isinstance(a, list | dict | str) else -1


OPS: dict[str, Callable[[Any, Any], bool]] = {
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    ">=": lambda a, b: _num(a) >= _num(b),
    ">": lambda a, b: _num(a) > _num(b),
    "<=": lambda a, b: _num(a) <= _num(b),
    "<": lambda a, b: _num(a) < _num(b),
    "contains": _contains,
    "matches": lambda a, b: isinstance(a, str) and re.search(str(b), a) is not None,
    "exists": lambda a, b: (a is not None) == bool(b if b is not None else True),
    "length>=": lambda a, b: _length(a) >= _num(b),
    "length==": lambda a, b: _length(a) == _num(b),
    "approx": lambda a, b: abs(_num(a) - _num(b[0])) <= _num(b[1]),
}


def compare(value: Any, op: str, expected: Any) -> bool:
    """True when `value OP expected` holds; a type mismatch is simply False."""
    try:
        return bool(OPS[op](value, expected))
    except (TypeError, ValueError, IndexError):
        return False
