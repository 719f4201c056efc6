"""YAML loading that remembers where every field came from.

User files (lab.yaml, scenario.yaml, manifests) must get errors that name the file, the line
and the field. We compose the node tree once and keep a side table of path -> line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from lab.errors import InputError

PathKey = tuple[str | int, ...]


@dataclass
class Located:
    """A loaded YAML document plus the 1-based line of each field path."""

    data: Any
    file: str
    lines: dict[PathKey, int] = field(default_factory=dict)

    def line(self, path: PathKey) -> int | None:
        """Line of the field, or of its nearest ancestor that has one."""
        while True:
            if path in self.lines:
                return self.lines[path]
            if not path:
                return None
            path = path[:-1]

    def error(self, path: PathKey, problem: str, hint: str | None = None) -> InputError:
        return InputError(self.file, dotted(path), problem, line=self.line(path), hint=hint)

    def relocate(self, exc: InputError) -> InputError:
        """An error raised on this document's data (e.g. by a backend validating an
        Experiment), pointed at this file and the field's line; says whose it was."""
        path = undotted(exc.field or "")
        where = f"{exc.file}: " if exc.file and exc.file != self.file else ""
        return InputError(self.file, exc.field, f"{where}{exc.problem}",
                          line=self.line(path), hint=exc.hint)


def dotted(path: PathKey) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def undotted(text: str) -> PathKey:
    """The inverse of `dotted`: 'spec.parameters[0].name' -> ('spec', 'parameters', 0, 'name')."""
    out: list[str | int] = []
    for part in re.findall(r"[^.\[\]]+|\[\d+\]", text):
        out.append(int(part[1:-1]) if part.startswith("[") else part)
    return tuple(out)


def _convert(node: yaml.Node, path: PathKey, lines: dict[PathKey, int]) -> Any:
    lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        out: dict[str, Any] = {}
        for key_node, value_node in node.value:
            key = str(_scalar(key_node))
            lines[(*path, key)] = key_node.start_mark.line + 1
            out[key] = _convert(value_node, (*path, key), lines)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_convert(item, (*path, i), lines) for i, item in enumerate(node.value)]
    return _scalar(node)


def _scalar(node: yaml.Node) -> Any:
    """A scalar node's value with YAML's usual typing (int, float, bool, null, str)."""
    if node.tag == "tag:yaml.org,2002:str":
        return node.value
    try:
        return yaml.SafeLoader("").construct_object(node, deep=True)
    except yaml.YAMLError as exc:
        raise InputError(None, None, f"invalid value: {exc}",
                         line=node.start_mark.line + 1) from None


def _compose_all(text: str, file: str) -> list[yaml.Node]:
    try:
        return [n for n in yaml.compose_all(text, Loader=yaml.SafeLoader) if n is not None]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc)
        raise InputError(file, None, f"invalid YAML: {problem}", line=line,
                         hint="check indentation and quoting around that line") from None


def load_documents(text: str, file: str = "<input>") -> list[Located]:
    """Every document of a (multi-document) YAML text, each with its line table."""
    docs = []
    for node in _compose_all(text, file):
        lines: dict[PathKey, int] = {}
        try:
            docs.append(Located(_convert(node, (), lines), file, lines))
        except InputError as exc:  # raised without the file name deep in the tree
            raise InputError(file, exc.field, exc.problem, line=exc.line) from None
    return docs


def load_file(path: Path) -> Located:
    """A single-document YAML file; an empty file is an error naming it."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise InputError(str(path), None, f"cannot read: {exc.strerror}") from None
    docs = load_documents(text, str(path))
    if len(docs) != 1:
        raise InputError(str(path), None, f"expected one YAML document, found {len(docs)}")
    return docs[0]
