"""Reading Kubernetes manifests and applying them all-or-nothing, on any backend.

`kflab apply -f a.yaml -f b.yaml` loads every document of every file, checks each one's
fields against the real field tree (unknown or duplicate fields warn as kubectl warns, or
fail with --validate=strict) and runs the backend's own validation of each object; only when
every document passed is the first one applied. One bad document means nothing is applied.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from lab.errors import InputError, LabError
from lab.kube import names
from lab.yamlio import Located, dotted, load_documents, read_text

Validation = Literal["strict", "warn", "ignore"]
# kubectl's spellings: --validate=true is strict, --validate=false is ignore
VALIDATION_CHOICES = ("strict", "warn", "ignore", "true", "false")
LAST_APPLY = "last-apply.json"  # in the state folder: what the learner's last apply warned


def validation_mode(value: str) -> Validation:
    return {"true": "strict", "false": "ignore"}.get(value, value)  # type: ignore[return-value]


def load_manifests(path: Path) -> list[Located]:
    """Every object in a YAML file (multi-document); each must have apiVersion, kind, name."""
    text = read_text(path, hint="check the path given to -f")
    docs = load_documents(text, str(path), duplicates="keep")
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
        if isinstance(meta, dict) and meta.get("name") is None and meta.get("generateName"):
            # kubectl apply refuses it too ("cannot use generate name with apply"): a
            # generated name is for `kubectl create`, which kflab does not have
            raise doc.error(("metadata", "name"),
                            f"missing: generateName ({meta['generateName']!r}) is for "
                            "`kubectl create`; apply (kubectl's too) needs a name",
                            hint="set metadata.name (e.g. "
                                 f"{str(meta['generateName']).rstrip('-') or 'my-object'}-1)")
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


@dataclass
class Planned:
    """One document, validated and ready to apply, with what it warned about."""

    doc: Located
    base_dir: Path
    warnings: list[str] = field(default_factory=list)

    @property
    def ref(self) -> str:
        obj = self.doc.data
        return f"{str(obj['kind']).lower()}/{obj['metadata']['name']}"


def field_warnings(doc: Located) -> list[str]:
    """Unknown and duplicate fields of one document, as `file:line: unknown field "x"`."""
    from lab.kube.fields import unknown_fields

    out = [f"{doc.file}:{doc.line(path)}: duplicate field \"{dotted(path)}\""
           for path, _ in doc.duplicates]
    out += [f"{doc.file}:{doc.line(u.path)}: {u.message()}" for u in unknown_fields(doc.data)]
    return out


def plan(backend: Any, files: list[Path], validation: Validation = "warn") -> list[Planned]:
    """Load and validate every document of every file; raise before anything is applied."""
    planned = [Planned(doc, path.parent.resolve())
               for path in files for doc in load_manifests(path)]
    for item in planned:
        if validation != "ignore":
            item.warnings = field_warnings(item.doc)
        try:
            validate_document(backend, item.doc, item.base_dir)
        except LabError as exc:
            # A required field "missing" is often one typed wrong: the unknown-field
            # warnings (with their did-you-mean) go with the error, not lost behind it.
            if item.warnings:
                exc.hint = "; ".join([*item.warnings, *([exc.hint] if exc.hint else [])])
            raise
    problems = [w for item in planned for w in item.warnings]
    if validation == "strict" and problems:
        raise LabError(f"{len(problems)} field problem(s) with --validate=strict, nothing was "
                       "applied:\n  " + "\n  ".join(problems),
                       hint="fix the field names (or apply with --validate=warn)")
    return planned


def validate_document(backend: Any, doc: Located, base_dir: Path) -> None:
    """The backend's validation of one object, on a copy; errors point at the field's line.
    (A backend without `validate` is checked by its own apply, object by object.)"""
    validate = getattr(backend, "validate", None)
    if validate is None:
        return
    try:
        validate(copy.deepcopy(doc.data), base_dir=base_dir)
    except InputError as exc:
        if exc.field is None or exc.file == doc.file:
            raise
        raise doc.relocate(exc) from None
    except LabError as exc:  # e.g. an unknown kind, or GPUs this machine lacks: say where
        raise LabError(f"{doc.file}: {exc.args[0]}", hint=exc.hint) from None


def apply_document(backend: Any, doc: Located, base_dir: Path) -> dict[str, Any]:
    """`backend.apply` for one loaded manifest: a field error raised while validating the
    object (an Experiment's feasible space, say) names this file and the field's line."""
    try:
        return backend.apply(doc.data, base_dir=base_dir)
    except InputError as exc:
        if exc.field is None or exc.file == doc.file:
            raise
        raise doc.relocate(exc) from None


def record_warnings(state_root: Path, planned: list[Planned],
                    about: dict[str, str] | None = None) -> None:
    """Keep what this apply warned about, for a guided `kflab check` to show; `about`: where
    the learner was (the scenario and step in progress), so that another lab's or another
    step's apply is never shown as this one's."""
    from lab import state
    from lab.kube.conditions import now

    state.write_json(state.path(state_root, LAST_APPLY), {
        "at": now(), "objects": [p.ref for p in planned], "about": about,
        "warnings": [w for p in planned for w in p.warnings]})


def last_warnings(state_root: Path, about: dict[str, str] | None = None) -> list[str]:
    """The warnings of the last `kflab apply` made where `about` says (none when it had
    none, never ran, or was made in another scenario or step)."""
    from lab import state

    try:
        data = state.read_json(state.path(state_root, LAST_APPLY))
    except LabError:  # unreadable or corrupt (moved aside by read_json): nothing to show
        return []
    if not isinstance(data, dict) or data.get("about") != about:
        return []
    warnings = data.get("warnings")
    return [str(w) for w in warnings] if isinstance(warnings, list) else []
