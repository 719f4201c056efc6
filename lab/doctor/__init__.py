"""Host preflight (`kflab doctor`, and `kflab up` before it starts): can this machine run the
lab, and what is missing? One report of rows (rows.py) against what the lab profile needs;
each platform has its own module with the same `diagnose(needs, host)`: linux.py (WSL 2
included) and macos.py.
"""

from __future__ import annotations

from lab.doctor import linux, macos
from lab.doctor.rows import Host, Needs, Row


def diagnose(needs: Needs | None = None, host: Host | None = None) -> list[Row]:
    """Every row for this host (or `host`, a stand-in) against `needs` (default: Needs())."""
    needs, host = needs or Needs(), host or Host()
    platform = macos if host.system == "Darwin" else linux
    return platform.diagnose(needs, host)
