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

An entry also names the run that made it (its name, as the API's display name) and keeps
the task's log beside its outputs (`<task folder>/main.log`, as Argo's archiveLogs keeps a
pod's log as `main.log` beside its artifacts: the KFP manifests turn it on, in
third-party/argo/base/workflow-controller-configmap-patch.yaml): a cache hit's record points
to the execution it reused (MLMD's `cached_execution_id`, backend/src/v2/metadata/client.go),
and `kflab logs` finds that execution's log there even after its run was deleted or run again.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

from lab import state
from lab.backends.pipeline_memo import TASK_LOG, cache_folder, cached, origin, referenced_runs

__all__ = ["Cache", "fingerprint", "referenced_runs"]


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
    """`<state>/pipeline-cache/<namespace>/<pipeline name hash>/<fingerprint>.json`
    (entries read by lab/backends/pipeline_memo.py, shared with the start-up fast path)."""

    def __init__(self, root: Path, namespace: str, pipeline_name: str) -> None:
        self.root = root
        self.folder = cache_folder(root, namespace, pipeline_name)

    def _file(self, key: str) -> Path:
        return state.path(self.folder, f"{key}.json")

    def get(self, key: str) -> Path | None:
        """The task folder of a cached execution, if it is whole. An entry that is corrupt
        or of the wrong shape (a truncated write, a hand edit) is a miss and is removed:
        the cache is only ever a shortcut."""
        if not self._file(key).exists():
            return None
        folder = cached(self.root, self._file(key))
        if folder is None:
            with contextlib.suppress(Exception):
                state.remove(self.root, self._file(key))
        return folder

    def origin(self, key: str) -> dict[str, str] | None:
        """The execution the entry `key` names: its run (name, id) and task path."""
        return origin(self.root, self._file(key))

    def put(self, key: str, task_root: Path, run_id: str, run: str = "",
            log: Path | None = None) -> None:
        """Record a successful execution, with the artifact files it wrote (a Metrics
        artifact, say, writes none: its values are metadata), the run's name, and a copy
        of its log kept in its folder (a copy, not a hard link: hand-ins and archives keep
        regular files only)."""
        if log is not None and log.is_file():
            with contextlib.suppress(OSError):
                shutil.copyfile(log, task_root / TASK_LOG, follow_symlinks=False)
        ex_in = json.loads((task_root / "executor_input.json").read_text())
        files = [a.get("uri", "") for g in ((ex_in.get("outputs") or {}).get("artifacts")
                                            or {}).values() for a in g.get("artifacts", [])]
        self.folder.mkdir(parents=True, exist_ok=True)
        state.write_json(self._file(key), {
            "task_root": str(task_root), "run_id": run_id, "run": run,
            "files": [f for f in files if f and Path(f).exists()]})
