"""`kflab progress export`: the student's side of a hand-in. One folder (or a .tar.gz of it)
holding the manifest, the guided progress and journal of each lab, the records and run
folders of what the student's runs made, their owner records, and each lab's work folder;
the format, and how the instructor's kflab opens it, are handin.py's.

With labs named, only their records travel (`belongs`): what their checks read, what a kflab
command run in their work folders made, and what those own.
"""

from __future__ import annotations

import json
import os
import tarfile
import tempfile
from pathlib import Path
from typing import Any

from lab import __version__, hashchain, limits, state
from lab.errors import InputError, LabError
from lab.kube.conditions import now
from lab.scenarios.handin import (
    ARCHIVE_SUFFIXES,
    FORMAT,
    MANIFEST,
    SKIP_NAMES,
    STATE_PARTS,
    Budget,
    copy_file,
    copy_tree,
    read_owner_records,
    session_backend,
    slug,
    student_name,
)
from lab.yamlio import read_json


def export(state_root: Path, sids: list[str], student: str, out: Path) -> dict[str, Any]:
    """Write a hand-in for `sids` (every scenario with saved progress when empty) to `out`
    (a folder, or an archive when `out` ends in .tar.gz/.tgz). Returns the manifest.
    With `sids` named, only the records of those labs travel (`belongs`)."""
    student = student_name(student)
    progress_dir = state.path(state_root, "progress")
    only = bool(sids)
    if not sids:
        sids = sorted(p.name[:-5] for p in progress_dir.glob("*.json")
                      if not p.name.startswith("."))
    if not sids:
        raise LabError(f"no scenario progress in the state folder {state_root}",
                       hint="start one with `kflab scenario start NAME`, or point --state at "
                            "the folder you worked with")
    archive = out.name.endswith(ARCHIVE_SUFFIXES)
    if out.exists() and (archive or not out.is_dir() or any(out.iterdir())):
        raise LabError(f"{out} already exists", hint="give a new path with --out")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise state.io_error(exc, out.parent, "create") from None
    manifest: dict[str, Any] = {"kind": "kflab-export", "format": FORMAT, "kflab": __version__,
                                "student": student, "exported_at": now(),
                                "state_root": str(state_root.resolve()), "scenarios": {}}
    budget = Budget()
    with tempfile.TemporaryDirectory(prefix=".kflab-export-",
                                     dir=out.parent if archive else None) as tmp:
        root = Path(tmp) / slug(student) if archive else out
        for sid in sids:
            progress = state.read_json(state.path(state_root, "progress", f"{sid}.json"))
            if progress is None:
                raise LabError(f"no saved progress for scenario '{sid}' in {state_root}",
                               hint="list what you worked on with `ls "
                                    f"{progress_dir}`, or start it with "
                                    f"`kflab scenario start {sid}`")
            from lab.scenarios.guided import locate_workdir

            workdir = locate_workdir(progress, state_root)
            if not workdir.is_dir():
                raise LabError(f"the work folder of '{sid}' ({workdir}) is gone",
                               hint="restore it, or start again with "
                                    f"`kflab scenario start {sid} --restart`")
            for name in (f"{sid}.json", f"{sid}.events.jsonl"):
                src = state.path(state_root, "progress", name)
                if src.is_file() and not src.is_symlink():
                    copy_file(src, root / "state" / "progress" / name, budget)
            copy_tree(workdir, root / "work" / sid, budget, skip=SKIP_NAMES,
                      avoid=(out, Path(tmp), state_root), exports=True)
            manifest["scenarios"][sid] = {"workdir": str(workdir.resolve()),
                                          "current": progress.get("current"),
                                          "started_at": progress.get("started_at"),
                                          "backend": session_backend(progress)}
            # the journal's head as exported: an anchor (lab.hashchain) grading checks
            mark = hashchain.anchor(state_root, sid)
            if mark is not None:
                manifest["scenarios"][sid]["journal"] = {"head": mark["head"], "n": mark["n"]}
            if session_backend(progress) != "local":
                budget.left_out.append(f"the {session_backend(progress)} backend's objects of "
                                       f"'{sid}' (they live in the cluster, not in a hand-in)")
        keep = belongs(state_root, sids, manifest) if only else None
        for part in STATE_PARTS:
            src = state.path(state_root, part)
            if not src.is_dir():
                continue
            if keep is None:
                copy_tree(src, root / "state" / part, budget)
                continue
            if part == "pipeline-root":
                for top in _pipeline_outputs(state_root, keep):
                    copy_tree(top, root / "state" / part / top.relative_to(src), budget,
                              label=f"state/{part}")
                continue
            for top in sorted(src.glob("*/*/*")):  # <plural>/<namespace>/<name>[.json]
                ref = (top.parent.parent.name, top.parent.name, top.name.removesuffix(".json"))
                dest = root / "state" / part / top.relative_to(src)
                if ref not in keep or top.is_symlink():
                    continue
                if top.is_dir():
                    copy_tree(top, dest, budget, label=f"state/{part}")
                elif top.is_file():
                    copy_file(top, dest, budget)
        owners_dir = state.path(state_root, "owners")
        for rec in sorted(owners_dir.glob("*/*/*.json")) if owners_dir.is_dir() else []:
            ref = (rec.parent.parent.name, rec.parent.name, rec.stem)
            if rec.is_file() and not rec.is_symlink() and (keep is None or ref in keep):
                copy_file(rec, root / "state" / rec.relative_to(state_root), budget)
        if keep is not None:
            manifest["records"] = sorted("/".join(r) for r in keep)
        manifest["left_out"] = budget.left_out
        manifest["files"], manifest["bytes"] = budget.files, budget.bytes
        (root / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
        if archive:
            _write_archive(root, out)
    return manifest


def _pipeline_outputs(state_root: Path, keep: set[tuple[str, str, str]]) -> list[Path]:
    """The `pipeline-root/<namespace>/<run id>` folders that the kept pipeline runs' records
    point into: their own outputs and those their cached tasks reuse from earlier runs."""
    base = state.path(state_root, "pipeline-root")
    prefix = str(base) + os.sep
    found: set[Path] = set()

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)
        elif isinstance(value, str) and prefix in value:
            parts = value.split(prefix, 1)[1].split(os.sep)
            if len(parts) >= 2 and all(parts[:2]) and ".." not in parts[:2]:
                found.add(base / parts[0] / parts[1])

    for plural_, ns, name in keep:
        if plural_ == "pipelineruns":
            walk(state.read_json(state.path(state_root, "resources", plural_, ns,
                                            f"{name}.json")))
    return sorted(p for p in found if p.is_dir() and not p.is_symlink())


