"""kubectl's `-o jsonpath=TEMPLATE`: text with `{.path}` expressions, `{range ...}{end}`
loops and `{"\n"}` literals, as kubectl prints them (several matches joined by spaces, maps
and lists as JSON, a missing key as nothing).

Each path is evaluated by jsonpath-ng's extended parser (filters like
`[?(@.type=="Ready")]`, slices, `[*]`); this module only reads kubectl's template syntax
around it.
"""

from __future__ import annotations

import json
import re
from typing import Any

from lab.errors import LabError

_TOKEN = re.compile(r"\{((?:[^{}\"]|\"(?:[^\"\\]|\\.)*\")*)\}")


def _tokens(template: str) -> list[tuple[str, str]]:
    """("text", s) and ("expr", s) pieces of a template."""
    out, pos = [], 0
    for m in _TOKEN.finditer(template):
        if m.start() > pos:
            out.append(("text", template[pos:m.start()]))
        out.append(("expr", m.group(1).strip()))
        pos = m.end()
    if pos < len(template):
        out.append(("text", template[pos:]))
    if any("{" in t or "}" in t for kind, t in out if kind == "text"):
        raise LabError(f"invalid jsonpath template {template!r}: unbalanced braces",
                       hint="e.g. -o jsonpath='{.items[*].metadata.name}'")
    return out


def _path(expr: str) -> Any:
    """A jsonpath-ng expression for kubectl's `.a.b`, `@.a` or `$.a`."""
    from jsonpath_ng.exceptions import JsonPathParserError
    from jsonpath_ng.ext import parse

    text = expr
    if text.startswith("@"):
        text = "$" + text[1:]
    elif text.startswith("."):
        text = "$" + text
    elif not text.startswith("$"):
        text = "$." + text
    # kubectl escapes dots inside a key (`.labels.app\.kubernetes\.io/name`): quote the key
    text = re.sub(r"\.((?:[^.\[\]\\]|\\.)*\\\.(?:[^.\[\]\\]|\\.)*)",
                  lambda m: '."' + m.group(1).replace("\\.", ".") + '"', text)
    try:
        return parse(text)
    except (JsonPathParserError, Exception) as exc:  # the parser raises several kinds
        raise LabError(f"invalid jsonpath expression {{{expr}}}: {exc}",
                       hint="e.g. {.status.conditions[?(@.type==\"Ready\")].status}") from None


def _show(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    if isinstance(value, dict | list):
        return json.dumps(value)
    return str(value)


def _render(tokens: list[tuple[str, str]], data: Any) -> str:
    out, i = [], 0
    while i < len(tokens):
        kind, text = tokens[i]
        if kind == "text":
            out.append(text)
        elif text.startswith('"'):
            try:
                out.append(json.loads(text, strict=False))
            except ValueError:
                raise LabError(f"invalid jsonpath literal {{{text}}}",
                               hint='e.g. {"\\n"}') from None
        elif text.startswith("range "):
            depth, j = 1, i + 1
            while j < len(tokens) and depth:
                if tokens[j][0] == "expr":
                    depth += tokens[j][1].startswith("range ")
                    depth -= tokens[j][1] == "end"
                j += 1
            if depth:
                raise LabError("invalid jsonpath template: {range} without {end}")
            body = tokens[i + 1:j - 1]
            for match in _path(text[len("range "):].strip()).find(data):
                out.append(_render(body, match.value))
            i = j
            continue
        elif text == "end":
            raise LabError("invalid jsonpath template: {end} without {range}")
        else:
            out.append(" ".join(_show(m.value) for m in _path(text).find(data)))
        i += 1
    return "".join(out)


def render(template: str, data: Any) -> str:
    """The template applied to `data` (an object, or a List with items)."""
    return _render(_tokens(template), data)
