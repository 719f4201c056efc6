"""How a scenario's files reach the pods without the learner building an image.

The manifest's folder (the work folder) goes into a ConfigMap; every workload container of
the manifest gets it mounted read-only at /kflab/files, an emptyDir as its working directory
/kflab/work, and kflab's pod runner (podrun.py, in the same ConfigMap) as the first process:
it copies the files in, installs requirements.txt when a package is missing, then runs the
container's own command. A ConfigMap holds at most 1 MiB (the API server's limit on data and
binaryData together): a bigger folder is refused with the largest files named.

Outputs come back through the pod log (podrun's marker lines; see outputs.py).
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lab.errors import InputError, LabError

FILES_VOLUME, WORK_VOLUME, WHEELS_VOLUME = "kflab-files", "kflab-work", "kflab-wheels"
FILES_DIR, WORK_DIR, WHEELS_DIR = "/kflab/files", "/kflab/work", "/kflab/wheels"
RUNNER_KEY, RUNNER_PATH = "kflab-run.py", ".kflab/run.py"
CONFIGMAP_LIMIT = 1024 * 1024  # bytes of data + binaryData the API server accepts
RUNNER_RESERVE = 16 * 1024  # room for the runner script in the same ConfigMap
MAX_FILES = 500
SKIP_DIRS = {"__pycache__", ".git", ".venv", "venv", "node_modules", ".ipynb_checkpoints"}
_KEY_CHARS = re.compile(r"[^-._a-zA-Z0-9]")
MANAGED = {"app.kubernetes.io/managed-by": "kflab"}


@dataclass
class Files:
    """Files of a folder, as a ConfigMap carries them: key -> (relative path, bytes)."""

    entries: dict[str, tuple[str, bytes]] = field(default_factory=dict)

    @property
    def size(self) -> int:
        return sum(len(data) for _, data in self.entries.values())

    def items(self) -> list[dict[str, str]]:
        """The ConfigMap volume's `items`: each key at its relative path."""
        return [{"key": k, "path": rel} for k, (rel, _) in sorted(self.entries.items())]


def _key(index: int, rel: str) -> str:
    name = _KEY_CHARS.sub("_", Path(rel).name)[:200] or "file"
    return f"f{index:03d}-{name}"


def snapshot(folder: Path, *, subdir: str = "", with_runner: bool = True) -> Files:
    """The regular files under `folder` (or its `subdir`), hidden and cache folders skipped,
    symlinks never followed. Raises LabError when they exceed a ConfigMap."""
    root = (folder / subdir).resolve() if subdir else folder.resolve()
    base = folder.resolve()
    if root != base and base not in root.parents:
        raise InputError(None, "storageUri", f"{subdir} is outside {folder}",
                         hint="use a path inside the manifest's folder")
    if not root.is_dir():
        raise LabError(f"{root} is not a folder", hint="check the path in the manifest")
    found: list[tuple[str, Path]] = []
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if any(p.startswith(".") or p in SKIP_DIRS for p in rel.parts[:-1]):
            continue
        if rel.name.startswith(".") or path.is_symlink() or not path.is_file():
            continue
        if path.suffix in (".pyc", ".pyo"):
            continue
        found.append((rel.as_posix(), path))
    if len(found) > MAX_FILES:
        raise LabError(f"{root} holds {len(found)} files; kflab sends at most {MAX_FILES} "
                       "to the pods", hint="remove files the workload does not need")
    files = Files()
    budget = CONFIGMAP_LIMIT - (RUNNER_RESERVE if with_runner else 0)
    sizes = sorted(((p.stat().st_size, rel) for rel, p in found), reverse=True)
    total = sum(s for s, _ in sizes)
    if total > budget:
        biggest = ", ".join(f"{rel} ({s // 1024} KiB)" for s, rel in sizes[:3])
        raise LabError(
            f"the folder {root} holds {total // 1024} KiB; the cluster backend carries a "
            f"workload's files in a ConfigMap, which Kubernetes limits to 1 MiB "
            f"(largest: {biggest})",
            hint="keep large data out of the work folder: let the job generate or download "
                 "it, or put it in object storage and read it from there (docs/cluster.md)")
    for i, (rel, path) in enumerate(found):
        files.entries[_key(i, rel)] = (rel, path.read_bytes())
    if with_runner:
        runner = Path(__file__).with_name("podrun.py").read_bytes()
        files.entries[RUNNER_KEY] = (RUNNER_PATH, runner)
    return files


