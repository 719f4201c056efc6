"""JSON from a client, with its nesting depth checked before it is parsed.

Python's json module parses 500 nested lists happily, but what reads the result afterwards
recursively (YAML's dumper, a deep copy, a validator) dies on it with RecursionError: the
KFP API answered such a pipeline_spec with HTTP 500. The depth is counted on the raw text
first -- strings removed, then the running count of brackets, all in C-level loops -- so a
deep body is refused with one line before anything recursive sees it.
"""

from __future__ import annotations

import json
import re
from itertools import accumulate
from typing import Any

from lab.limits import MAX_DEPTH

# A JSON string (with its escapes): removed before brackets are counted.
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKET = re.compile(rb"[^\[\]{}]+")
_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}


class BodyTooDeep(Exception):
    """Nested deeper than the limit (a 400 with this message, never a parse attempt)."""


def depth(raw: bytes) -> int:
    """How deep the arrays and objects of a JSON text nest (0 for a scalar)."""
    brackets = _NOT_BRACKET.sub(b"", _STRING.sub(b"", raw))
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0)


def loads(raw: bytes, *, max_depth: int = MAX_DEPTH) -> Any:
    """json.loads, after refusing a text nested deeper than `max_depth`. Raises ValueError
    for what is not JSON, BodyTooDeep for what is too deep."""
    found = depth(raw)
    if found > max_depth:
        raise BodyTooDeep(f"nested {found} levels deep, over kflab's limit of {max_depth} "
                          "(MAX_DEPTH, see docs/limits.md)")
    try:
        return json.loads(raw)
    except RecursionError:  # unreachable below the limit; kept as a last guard
        raise BodyTooDeep("nested too deeply to read") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 text: {exc}") from None
