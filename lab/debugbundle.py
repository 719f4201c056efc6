"""`kflab debug bundle`: everything a maintainer needs to see why a lab failed, in one
tar.gz the user can attach to an issue (in the spirit of `kind export logs`).

What goes in (each part best effort: what cannot be read is listed in errors.txt, and the
bundle is still written):
- versions: kflab, Python, the platform, the pins (manifests/versions.yaml), and on a cluster
  the server's;
- the local backend's state folder: every resource record (status included), the owner
  record of each run (which command made it), guided progress, and the last lines of the
  logs of the most recent runs;
- a lab made by `kflab up`: its record (lab.json), its profile as lab.yaml, the Ansible log,
  verify.json;
- its cluster, read through the lab's kubeconfig: `get -A` of kflab's kinds (YAML), the
  nodes, then for the kubeflow namespace and the lab namespace: events, each pod's
  description, each container's log (the last lines), Deployments.

Never in it: Secrets (not read at all), kubeconfigs (only their path), the `kflab ui` launch
file, grading sandboxes. Everything else is redacted by allowlist before it is written
(lab.redact): environment values always, argv values after flags and inside `sh -c`,
annotation values but for known keys, credential-named fields, and known token shapes in
free text.
"""

from __future__ import annotations

import io
import json
import os
import platform
import stat
import tarfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from lab.redact import REDACTED, redact, scrub

__all__ = ["REDACTED", "Bundle", "build", "redact", "scrub"]

LOG_TAIL = 2000  # lines of each container's log
LOG_TAIL_BYTES = 256 * 1024  # of each local run log, read from its end
MAX_RECORD_BYTES = 4 * 1024 * 1024  # a local record bigger than this is listed, not read
MAX_RECORDS = 500  # local records in one bundle (the newest first)
RECENT_RUNS = 20  # local runs whose logs go in (the newest)


def _strip_object(obj: dict[str, Any]) -> dict[str, Any]:
    """An object as a bundle shows it: no managedFields, no last-applied copy."""
    meta = obj.get("metadata") or {}
    meta.pop("managedFields", None)
    (meta.get("annotations") or {}).pop("kubectl.kubernetes.io/last-applied-configuration",
                                        None)
    return obj


@dataclass
class Bundle:
    """The files of the bundle in memory (name -> text), redacted as they are added."""

    files: dict[str, str] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def add(self, name: str, text: str) -> None:
        """Free text, redacted as text (known shapes)."""
        self.files[name] = redact(text)

    def add_object(self, name: str, data: Any, as_json: bool = False) -> None:
        """A structured object: redacted by allowlist (lab.redact.scrub), then as text."""
        clean = scrub(data)
        self.add(name, json.dumps(clean, indent=2, default=str) if as_json else _dump(clean))

    def attempt(self, what: str, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except Exception as exc:  # a bundle is for broken labs: note it and go on
            self.errors.append(f"{what}: {type(exc).__name__}: {' '.join(str(exc).split())}")
            return None

    def write(self, target: Path, root: str) -> Path:
        if self.errors:
            self.files["errors.txt"] = redact("\n".join(self.errors) + "\n")
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(target.name + ".part")
        with tarfile.open(tmp, "w:gz") as tar:
            for name, text in sorted(self.files.items()):
                data = text.encode()
                info = tarfile.TarInfo(f"{root}/{name}")
                info.size, info.mtime, info.mode = len(data), int(time.time()), 0o600
                tar.addfile(info, io.BytesIO(data))
        tmp.replace(target)
        target.chmod(0o600)
        return target


def _dump(data: Any) -> str:
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=False)


def lab_files(b: Bundle, lab_dir: Path, record: dict[str, Any]) -> None:
    """The record, the profile, the Ansible log and verify.json of one lab."""
    b.add_object("lab/lab.json", record, as_json=True)
    if isinstance(record.get("profile"), dict):
        b.add_object("lab/lab.yaml", record["profile"])
    for name in ("ansible.log", "verify.json"):
        path = lab_dir / name
        if path.is_file():
            b.add(f"lab/{name}", _tail(path, 4 * LOG_TAIL_BYTES))
        else:
            b.errors.append(f"lab/{name}: not found at {path}")


