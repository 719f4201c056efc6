"""The one loader for every file a user gives kflab, safe against hostile input.

Manifests, scenario.yaml, lab.yaml, kubeconfigs, prediction bodies, rosters, hand-in records,
journals and grade files all come through here (`read_bytes`, `read_text`, `read_json`), and
every error names the file, the line and the field. What it guarantees:
- size: a file is opened without blocking and must be a regular file (a FIFO, /dev/zero or
  a folder is refused before a byte is read); one over its limit (`limits.MAX_FILE_BYTES`
  unless the caller names another) is refused by its size, and never more than the limit
  plus one byte is read;
- encoding: UTF-8 only (a BOM is dropped); other bytes are reported with their byte offset;
- aliases: never copied while reading. Each node's expanded size and height are computed
  once, when it closes, so a "billion laughs" file is refused after reading its few hundred
  bytes, before any expansion costs memory (`limits.MAX_NODES`, counted over the file);
- depth: nesting beyond `limits.MAX_DEPTH`, aliases included, is refused;
- plain data only: timestamps stay text (as kubectl keeps them, so `2024-13-45` is just a
  string), explicit tags (!!binary, !!python/..., custom) are refused, integers must fit in
  64 bits, mapping keys must be scalars;
- empty documents (`---` alone, or `null`) are skipped, as kubectl skips them;
- merge keys (`<<: *base`) are honoured: the mapping's own keys win, then earlier sources;
- duplicate keys: the later value wins, as the API server decodes them, and each is recorded
  in `Located.duplicates`; `duplicates="error"` (kflab's own files) refuses them instead,
  manifests report them as kubectl does (a warning, or an error with --validate=strict).
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from lab import limits
from lab.errors import InputError

PathKey = tuple[str | int, ...]
Duplicates = Literal["error", "keep"]

_Y = "tag:yaml.org,2002:"
STR, INT, FLOAT, BOOL, NULL = (f"{_Y}{t}" for t in ("str", "int", "float", "bool", "null"))
TIMESTAMP, MERGE, MAP, SEQ = (f"{_Y}{t}" for t in ("timestamp", "merge", "map", "seq"))
_PLAIN = {STR, INT, FLOAT, BOOL, NULL}
_SIZE_HINT = "see docs/limits.md"


@dataclass
class Located:
    """A loaded YAML document plus the 1-based line of each field path."""

    data: Any
    file: str
    lines: dict[PathKey, int] = field(default_factory=dict)
    # (path of the key, line of the later occurrence) for each key given twice
    duplicates: list[tuple[PathKey, int]] = field(default_factory=list)

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


# --- bytes -> text ---------------------------------------------------------------------------

def decode(raw: bytes, file: str, *, limit: int = limits.MAX_FILE_BYTES,
           limit_name: str | None = None) -> str:
    """UTF-8 text of a user file, refusing oversize files and naming the first bad byte."""
    if len(raw) > limit:
        raise InputError(file, None, limits.limit("file size (bytes)", f"{len(raw)}+", limit,
                                                  limit_name or _limit_name(limit)),
                         hint="is this the right file?")
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise InputError(file, None, f"not UTF-8 text: byte 0x{raw[exc.start]:02x} at byte "
                                     f"offset {exc.start}", line=line,
                         hint="save the file as UTF-8 (kflab reads YAML and JSON as UTF-8)") \
            from None


def read_bytes(path: Path, *, limit: int = limits.MAX_FILE_BYTES,
               limit_name: str | None = None, hint: str = "check the path") -> bytes:
    """The bytes of a file a user gave kflab, capped before they are read: the file is
    opened without blocking, must be a regular file (never a FIFO, a device such as
    /dev/zero, a socket or a folder), is refused when fstat says it is bigger than `limit`,
    and at most `limit + 1` bytes are read (it may grow while read)."""
    name = limit_name or _limit_name(limit)
    where = str(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise InputError(where, None, f"cannot read: {exc.strerror or exc}",
                         hint=hint) from None
    except ValueError:  # a NUL byte in the path
        raise InputError(repr(where), None, "not a valid path", hint=hint) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise InputError(where, None, f"not a regular file ({_file_type(info.st_mode)}): "
                                          "kflab reads files only", hint=hint)
        if info.st_size > limit:
            raise InputError(where, None, limits.limit("file size (bytes)", info.st_size,
                                                       limit, name),
                             hint="is this the right file?")
        chunks, left = [], limit + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1024 * 1024))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as exc:
        raise InputError(where, None, f"cannot read: {exc.strerror or exc}",
                         hint=hint) from None
    finally:
        os.close(fd)
    raw = b"".join(chunks)
    if len(raw) > limit:
        raise InputError(where, None, limits.limit("file size (bytes)", f"{len(raw)}+", limit,
                                                   name), hint="is this the right file?")
    return raw


def _limit_name(limit: int) -> str:
    for name in dir(limits):
        if name.startswith("MAX_") and name.endswith("_BYTES") and getattr(limits, name) == limit:
            return name
    return "MAX_FILE_BYTES"


def _file_type(mode: int) -> str:
    for test, what in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISDIR, "a folder")):
        if test(mode):
            return what
    return "not a regular file"


def read_text(path: Path, *, limit: int = limits.MAX_FILE_BYTES,
              hint: str = "check the path", limit_name: str | None = None) -> str:
    """A user file as UTF-8 text: capped and checked as `read_bytes` does."""
    raw = read_bytes(path, limit=limit, limit_name=limit_name, hint=hint)
    return decode(raw, str(path), limit=limit, limit_name=limit_name)


def read_json(path: Path, *, limit: int = limits.MAX_FILE_BYTES,
              hint: str = "check the path", limit_name: str | None = None) -> Any:
    """A user's JSON file: capped (`read_bytes`), UTF-8, and bounded in depth (`load_json`)."""
    return load_json(read_text(path, limit=limit, hint=hint, limit_name=limit_name),
                     str(path))


