"""Reading Kubernetes manifests from files, with errors that point at file and line."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from lab.errors import InputError
from lab.yamlio import Located, PathKey, load_documents


def load_manifests(path: Path) -> list[Located]:
    """Every object in a YAML file (multi-document); each must have apiVersion, kind, name."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise InputError(str(path), None, f"cannot read: {exc.strerror}",
                         hint="check the path given to -f") from None
    docs = load_documents(text, str(path))
    if not docs:
        raise InputError(str(path), None, "no objects in file", hint="add a manifest")
    for doc in docs:
        obj = doc.data
        if not isinstance(obj, dict):
            raise doc.error((), "a manifest must be a mapping",
                            hint="start with apiVersion:, kind:, metadata:")
        for key in ("apiVersion", "kind"):
            if not isinstance(obj.get(key), str) or not obj[key]:
                raise doc.error((key,), "missing", hint=f"set {key}: at the top of the object")
        meta: Any = obj.get("metadata")
        if not isinstance(meta, dict) or not isinstance(meta.get("name"), str):
            raise doc.error(("metadata", "name"), "missing",
                            hint="set metadata: {name: my-object}")
    return docs


def _field_path(field: str | None) -> PathKey:
    """'spec.predictor.model.env[0]' -> ('spec', 'predictor', 'model', 'env', 0)."""
    out: list[str | int] = []
    for part in (field or "").split("."):
        m = re.fullmatch(r"([^\[\]]*)((?:\[\d+\])*)", part)
        if not m:
            out.append(part)
            continue
        if m.group(1):
            out.append(m.group(1))
        out += [int(i) for i in re.findall(r"\[(\d+)\]", m.group(2))]
    return tuple(out)


@contextmanager
def located(doc: Located) -> Iterator[None]:
    """Give a backend's InputError about a manifest field the manifest's file and line."""
    try:
        yield
    except InputError as exc:
        if exc.file is not None:
            raise
        raise doc.error(_field_path(exc.field), exc.problem, exc.hint) from None