def versions(b: Bundle, kube: Any | None) -> None:
    from lab import __version__
    from lab.components.catalog import versions_file

    lines = [f"kflab {__version__}", f"python {platform.python_version()}",
             f"platform {platform.platform()}"]
    b.attempt("versions.yaml", lambda: b.add("versions/versions.yaml",
                                             Path(versions_file()).read_text()))
    if kube is not None:
        from kubernetes import client

        info = b.attempt("server version", lambda: client.VersionApi(kube.api).get_code(
            _request_timeout=kube.timeout))
        if info is not None:
            lines.append(f"kubernetes server {info.git_version} ({info.platform})")
    b.add("versions/versions.txt", "\n".join(lines) + "\n")


def _items(result: Any) -> list[dict[str, Any]]:
    return [_strip_object(i.to_dict() if hasattr(i, "to_dict") else i)
            for i in (result or [])]


def cluster(b: Bundle, kube: Any, namespaces: list[str]) -> None:
    """`get -A` of kflab's kinds and the nodes; per namespace events, pods (described and
    their logs) and Deployments."""
    from kubernetes import client

    from lab.kube.describe import render
    from lab.kube.kinds import KINDS
    from lab.kube.objects import list_objects

    for k in KINDS:
        if k.group == "kflab.dev":  # local-only kinds (pipeline runs live in KFP)
            continue
        items = b.attempt(f"get -A {k.plural}", lambda k=k: list_objects(
            kube, k.api_version, k.kind, None))
        if items is not None:
            b.add_object(f"cluster/get-{k.plural}.yaml", [_strip_object(i) for i in items])
    core, apps = client.CoreV1Api(kube.api), client.AppsV1Api(kube.api)
    t = kube.timeout
    nodes = b.attempt("nodes", lambda: core.list_node(_request_timeout=t))
    if nodes is not None:
        b.add_object("cluster/nodes.yaml", kube.api.sanitize_for_serialization(nodes.items))
    for ns in namespaces:
        events = b.attempt(f"events in {ns}", lambda ns=ns: core.list_namespaced_event(
            ns, _request_timeout=t))
        if events is not None:
            rows = sorted(kube.api.sanitize_for_serialization(events.items),
                          key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime")
                                            or ""))
            b.add(f"{ns}/events.txt", "".join(
                f"{e.get('lastTimestamp') or e.get('eventTime') or ''}  {e.get('type', '')}  "
                f"{(e.get('involvedObject') or {}).get('kind', '')}/"
                f"{(e.get('involvedObject') or {}).get('name', '')}  {e.get('reason', '')}: "
                f"{e.get('message', '')}\n" for e in rows))
        deps = b.attempt(f"deployments in {ns}", lambda ns=ns: apps.list_namespaced_deployment(
            ns, _request_timeout=t))
        if deps is not None:
            b.add_object(f"{ns}/deployments.yaml", _items(
                kube.api.sanitize_for_serialization(deps.items)))
        pods = b.attempt(f"pods in {ns}", lambda ns=ns: core.list_namespaced_pod(
            ns, _request_timeout=t))
        for pod in _items(kube.api.sanitize_for_serialization(pods.items)) if pods else []:
            name = pod["metadata"]["name"]
            b.add(f"{ns}/pods/{name}.describe.txt", render(scrub(pod)))
            spec = pod.get("spec") or {}
            for c in (spec.get("initContainers") or []) + (spec.get("containers") or []):
                text = b.attempt(f"logs of {ns}/{name} ({c['name']})",
                                 lambda ns=ns, name=name, c=c: core.read_namespaced_pod_log(
                                     name, ns, container=c["name"], tail_lines=LOG_TAIL,
                                     _request_timeout=t))
                if text is not None:
                    b.add(f"{ns}/pods/{name}.{c['name']}.log", str(text))


