"""A cluster that already exists, named by a kubeconfig context.

Nothing is provisioned on its nodes (node, k3s and gpu roles are skipped); components are
optional. kflab keeps its own flattened copy of that one context (0600) so that the rest of
kflab, and the kubeflow role, never touch the user's kubeconfig file.

The kubeflow and verify roles run on this machine, as the user (no become): with
kflab_provider=existing the playbooks' group_vars make them call `kubectl --kubeconfig
<that copy>` and work in <lab folder>/work instead of the node's /var/lib/kflab.
"""

from __future__ import annotations

import os
from pathlib import Path

import yaml

from lab.config import Profile
from lab.errors import LabError
from lab.providers.base import Capabilities, Gpu, Inventory, Say, State
from lab.state import remove
from lab.yamlio import load_file


def extract_context(source: Path, context: str) -> dict:
    """A self-contained kubeconfig holding only `context` ("" = the current one)."""
    doc = load_file(source, duplicates="keep", hint="set `kubeconfig` in lab.yaml")
    data = doc.data if isinstance(doc.data, dict) else {}

    def entries(key: str) -> list[dict]:
        items = data.get(key)
        return [i for i in items if isinstance(i, dict)] if isinstance(items, list) else []

    name = context or data.get("current-context") or ""
    ctx = next((c for c in entries("contexts") if c.get("name") == name), None)
    if ctx is None or not isinstance(ctx.get("context"), dict):
        names = [str(c.get("name")) for c in entries("contexts")]
        raise LabError(f"context {name!r} is not in {source}",
                       hint=f"set `context` in lab.yaml to one of: {', '.join(names) or 'none'}")
    cluster = next((c for c in entries("clusters")
                    if c.get("name") == ctx["context"].get("cluster")), None)
    user = next((u for u in entries("users")
                 if u.get("name") == ctx["context"].get("user")), None)
    if cluster is None:
        raise LabError(f"context {name!r} names a cluster that {source} does not define")
    base = source.parent
    for section, keys in ((cluster.get("cluster", {}), ("certificate-authority",)),
                          ((user or {}).get("user", {}),
                           ("client-certificate", "client-key", "tokenFile"))):
        for key in keys:  # relative paths are relative to the kubeconfig's folder
            if key in section and not os.path.isabs(section[key]):
                section[key] = str((base / section[key]).resolve())
    return {"apiVersion": "v1", "kind": "Config", "current-context": name,
            "contexts": [ctx], "clusters": [cluster], "users": [user] if user else [],
            "preferences": {}}


def write_private(path: Path, text: str) -> None:
    """Write a credential file readable by its owner only, from the first byte on."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    os.chmod(path, 0o600)


class ExistingProvider:
    name = "existing"
    capabilities = Capabilities(provisions_node=False)

    def __init__(self, profile: Profile, workdir: Path) -> None:
        self.profile = profile
        self.workdir = workdir

    def create(self, profile: Profile, say: Say) -> None:
        self.profile = profile
        source = Path(os.path.expanduser(profile.kubeconfig))
        data = extract_context(source, profile.context)
        write_private(self.kubeconfig(), yaml.safe_dump(data, sort_keys=False))
        say(f"existing cluster: context {data['current-context']} from {source}")

    def stop(self, say: Say) -> None:
        say("existing cluster: left running (kflab does not own it)")

    def delete(self, say: Say) -> None:
        say("existing cluster: left in place; kflab forgets its copy of the kubeconfig")
        remove(self.workdir, self.kubeconfig())

    def require_tool(self) -> None:
        """Nothing to drive: Ansible and kubectl come with kflab."""

    def preflight(self) -> None:
        """Nothing beyond `kflab doctor`'s rows, which `kflab up` has already judged."""

    def describe(self, profile: Profile) -> list[str]:
        source = os.path.expanduser(profile.kubeconfig)
        return [f"copies context {profile.context or '(current)'} of {source} to "
                f"{self.kubeconfig()} (0600); your file is not changed",
                "no node is touched: only the components are applied to the cluster"]

    def reachable(self) -> bool:
        return self.kubeconfig().exists()

    def status(self) -> State:
        ok = self.kubeconfig().exists()
        return State("running" if ok else "absent",
                     f"existing cluster ({'configured' if ok else 'run `kflab up`'})")

    def inventory(self) -> Inventory | None:
        # The kubeflow and verify roles run against the API from this machine, as the user.
        return Inventory(connection="local", host="localhost", become=False)

    def kubeconfig(self) -> Path:
        return self.workdir / "kubeconfig"

    def gpus(self) -> list[Gpu]:
        return []  # `kflab status` reports allocatable GPUs from the nodes themselves

    def ssh_argv(self) -> list[str]:
        raise LabError("an existing cluster has no node kflab can open a shell on",
                       hint="use kubectl exec or your cluster's own access")
