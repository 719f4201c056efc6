"""Reading Kubernetes manifests from files, with errors that point at file and line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lab.errors import InputError
from lab.yamlio import Located, load_documents


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


def apply_document(backend: Any, doc: Located, base_dir: Path) -> dict[str, Any]:
    """`backend.apply` for one loaded manifest: a field error raised while validating the
    object (an Experiment's feasible space, say) names this file and the field's line."""
    try:
        return backend.apply(doc.data, base_dir=base_dir)
    except InputError as exc:
        if exc.field is None or exc.file == doc.file:
            raise
        raise doc.relocate(exc) from None