def user_path(base: Path, raw: str, *, file: str | None, field: str) -> Path:
    """A path named inside a user file (storageUri, spec.pipeline...), resolved against the
    file's folder; a path the OS cannot even look up is an InputError, not a traceback."""
    try:
        path = Path(raw).expanduser()
        return (path if path.is_absolute() else base / path).resolve()
    except (OSError, ValueError, RuntimeError) as exc:  # NUL byte, ~nouser, too long...
        raise InputError(file, field, f"'{_short(raw)}' is not a usable path ({exc})",
                         hint="give a plain relative or absolute path") from None


def exists(path: Path) -> bool:
    """Path.exists() that says False for names the OS refuses (too long, NUL byte)."""
    try:
        return path.exists()
    except (OSError, ValueError):
        return False


def is_file(path: Path) -> bool:
    """Path.is_file() that says False for names the OS refuses (too long, NUL byte)."""
    try:
        return path.is_file()
    except (OSError, ValueError):
        return False


# --- text -> nodes: a composer that counts instead of copying --------------------------------

class _Node:
    """A YAML node: kind 'scalar' | 'seq' | 'map'; aliases are the same _Node object."""

    __slots__ = ("height", "kind", "line", "open", "size", "tag", "value")

    def __init__(self, kind: str, tag: str, value: Any, line: int) -> None:
        self.kind, self.tag, self.value, self.line = kind, tag, value, line
        self.size, self.height, self.open = 1, 1, kind != "scalar"