def _tail(path: Path, limit: int) -> str:
    """The last `limit` bytes of a regular file (never a FIFO or a device), as text."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(f"{path} is not a regular file")
        start = max(0, info.st_size - limit)
        data = os.pread(fd, limit, start)
    finally:
        os.close(fd)
    text = data.decode("utf-8", errors="replace")
    return (f"[... the first {start} bytes left out ...]\n" + text) if start else text


def _newest(paths: list[Path], n: int) -> list[Path]:
    def mtime(p: Path) -> float:
        try:
            return p.lstat().st_mtime
        except OSError:
            return 0.0
    return sorted(paths, key=mtime, reverse=True)[:n]


def local(b: Bundle, state_root: Path) -> None:
    """The local backend's state folder: records, owner records, progress, and the logs of
    the most recent runs. Never the `kflab ui` launch file or grading sandboxes. Links and
    anything not a regular file are passed over."""
    from lab.state import confine

    lines = [f"state folder: {state_root}"]
    for part, pattern in (("resources", "*/*/*.json"), ("owners", "*/*/*.json"),
                          ("progress", "*.json")):
        base = state_root / part
        found = [p for p in base.glob(pattern) if not p.is_symlink()] if base.is_dir() else []
        kept = _newest(found, MAX_RECORDS)
        lines.append(f"{part}: {len(found)} record(s)" + (
            f", the newest {len(kept)} included" if len(kept) < len(found) else ""))
        for path in sorted(kept):
            rel = path.relative_to(state_root).as_posix()

            def read(path: Path = path) -> Any:
                confine(state_root, path)
                text = _tail(path, MAX_RECORD_BYTES + 1)
                if len(text.encode()) > MAX_RECORD_BYTES:
                    raise ValueError(f"over {MAX_RECORD_BYTES} bytes: left out")
                return json.loads(text)
            data = b.attempt(f"state/{rel}", read)
            if data is not None:
                b.add_object(f"state/{rel.removesuffix('.json')}.yaml", data)
    runs = state_root / "runs"
    folders = [p for p in runs.glob("*/*/*") if p.is_dir() and not p.is_symlink()] \
        if runs.is_dir() else []
    recent = _newest(folders, RECENT_RUNS)
    lines.append(f"runs: {len(folders)}, the logs of the newest {len(recent)} included")
    for folder in recent:
        logs = [p for p in folder.rglob("*.log") if not p.is_symlink() and not p.is_dir()]
        for path in sorted(logs)[:50]:
            rel = path.relative_to(state_root).as_posix()
            text = b.attempt(f"state/{rel}", lambda path=path: _tail(path, LOG_TAIL_BYTES))
            if text is not None:
                b.add(f"state/{rel}", "\n".join(text.splitlines()[-LOG_TAIL:]) + "\n")
    b.add("state/summary.txt", "\n".join(lines) + "\n")


def build(target: Path, *, lab_dir: Path | None, record: dict[str, Any] | None,
          kubeconfig: Path | None, namespaces: list[str],
          connect: Callable[[Path], Any] | None = None,
          state_root: Path | None = None) -> tuple[Path, list[str]]:
    """Write the bundle to `target`; returns it and what could not be collected.
    `state_root`: the local backend's state folder to include."""
    b = Bundle()
    if state_root is not None:
        b.attempt("the local state folder", lambda: local(b, state_root))
    if lab_dir is not None and record is not None:
        lab_files(b, lab_dir, record)
    kube = None
    if kubeconfig is not None:
        b.add("cluster/kubeconfig.txt", f"the lab's kubeconfig: {kubeconfig} (not included)\n")
        if connect is None:
            from lab.kube.client import connect as connect_
            connect = connect_
        kube = b.attempt("connect", lambda: connect(kubeconfig))
    versions(b, kube)
    if kube is not None:
        cluster(b, kube, namespaces)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    b.write(target, f"kflab-debug-{stamp}")
    return target, b.errors