def belongs(state_root: Path, sids: list[str],
            manifest: dict[str, Any]) -> set[tuple[str, str, str]]:
    """(plural, namespace, name) of the records that belong to the labs `sids`: what their
    checks read, what a kflab command run in their work folder made, and what those own
    (an Experiment's trials). The records of other labs stay out of a one-lab hand-in."""
    from lab.kube.kinds import lookup
    from lab.scenarios.integrity import check_targets
    from lab.scenarios.loader import find

    def plural(kind: str) -> str | None:
        try:
            return lookup(kind).plural
        except LabError:
            return None

    keep: set[tuple[str, str, str]] = set()
    workdirs = [Path(manifest["scenarios"][sid]["workdir"]) for sid in sids]
    for sid in sids:
        for step in find(sid).steps:
            for check in step.checks:
                for kind, name, ns in check_targets(check):
                    if (pl := plural(kind)) is not None:
                        keep.add((pl, ns, name))
    for rec in read_owner_records(state_root):
        cwd = rec.get("cwd")
        if isinstance(cwd, str) and any(Path(cwd) == w or w in Path(cwd).parents
                                        for w in workdirs):
            pl, ns, name = [*str(rec.get("_resource")).split("/"), "", ""][:3]
            keep.add((pl, ns, name))
    base = state.path(state_root, "resources")
    kept_names = {(ns, name) for _, ns, name in keep}
    for path in sorted(base.glob("*/*/*.json")) if base.is_dir() else []:
        try:
            meta = read_json(path, limit=limits.MAX_RECORD_BYTES).get("metadata") or {}
        except (InputError, AttributeError):
            continue
        parents = [str(o.get("name")) for o in meta.get("ownerReferences") or []
                   if isinstance(o, dict)]
        ns = path.parent.name
        if any((ns, parent) in kept_names for parent in parents):
            keep.add((path.parent.parent.name, ns, path.stem))
    return keep


def _write_archive(root: Path, out: Path) -> None:
    mode = "w" if out.name.endswith(".tar") else "w:gz"
    part = out.with_name(f".{out.name}.part")
    try:
        with tarfile.open(part, mode) as tar:
            # The manifest first: an export is recognised by its first members (is_export).
            tar.add(root, arcname=root.name, recursive=False)
            tar.add(root / MANIFEST, arcname=f"{root.name}/{MANIFEST}")
            for child in sorted(root.iterdir()):
                if child.name != MANIFEST:
                    tar.add(child, arcname=f"{root.name}/{child.name}")
        os.replace(part, out)
    finally:
        part.unlink(missing_ok=True)