def _events(text: str) -> Iterator[Any]:
    """Parser events; libyaml's parser when PyYAML has it (the same events, 10x faster)."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)(text)
    try:
        while True:
            event = loader.get_event()
            yield event
            if isinstance(event, yaml.StreamEndEvent):
                return
    finally:
        loader.dispose()


class _Composer:
    def __init__(self, file: str) -> None:
        self.file = file
        self.resolver = yaml.resolver.Resolver()
        self.composed = 0   # nodes built for the whole file (bounds memory while reading)
        self.expanded = 0   # nodes the documents hold once aliases are expanded

    def fail(self, stack: list[list[Any]], line: int, problem: str,
             hint: str | None = _SIZE_HINT) -> InputError:
        path = _frame_path(stack)
        if len(path) > 8:  # a depth error's path is as long as the limit: show its ends
            path = [*path[:4], "...", *path[-3:]]
        return InputError(self.file, dotted(tuple(path)) or None, problem, line=line,
                          hint=hint)

    def documents(self, text: str) -> list[_Node]:
        docs: list[_Node] = []
        anchors: dict[str, _Node] = {}
        stack: list[list[Any]] = []  # [node, key of the value being read (maps), path key]
        root: _Node | None = None
        resolved: dict[tuple[str, Any], str] = {}  # plain scalars repeat: resolve each once
        try:
            for ev in _events(text):
                kind = type(ev)
                if kind is yaml.ScalarEvent:  # the most frequent event first
                    tag = ev.tag
                    if tag is None or tag == "!":
                        key = (ev.value, ev.implicit)
                        tag = resolved.get(key)
                        if tag is None:
                            tag = resolved[key] = self.resolver.resolve(
                                yaml.ScalarNode, ev.value, ev.implicit)
                    node = self._new(stack, "scalar", tag, ev.value, ev, anchors)
                    root = self._add(stack, node, root)
                elif kind is yaml.SequenceStartEvent or kind is yaml.MappingStartEvent:
                    shape = "seq" if kind is yaml.SequenceStartEvent else "map"
                    if len(stack) + 1 > limits.MAX_DEPTH:
                        raise self.fail(stack, ev.start_mark.line + 1, limits.limit(
                            "nesting depth", len(stack) + 1, limits.MAX_DEPTH, "MAX_DEPTH"))
                    tag = ev.tag if ev.tag not in (None, "!") else (SEQ if shape == "seq"
                                                                     else MAP)
                    node = self._new(stack, shape, tag, [], ev, anchors)
                    stack.append([node, None, _next_key(stack)])
                elif kind is yaml.SequenceEndEvent or kind is yaml.MappingEndEvent:
                    frame = stack.pop()
                    node = frame[0]
                    node.open = False
                    if node.size > limits.MAX_NODES:
                        raise self.fail([*stack, frame], node.line, limits.limit(
                            "values under this field (aliases expanded)", node.size,
                            limits.MAX_NODES, "MAX_NODES"))
                    root = self._add(stack, node, root)
                elif kind is yaml.AliasEvent:
                    line = ev.start_mark.line + 1
                    target = anchors.get(ev.anchor)
                    if target is None:
                        raise self.fail(stack, line, f"unknown alias '*{ev.anchor}'",
                                        "define the anchor (&name) before using it")
                    if target.open:
                        raise self.fail(stack, line, f"alias '*{ev.anchor}' is inside its own "
                                                     "anchor (a recursive structure)",
                                        "YAML data for kflab must be a tree")
                    if len(stack) + target.height > limits.MAX_DEPTH:
                        raise self.fail(stack, line, limits.limit(
                            "nesting depth (aliases expanded)", len(stack) + target.height,
                            limits.MAX_DEPTH, "MAX_DEPTH"))
                    root = self._add(stack, target, root)
                elif kind is yaml.DocumentStartEvent:
                    anchors, stack, root = {}, [], None
                elif kind is yaml.DocumentEndEvent and root is not None:
                    self.expanded += root.size
                    if self.expanded > limits.MAX_NODES:
                        raise self.fail([], ev.start_mark.line + 1, limits.limit(
                            "values in the file (aliases expanded)", self.expanded,
                            limits.MAX_NODES, "MAX_NODES"))
                    docs.append(root)
        except yaml.YAMLError as exc:
            raise _syntax_error(exc, text, self.file) from None
        return docs

    def _new(self, stack: list[list[Any]], kind: str, tag: str, value: Any, ev: Any,
             anchors: dict[str, _Node]) -> _Node:
        self.composed += 1
        line = ev.start_mark.line + 1
        if self.composed > limits.MAX_NODES:
            raise self.fail(stack, line, limits.limit("values in the file", self.composed,
                                                      limits.MAX_NODES, "MAX_NODES"))
        node = _Node(kind, tag, value, line)
        if ev.anchor is not None:
            anchors[ev.anchor] = node
        return node

    @staticmethod
    def _add(stack: list[list[Any]], node: _Node, root: _Node | None) -> _Node | None:
        """Attach `node` to the open collection, adding its expanded size and height (an
        alias adds its target's: counted, never copied)."""
        if not stack:
            return node
        frame = stack[-1]
        parent = frame[0]
        parent.size += node.size
        if node.height >= parent.height:
            parent.height = node.height + 1
        if parent.kind == "seq":
            parent.value.append(node)
        elif frame[1] is None:
            frame[1] = node
        else:
            parent.value.append((frame[1], node))
            frame[1] = None
        return root


def _next_key(stack: list[list[Any]]) -> str | int | None:
    """The path part of the node about to be added (for error messages only)."""
    if not stack:
        return None
    parent, key = stack[-1][0], stack[-1][1]
    if parent.kind == "seq":
        return len(parent.value)
    return str(key.value) if key is not None and key.kind == "scalar" else None


def _frame_path(stack: list[list[Any]]) -> list[str | int]:
    return [f[2] for f in stack if f[2] is not None]


def _syntax_error(exc: yaml.YAMLError, text: str, file: str) -> InputError:
    mark = getattr(exc, "problem_mark", None)
    if mark is not None:
        line: int | None = mark.line + 1
    elif isinstance(getattr(exc, "position", None), int):  # a reader error (bad character)
        line = text.count("\n", 0, exc.position) + 1  # type: ignore[attr-defined]
    else:
        line = None
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    context = getattr(exc, "context", None)
    if context and problem:
        problem = f"{context}, {problem}"
    return InputError(file, None, f"invalid YAML: {problem}", line=line,
                      hint="check indentation and quoting around that line")


# --- nodes -> data ---------------------------------------------------------------------------

_CONSTRUCT = yaml.constructor.SafeConstructor()


class _Builder:
    """Plain data from the node tree; each alias use is a fresh copy (bounded: counted)."""

    def __init__(self, file: str, lines: dict[PathKey, int],
                 dups: list[tuple[PathKey, int]]) -> None:
        self.file, self.lines, self.dups = file, lines, dups

    def fail(self, path: PathKey, line: int, problem: str, hint: str | None = None) -> InputError:
        return InputError(self.file, dotted(path) or None, problem, line=line, hint=hint)

    def value(self, node: _Node, path: PathKey) -> Any:
        self.lines.setdefault(path, node.line)
        if node.kind == "map":
            if node.tag != MAP:
                raise self._bad_tag(node, path)
            return {key: self.value(vnode, (*path, key))
                    for key, _, vnode in self.entries(node, path, record=True)}
        if node.kind == "seq":
            if node.tag != SEQ:
                raise self._bad_tag(node, path)
            return [self.value(item, (*path, i)) for i, item in enumerate(node.value)]
        return self.scalar(node, path)

    def entries(self, node: _Node, path: PathKey,
                record: bool) -> list[tuple[str, int, _Node]]:
        """(key, line, value node) in order; own keys beat merged ones, the later own key
        beats the earlier (recorded as a duplicate), the earlier merge source beats later."""
        chosen: dict[str, tuple[int, _Node, bool]] = {}
        for knode, vnode in node.value:
            if knode.kind == "scalar" and knode.tag == MERGE:
                for key, line, merged in self._merged(vnode, path):
                    chosen.setdefault(key, (line, merged, False))
                continue
            key = self.key(knode, path)
            if key in chosen and chosen[key][2] and record:
                self.dups.append(((*path, key), knode.line))
            chosen[key] = (knode.line, vnode, True)
            if record:
                self.lines[(*path, key)] = knode.line
        for key, (line, _, explicit) in chosen.items():
            if record and not explicit:
                self.lines.setdefault((*path, key), line)
        return [(key, line, vnode) for key, (line, vnode, _) in chosen.items()]

    def _merged(self, vnode: _Node, path: PathKey) -> list[tuple[str, int, _Node]]:
        sources = vnode.value if vnode.kind == "seq" else [vnode]
        out: list[tuple[str, int, _Node]] = []
        for src in sources:
            if src.kind != "map":
                raise self.fail(path, vnode.line, "a merge key (<<) takes a mapping or a list "
                                                  "of mappings", "e.g. <<: *defaults")
            out.extend(self.entries(src, path, record=False))
        return out

    def key(self, node: _Node, path: PathKey) -> str:
        if node.kind != "scalar":
            raise self.fail(path, node.line, "a mapping key must be a plain value, not a "
                                             f"{'list' if node.kind == 'seq' else 'mapping'}",
                            "write keys as text")
        value = self.scalar(node, path)
        if value is None:
            return "null"
        if isinstance(value, bool):
            return "true" if value else "false"
        return node.value if isinstance(value, float) else str(value)

    def scalar(self, node: _Node, path: PathKey) -> Any:
        tag, text = node.tag, node.value
        if tag in (STR, TIMESTAMP):  # timestamps stay text, as the API server keeps them
            return text
        if tag not in _PLAIN:
            raise self._bad_tag(node, path)
        ynode = yaml.ScalarNode(tag, text)
        if tag == NULL:
            return None
        if tag == BOOL:
            return _CONSTRUCT.construct_yaml_bool(ynode)
        try:
            value = (_CONSTRUCT.construct_yaml_int(ynode) if tag == INT
                     else _CONSTRUCT.construct_yaml_float(ynode))
        except ValueError:  # e.g. `!!int abc`, or more digits than Python converts
            raise self.fail(path, node.line, f"'{_short(text)}' is not a valid "
                                             f"{'integer' if tag == INT else 'number'}",
                            "quote it if it is text") from None
        if tag == INT and abs(value) > limits.INT64_MAX:
            raise self.fail(path, node.line, f"integer {_short(text)} does not fit in 64 bits",
                            "Kubernetes numbers are 64-bit at most; quote it if it is text")
        return value

    def _bad_tag(self, node: _Node, path: PathKey) -> InputError:
        return self.fail(path, node.line, f"YAML tag '{node.tag.replace(_Y, '!!')}' is not "
                                          "supported",
                         "kflab reads plain data: text, numbers, true/false, null, lists and "
                         "mappings; remove the tag")


def _short(text: str) -> str:
    return text if len(text) <= 40 else text[:37] + "..."


# --- public API ------------------------------------------------------------------------------

def load_documents(text: str | bytes, file: str = "<input>", *,
                   duplicates: Duplicates = "error") -> list[Located]:
    """Every non-empty document of a (multi-document) YAML text, each with its line table."""
    if isinstance(text, bytes):
        text = decode(text, file)
    elif len(text) > limits.MAX_FILE_BYTES and len(text.encode()) > limits.MAX_FILE_BYTES:
        raise InputError(file, None, limits.limit("file size (bytes)", len(text.encode()),
                                                  limits.MAX_FILE_BYTES, "MAX_FILE_BYTES"))
    docs = []
    for node in _Composer(file).documents(text):
        lines: dict[PathKey, int] = {}
        dups: list[tuple[PathKey, int]] = []
        data = _Builder(file, lines, dups).value(node, ())
        if data is None:  # an empty document, or `null`: kubectl skips both
            continue
        doc = Located(data, file, lines, dups)
        if dups and duplicates == "error":
            path, line = dups[0]
            raise InputError(file, dotted(path), "given twice in the same mapping",
                             line=line, hint="keep one of the two")
        docs.append(doc)
    return docs


def load_file(path: Path, *, duplicates: Duplicates = "error",
              hint: str = "check the path") -> Located:
    """A single-document YAML file; an empty file is an error naming it."""
    docs = load_documents(read_text(path, hint=hint), str(path), duplicates=duplicates)
    if len(docs) != 1:
        raise InputError(str(path), None, f"expected one YAML document, found {len(docs)}",
                         hint="remove the extra `---` separators" if docs else
                         "the file is empty")
    return docs[0]


def load_json(text: str, file: str = "<input>") -> Any:
    """JSON text with JSON's own error messages (line and column), bounded in depth."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(file, None, f"invalid JSON: {exc.msg} (column {exc.colno})",
                         line=exc.lineno,
                         hint="check brackets, quotes and commas around that line") from None
    except RecursionError:
        raise InputError(file, None, limits.limit("nesting depth", f"{limits.MAX_DEPTH}+",
                                                  limits.MAX_DEPTH, "MAX_DEPTH")) from None
    except ValueError as exc:  # an integer beyond Python's int_max_str_digits (4300)
        raise InputError(file, None, f"invalid JSON value: {str(exc).split(';')[0]}",
                         hint="write the number with fewer digits, or as a string") from None
    depth = _depth(data)
    if depth > limits.MAX_DEPTH:
        raise InputError(file, None, limits.limit("nesting depth", depth, limits.MAX_DEPTH,
                                                  "MAX_DEPTH"))
    return data


def _depth(data: Any) -> int:
    """Nesting depth without recursion (json.loads can return deeper data than we recurse)."""
    deepest, todo = 0, [(data, 1)]
    while todo:
        node, d = todo.pop()
        if isinstance(node, dict | list):
            deepest = max(deepest, d)
            if d > limits.MAX_DEPTH:
                break
            todo.extend((v, d + 1) for v in (node.values() if isinstance(node, dict)
                                             else node))
    return deepest


def looks_like_json(text: str) -> bool:
    """JSON objects and arrays start with { or [ (YAML flow style does too: JSON wins)."""
    return text.lstrip()[:1] in ("{", "[")


def load_data(text: str, file: str) -> Any:
    """One value from text that is JSON (clear JSON errors) or else YAML (one document)."""
    if looks_like_json(text):
        return load_json(text, file)
    docs = load_documents(text, file, duplicates="keep")
    if len(docs) != 1:
        raise InputError(file, None, f"expected one document, found {len(docs)}",
                         hint="give one JSON object" if not docs else "remove the `---`")
    return docs[0].data
