"""Listening TCP sockets of real processes, read from /proc (what `ss -ltnp` shows), seen
from each process's own network namespace."""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

import psutil

LISTEN = "0A"


@dataclass(frozen=True)
class Listener:
    pid: int
    address: str
    port: int
    netns: str  # the network namespace of the process (e.g. net:[4026531840])
    interfaces: tuple[str, ...]  # the interfaces that exist in that namespace

    @property
    def loopback(self) -> bool:
        return ipaddress.ip_address(self.address).is_loopback


def _address(hex_addr: str) -> str:
    raw = bytes.fromhex(hex_addr)
    if len(raw) == 4:
        return str(ipaddress.IPv4Address(raw[::-1]))
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))
    addr = ipaddress.IPv6Address(words)
    return str(addr.ipv4_mapped or addr)


def listeners(pid: int) -> list[Listener]:
    """TCP sockets in LISTEN state that process `pid` holds (empty once it is gone)."""
    try:
        inodes = {os.readlink(f"/proc/{pid}/fd/{fd}")[8:-1]
                  for fd in os.listdir(f"/proc/{pid}/fd")
                  if os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:[")}
        netns = os.readlink(f"/proc/{pid}/ns/net")
        ifaces = tuple(interfaces(pid))
        tables = [Path(f"/proc/{pid}/net/{t}").read_text() for t in ("tcp", "tcp6")]
    except OSError:
        return []
    out = []
    for table in tables:
        for line in table.splitlines()[1:]:
            f = line.split()
            if f[3] == LISTEN and f[9] in inodes:
                addr, port = f[1].rsplit(":", 1)
                out.append(Listener(pid, _address(addr), int(port, 16), netns, ifaces))
    return out


def interfaces(pid: int) -> list[str]:
    """Network interfaces visible in the namespace of `pid` (from /proc/PID/net/dev)."""
    rows = Path(f"/proc/{pid}/net/dev").read_text().splitlines()[2:]
    return [r.split(":", 1)[0].strip() for r in rows if ":" in r]


def tree(pid: int) -> list[int]:
    """`pid` and every descendant alive now, whatever process group or session they use."""
    try:
        root = psutil.Process(pid)
        return [pid, *(c.pid for c in root.children(recursive=True))]
    except psutil.Error:
        return []


def reachable_beyond_loopback(found: Listener) -> bool:
    """A listener bound to a non-loopback address in a namespace that has any interface but
    `lo` (a wildcard bind in a namespace holding only `lo` is reachable through lo only)."""
    return not found.loopback and found.interfaces != ("lo",)
