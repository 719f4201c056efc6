"""KFP's execution cache, kept in the state folder.

What goes into a task's fingerprint is what KFP 2.16's driver puts there
(backend/src/v2/driver/cache.go `getFingerPrint` and backend/src/v2/cacheutils/cache.go
`GenerateCacheKey`, `GenerateFingerPrint`): the input parameter values, the names of the
input artifacts (here: their URIs, which identify the execution that wrote them, as MLMD's
artifact names do), each output artifact's name, type and metadata (its URI wiped), each
output parameter's type, and the container's image and command + args as compiled (with
placeholders). The sha256 of that JSON is looked up among earlier executions of the same
pipeline name in the same namespace (`GetExecutionCache(fingerPrint, "pipeline/"+name,
namespace)`): an environment variable set with `set_env_variable` is not part of the key,
exactly as on a cluster.

An entry names the task folder of the execution that wrote it (its executor input and
output, its artifacts). A run deleted with `kflab delete` keeps the task folders that an
entry still names (KFP keeps artifacts when a run is deleted, too); an entry whose folder or
files are gone is a miss and is removed, so the cache never hands out a missing file.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from pathlib import Path
from typing import Any

from lab import state


def fingerprint(executor_input: dict[str, Any], output_param_types: dict[str, str],
                image: str, cmd_args: list[str]) -> str:
    inputs = executor_input.get("inputs") or {}
    outputs = executor_input.get("outputs") or {}
    key: dict[str, Any] = {
        "inputArtifactNames": {
            name: {"artifactNames": [a.get("uri", "") for a in group.get("artifacts", [])]}
            for name, group in (inputs.get("artifacts") or {}).items()},
        "inputParameterValues": dict(inputs.get("parameterValues") or {}),
        "outputArtifactsSpec": {
            name: {"name": arts[0].get("name", ""), "type": arts[0].get("type", {}),
                   "metadata": arts[0].get("metadata", {})}
            for name, group in (outputs.get("artifacts") or {}).items()
            if (arts := group.get("artifacts") or [])},
        "outputParametersSpec": {name: output_param_types.get(name, "")
                                 for name in (outputs.get("parameters") or {})},
        "containerSpec": {"image": image, "cmdArgs": list(cmd_args)},
    }
    text = json.dumps(key, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


class Cache:
    """`<state>/pipeline-cache/<namespace>/<pipeline name hash>/<fingerprint>.json`."""

    def __init__(self, root: Path, namespace: str, pipeline_name: str) -> None:
        scope = hashlib.sha256(f"pipeline/{pipeline_name}".encode()).hexdigest()[:16]
        self.root = root
        self.folder = state.path(root, "pipeline-cache", namespace, scope)

    def _file(self, key: str) -> Path:
        return state.path(self.folder, f"{key}.json")

    def get(self, key: str) -> Path | None:
        """The task folder of a cached execution, if it is whole. An entry that is corrupt
        or of the wrong shape (a truncated write, a hand edit) is a miss and is removed:
        the cache is only ever a shortcut."""
        if not self._file(key).exists():
            return None
        entry = _entry(self._file(key))
        folder = Path(entry["task_root"]) if entry else Path()
        files = [Path(f) for f in entry["files"]] if entry else []
        if not (entry and folder.is_absolute()
                and folder.resolve().is_relative_to(self.root.resolve())
                and _whole(folder, files)):
            with contextlib.suppress(Exception):
                state.remove(self.root, self._file(key))
            return None
        return folder

    def put(self, key: str, task_root: Path, run_id: str) -> None:
        """Record a successful execution, with the artifact files it wrote (a Metrics
        artifact, say, writes none: its values are metadata)."""
        ex_in = json.loads((task_root / "executor_input.json").read_text())
        files = [a.get("uri", "") for g in ((ex_in.get("outputs") or {}).get("artifacts")
                                            or {}).values() for a in g.get("artifacts", [])]
        self.folder.mkdir(parents=True, exist_ok=True)
        state.write_json(self._file(key), {
            "task_root": str(task_root), "run_id": run_id,
            "files": [f for f in files if f and Path(f).exists()]})


def _entry(path: Path) -> dict[str, Any] | None:
    """A cache entry as put() writes it, or None (unreadable, not JSON, other types)."""
    try:
        data = json.loads(path.read_bytes().decode("utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    if not (isinstance(data, dict) and isinstance(data.get("task_root"), str)
            and isinstance(data.get("run_id", ""), str) and isinstance(data.get("files"), list)
            and all(isinstance(f, str) for f in data["files"])):
        return None
    return data


def _whole(task_root: Path, files: list[Path]) -> bool:
    """The executor input and output are there and every artifact file it wrote."""
    try:
        for name in ("executor_input.json", "executor_output.json"):
            if not isinstance(json.loads((task_root / name).read_text()), dict):
                return False
    except (OSError, ValueError, RecursionError):
        return False
    return all(f.is_absolute() and f.exists() for f in files)


def referenced_runs(root: Path) -> set[str]:
    """Run ids that some cache entry still needs (their task folders are kept)."""
    base = state.path(root, "pipeline-cache")
    found: set[str] = set()
    for path in base.glob("*/*/*.json"):
        entry = _entry(path)
        if entry and entry.get("run_id"):
            found.add(entry["run_id"])
    return found