def configmap(name: str, namespace: str, files: Files,
              labels: dict[str, str] | None = None) -> dict[str, Any]:
    """The ConfigMap: UTF-8 text in `data`, anything else base64 in `binaryData`."""
    data: dict[str, str] = {}
    binary: dict[str, str] = {}
    for key, (_, raw) in files.entries.items():
        try:
            data[key] = raw.decode("utf-8")
        except UnicodeDecodeError:
            binary[key] = base64.b64encode(raw).decode()
    obj: dict[str, Any] = {"apiVersion": "v1", "kind": "ConfigMap",
                           "metadata": {"name": name, "namespace": namespace,
                                        "labels": {**MANAGED, **(labels or {})}},
                           "data": data}
    if binary:
        obj["binaryData"] = binary
    return obj


def _volume(spec: dict[str, Any], volume: dict[str, Any]) -> None:
    volumes = [v for v in spec.get("volumes") or [] if v.get("name") != volume["name"]]
    spec["volumes"] = [*volumes, volume]


def _mount(container: dict[str, Any], name: str, path: str, read_only: bool) -> None:
    mounts = [m for m in container.get("volumeMounts") or [] if m.get("name") != name]
    container["volumeMounts"] = [*mounts, {"name": name, "mountPath": path,
                                           "readOnly": read_only}]


def _env(container: dict[str, Any], name: str, value: str) -> None:
    env = [e for e in container.get("env") or [] if e.get("name") != name]
    container["env"] = [*env, {"name": name, "value": value}]


def inject(pod_spec: dict[str, Any], cm_name: str, files: Files, *, where: str,
           containers: list[str] | None = None, outputs: bool = False,
           wheelhouse: str | None = None) -> None:
    """Give `pod_spec`'s containers (all, or those named) the work folder and the runner.

    `where` names the pod template in the manifest for errors, e.g.
    spec.pytorchReplicaSpecs.Worker.template.spec."""
    if not isinstance(pod_spec, dict) or not isinstance(pod_spec.get("containers"), list):
        raise InputError(None, f"{where}.containers", "no containers",
                         hint="give the pod template at least one container")
    _volume(pod_spec, {"name": FILES_VOLUME,
                       "configMap": {"name": cm_name, "items": files.items()}})
    _volume(pod_spec, {"name": WORK_VOLUME, "emptyDir": {}})
    if wheelhouse:
        _volume(pod_spec, {"name": WHEELS_VOLUME,
                           "hostPath": {"path": wheelhouse, "type": "Directory"}})
    for i, c in enumerate(pod_spec["containers"]):
        if containers is not None and c.get("name") not in containers:
            continue
        command = c.get("command")
        if not isinstance(command, list) or not command:
            raise InputError(None, f"{where}.containers[{i}].command",
                             "the cluster backend needs the container's command",
                             hint="write the command (e.g. [python3, train.py]) instead of "
                                  "relying on the image's entrypoint")
        _mount(c, FILES_VOLUME, FILES_DIR, True)
        _mount(c, WORK_VOLUME, WORK_DIR, False)
        workdir = c.get("workingDir")
        c["workingDir"] = (workdir if isinstance(workdir, str) and workdir.startswith("/")
                           else f"{WORK_DIR}/{workdir}".rstrip("/") if workdir else WORK_DIR)
        c["command"] = ["python3", f"{FILES_DIR}/{RUNNER_PATH}", "--files", FILES_DIR,
                        "--work", WORK_DIR, "--", *[str(a) for a in command]]
        if outputs:
            _env(c, "KFLAB_OUTPUTS", "1")
        if wheelhouse:
            _mount(c, WHEELS_VOLUME, WHEELS_DIR, True)
            _env(c, "PIP_NO_INDEX", "1")
            _env(c, "PIP_FIND_LINKS", WHEELS_DIR)


def model_volume(predictor: dict[str, Any], cm_name: str, files: Files,
                 mount: str = "/mnt/models") -> None:
    """Mount a model folder where KServe's model servers read it (the runtime's
    --model_dir), in place of a storageUri that only this machine can read."""
    model = predictor.get("model")
    if not isinstance(model, dict):
        raise InputError(None, "spec.predictor.model", "missing",
                         hint="give spec.predictor.model with modelFormat and storageUri")
    model.pop("storageUri", None)
    _volume(predictor, {"name": "kflab-model",
                        "configMap": {"name": cm_name, "items": files.items()}})
    _mount(model, "kflab-model", mount, True)
