"""The provider seam: WHERE the cluster lives (modelled on kind's provider interface).

A provider makes the node exist (`create`), tells Ansible how to reach it (`inventory`),
says where the kubeconfig lands (`kubeconfig`) and which GPUs the node gets (`gpus`).
Everything inside the node (k3s, GPU stack, Kubeflow) is the playbooks' job, not theirs.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from lab.config import Profile

Say = Callable[[str], None]  # one line of progress for the user


@dataclass(frozen=True)
class Inventory:
    """How Ansible reaches the node: SSH (a VM) or a local connection (WSL, this host)."""

    connection: str = "ssh"  # ssh | local
    host: str = "127.0.0.1"
    port: int = 22
    user: str = ""
    key: str = ""
    become: bool = True
    ssh_args: tuple[str, ...] = ()

    def render(self, name: str) -> str:
        """An INI inventory with one host in group `lab`; every value is quoted."""
        hv = {"ansible_connection": self.connection, "ansible_become": str(self.become).lower()}
        if self.connection == "ssh":
            hv |= {"ansible_host": self.host, "ansible_port": str(self.port),
                   "ansible_user": self.user}
            if self.key:
                hv["ansible_ssh_private_key_file"] = self.key
            if self.ssh_args:
                hv["ansible_ssh_common_args"] = " ".join(self.ssh_args)
            hv["ansible_python_interpreter"] = "auto_silent"
        else:
            # kflab's own Python: it has the kubernetes library that k8s tasks run locally need.
            hv["ansible_python_interpreter"] = sys.executable
        pairs = " ".join(f"{k}={shlex.quote(v)}" for k, v in hv.items())
        return f"[lab]\n{name} {pairs}\n"


@dataclass(frozen=True)
class State:
    """What the provider sees: absent | running | stopped | unknown, and a line for humans."""

    state: str
    detail: str = ""


@dataclass(frozen=True)
class Gpu:
    name: str
    pci: str = ""
    memory: str = ""


@dataclass
class Capabilities:
    """Which playbook roles make sense on this provider."""

    provisions_node: bool = True  # node + k3s roles
    extra_vars: dict[str, object] = field(default_factory=dict)
    # The node is the user's own machine (host, wsl2): `kflab up` shows what it will change
    # there and asks first (or --yes).
    own_machine: bool = False


class Provider(Protocol):
    name: str
    capabilities: Capabilities

    def create(self, profile: Profile, say: Say) -> None:
        """Make the node exist and be reachable; re-running on an existing node is a no-op."""
        ...

    def stop(self, say: Say) -> None:
        """Stop the node, keeping its disk (`kflab down`)."""
        ...

    def delete(self, say: Say) -> None:
        """Remove the node and everything on it (`kflab down --destroy`)."""
        ...

    def status(self) -> State: ...

    def preflight(self) -> None:
        """Refuse (LabError) when this machine cannot host the node; `kflab up` runs it
        before anything is created, unless --force."""
        ...

    def require_tool(self) -> None:
        """Raise lab.errors.ToolMissing when the program this provider drives is missing."""
        ...

    def describe(self, profile: Profile) -> list[str]:
        """What `create` would do, in lines for `kflab up --dry-run`; changes nothing."""
        ...

    def reachable(self) -> bool:
        """The node exists now, so Ansible's check mode can look at it."""
        ...

    def inventory(self) -> Inventory | None:
        """None when there is no node to provision (an existing cluster)."""
        ...

    def kubeconfig(self) -> Path:
        """Where the lab's kubeconfig lives on this machine (written 0600)."""
        ...

    def gpus(self) -> list[Gpu]: ...

    def ssh_argv(self) -> list[str]:
        """argv for an interactive shell on the node (`kflab ssh`)."""
        ...


def ssh_argv_for(inv: Inventory) -> list[str]:
    argv = ["ssh", "-p", str(inv.port)]
    if inv.key:
        argv += ["-i", inv.key, "-o", "IdentitiesOnly=yes"]
    for arg in inv.ssh_args:
        argv += shlex.split(arg)
    return [*argv, f"{inv.user}@{inv.host}" if inv.user else inv.host]
