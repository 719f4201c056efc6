"""`kflab debug bundle`: everything a maintainer needs to see why a lab failed, in one
tar.gz the user can attach to an issue (in the spirit of `kind export logs`).

What goes in (each part best effort: what cannot be read is listed in errors.txt, and the
bundle is still written):
- the lab: its record (lab.json), its profile as lab.yaml, the Ansible log, verify.json;
- versions: kflab, Python, the pins (manifests/versions.yaml), the server and each node;
- the cluster, read through the lab's kubeconfig: `get -A` of kflab's kinds (YAML), the
  nodes, then for the kubeflow namespace and the lab namespace: events, each pod's
  description, each container's log (the last lines), Deployments.

Never in it: Secrets (not read at all), kubeconfigs (only their path), and any value that
looks like a credential is replaced by `<redacted>` before it is written: fields and
variables named like passwords, tokens and keys, bearer headers, JSON web tokens and PEM
private keys, anywhere in any file of the bundle.
"""

from __future__ import annotations

import io
import json
import platform
import re
import tarfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

REDACTED = "<redacted>"
LOG_TAIL = 2000  # lines of each container's log
_SECRET_NAME = r"[\w.-]*(?:password|passwd|secret|token|api[_-]?key|access[_-]?key|private[_-]?key|client[_-]?key(?:[_-]?data)?|credentials?)[\w.-]*"  # noqa: E501, S105 - a pattern, not a password
_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    # PEM private keys (whole block)
    (re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----",
                re.S), REDACTED),
    # JSON web tokens (ServiceAccount tokens)
    (re.compile(r"\beyJ[\w-]{8,}\.[\w-]{8,}\.[\w-]{8,}"), REDACTED),
    # Authorization headers
    (re.compile(r"(?i)\b(bearer|basic)\s+[\w.~+/=-]{8,}"), r"\1 " + REDACTED),
    # k3s join tokens: K10<hash>::server:<secret>
    (re.compile(r"\bK10[0-9a-f]{16,}::[\w.-]+:[\w.-]+"), REDACTED),
    # URLs with a password: scheme://user:PASSWORD@host (proxies, registries, git remotes)
    (re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^\s:/@]+:)[^\s/@]+@"), r"\1" + REDACTED + "@"),
    # CLI flags with the value after a space: --token SECRET, --password SECRET
    (re.compile(r"(?i)(--" + _SECRET_NAME + r")([ \t]+)(?!-)([^\s]+)"), r"\1\2" + REDACTED),
    # a registry's or docker config's `auth` (base64 of user:password), `identitytoken`
    (re.compile(r"""(?i)(["']?\bauth["']?[ \t]*[:=][ \t]*)("[^"\n]*"|'[^'\n]*'|[^\s,}\]\n]+)"""),
     r"\1" + REDACTED),
    # YAML / JSON / env / CLI: name: value, "name": "value", NAME=value, --name=value
    (re.compile(r"""(?ix)(?P<k>["']?(?:--)?""" + _SECRET_NAME + r"""["']?\s*[:=]\s*)
                    (?P<v>"[^"\n]*"|'[^'\n]*'|[^\s,}\]\n]+)"""), r"\g<k>" + REDACTED),
    # env lists: - name: SOME_TOKEN \n value: xxx
    (re.compile(r"""(?ix)(name["']?\s*[:=]\s*["']?""" + _SECRET_NAME +
                r"""["']?\s*[,\n]\s*["']?value["']?\s*[:=]\s*)("[^"\n]*"|'[^'\n]*'|[^\s,}\n]+)"""),
     r"\1" + REDACTED),
)


def redact(text: str) -> str:
    """Every credential-looking value of `text` replaced by <redacted>."""
    for pattern, repl in _PATTERNS:
        text = pattern.sub(repl, text)
    return text


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
        self.files[name] = redact(text)

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
    b.add("lab/lab.json", json.dumps(record, indent=2, default=str))
    if isinstance(record.get("profile"), dict):
        b.add("lab/lab.yaml", _dump(record["profile"]))
    for name in ("ansible.log", "verify.json"):
        path = lab_dir / name
        if path.is_file():
            b.add(f"lab/{name}", path.read_text(errors="replace"))
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
            b.add(f"cluster/get-{k.plural}.yaml", _dump([_strip_object(i) for i in items]))
    core, apps = client.CoreV1Api(kube.api), client.AppsV1Api(kube.api)
    t = kube.timeout
    nodes = b.attempt("nodes", lambda: core.list_node(_request_timeout=t))
    if nodes is not None:
        b.add("cluster/nodes.yaml", _dump(kube.api.sanitize_for_serialization(nodes.items)))
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
            b.add(f"{ns}/deployments.yaml", _dump(_items(
                kube.api.sanitize_for_serialization(deps.items))))
        pods = b.attempt(f"pods in {ns}", lambda ns=ns: core.list_namespaced_pod(
            ns, _request_timeout=t))
        for pod in _items(kube.api.sanitize_for_serialization(pods.items)) if pods else []:
            name = pod["metadata"]["name"]
            b.add(f"{ns}/pods/{name}.describe.txt", render(pod))
            spec = pod.get("spec") or {}
            for c in (spec.get("initContainers") or []) + (spec.get("containers") or []):
                text = b.attempt(f"logs of {ns}/{name} ({c['name']})",
                                 lambda ns=ns, name=name, c=c: core.read_namespaced_pod_log(
                                     name, ns, container=c["name"], tail_lines=LOG_TAIL,
                                     _request_timeout=t))
                if text is not None:
                    b.add(f"{ns}/pods/{name}.{c['name']}.log", str(text))


def build(target: Path, *, lab_dir: Path | None, record: dict[str, Any] | None,
          kubeconfig: Path | None, namespaces: list[str],
          connect: Callable[[Path], Any] | None = None) -> tuple[Path, list[str]]:
    """Write the bundle to `target`; returns it and what could not be collected."""
    b = Bundle()
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
