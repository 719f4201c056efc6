"""Is a container's server ready, seen through its port published on 127.0.0.1?

As the kubelet's prober judges a readinessProbe (pkg/probe/http: a status from 200 to 399;
pkg/probe/tcp: a connection), through the published port. Without a probe, any HTTP answer
(even 404: a server is there). A connection alone proves nothing through a published port:
Docker's userland proxy and rootless Podman's port forwarder accept on the host port before
the container listens, and close the connection at once when nothing listens behind them;
so a tcpSocket probe waits that moment for the close.
"""

from __future__ import annotations

import socket
import urllib.error
import urllib.request
from typing import Any

from lab.backends.local.procs import LOOPBACK


def answers(port: int, probe: dict[str, Any], prefix: str = "") -> bool:
    """Whether the server behind 127.0.0.1:`port` passes `probe` (a readinessProbe), or
    answers HTTP at `prefix` when there is none."""
    http = probe.get("httpGet") if isinstance(probe.get("httpGet"), dict) else None
    if http is None and isinstance(probe.get("tcpSocket"), dict):
        return _holds(port)
    path = str((http or {}).get("path") or f"{prefix}/")
    try:
        with urllib.request.urlopen(f"http://{LOOPBACK}:{port}{path}", timeout=2) as resp:
            return 200 <= resp.status < 400
    except urllib.error.HTTPError:
        return http is None  # no probe: any HTTP answer will do
    except (OSError, ValueError):
        return False


def _holds(port: int) -> bool:
    """A TCP connection that the far end keeps open."""
    try:
        with socket.create_connection((LOOPBACK, port), timeout=1) as conn:
            conn.settimeout(0.3)
            try:
                return conn.recv(1) != b""
            except TimeoutError:
                return True
    except OSError:
        return False
