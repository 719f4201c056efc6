"""The dask-grid-search lab starts a Dask cluster from its own script (not from kflab): the
reference solution's cluster must listen on loopback only and leave no process behind
(docs/security.md, "What listens where")."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

SOLUTION = Path(__file__).resolve().parents[2] / "scenarios/dask-grid-search/solutions"

CHILD = textwrap.dedent("""
    import json, sys
    import psutil
    sys.path.insert(0, sys.argv[1])
    from grid_search import dask_cluster

    if __name__ == "__main__":
        me = psutil.Process()
        with dask_cluster(2, []) as client:
            address = client.scheduler.address
            tree = [me, *me.children(recursive=True)]
            pids = {p.pid for p in tree}
            listening = [list(c.laddr) for c in psutil.net_connections("inet")
                         if c.pid in pids and c.status == psutil.CONN_LISTEN]
        print(json.dumps({"address": address, "pids": sorted(pids - {me.pid}),
                          "listening": listening}))
""")


@pytest.mark.slow
def test_the_labs_dask_cluster_listens_on_loopback_only_and_stops_with_its_block() -> None:
    pytest.importorskip("distributed")
    out = subprocess.run([sys.executable, "-c", CHILD, str(SOLUTION)], capture_output=True,
                         text=True, timeout=180, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["address"].startswith("tcp://127.0.0.1:")
    # scheduler, its HTTP endpoint, two workers and their nannies: every one on loopback
    assert len(seen["listening"]) >= 5, seen
    assert {ip for ip, _ in seen["listening"]} == {"127.0.0.1"}, seen
    assert len(seen["pids"]) >= 2  # the two worker processes were there...
    deadline = time.monotonic() + 10
    while (left := _alive(seen["pids"])) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not left, f"still running after the script ended: {left}"  # ...and are gone


def _alive(pids: list[int]) -> list[int]:
    import psutil

    alive = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                alive.append(pid)
        except psutil.NoSuchProcess:
            pass
    return alive
