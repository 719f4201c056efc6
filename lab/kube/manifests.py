"""Reading Kubernetes manifests from files, with errors that point at file and line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lab.errors import InputError
from lab.kube import names
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
        _check_names(doc, obj["kind"], meta)
    return docs


def _check_names(doc: Located, kind: str, meta: dict[str, Any]) -> None:
    """Name and namespace as the API server checks them (lab.kube.names), at their line."""
    from lab.kube.kinds import KINDS

    canonical = next((k.kind for k in KINDS if kind.lower() in
                      (k.kind.lower(), k.plural, *k.short)), kind)
    if (problem := names.name_problem(canonical, meta["name"])) is not None:
        raise doc.error(("metadata", "name"), f"invalid {canonical} name: {problem}",
                        hint=names.name_hint(canonical))
    if "namespace" in meta and (problem := names.namespace_problem(meta["namespace"])):
        raise doc.error(("metadata", "namespace"), f"invalid namespace: {problem}",
                        hint=names.NAMESPACE_HINT)


def apply_document(backend: Any, doc: Located, base_dir: Path) -> dict[str, Any]:
    """`backend.apply` for one loaded manifest: a field error raised while validating the
    object (an Experiment's feasible space, say) names this file and the field's line."""
    try:
        return backend.apply(doc.data, base_dir=base_dir)
    except InputError as exc:
        if exc.field is None or exc.file == doc.file:
            raise
        raise doc.relocate(exc) from None
