"""What does the recurring runs' scheduler cost `kflab ui` while it waits? Two `kflab ui`
servers side by side in one run, each in a process of its own on a state folder of its own:
one with no recurring run, one with --jobs enabled recurring runs (daily cron and hourly
interval, first due tomorrow) whose scheduler sleeps until then. Both idle for --seconds;
prints each process's CPU time over that window (from /proc), the ratio, and the load
average before and after.

Usage: python bench/kfp_scheduler_idle.py [--jobs 20] [--seconds 60]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SPEC = {"pipelineInfo": {"name": "p"}, "root": {"dag": {"tasks": {}}},
        "schemaVersion": "2.1.0", "sdkVersion": "kfp-2.16.0"}


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start(state: Path) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([sys.executable, "-m", "lab.cli", "--state", str(state), "ui",
                             "--no-browser", "--backend", "local"], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    proc.stdout.readline()  # the UI's URL
    host = proc.stdout.readline().split('host="', 1)[1].split('"', 1)[0]
    return proc, host


def post(host: str, path: str, body: dict) -> dict:
    req = urllib.request.Request(f"{host}/apis/v2beta1{path}", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(req) as resp:
        return json.loads(resp.read())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=60.0)
    args = parser.parse_args()
    load = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        quiet, _ = start(Path(tmp) / "none")
        busy, busy_host = start(Path(tmp) / "jobs")
        try:
            tomorrow = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 86400))
            for i in range(args.jobs):
                trigger = ({"cron_schedule": {"cron": "0 0 3 * * *", "start_time": tomorrow}}
                           if i % 2 else {"periodic_schedule": {"interval_second": 3600,
                                                                "start_time": tomorrow}})
                post(busy_host, "/recurringruns", {
                    "display_name": f"job-{i}", "pipeline_spec": SPEC, "mode": "ENABLE",
                    "max_concurrency": 1, "trigger": trigger})
            time.sleep(2)  # let both settle
            before = cpu_seconds(quiet.pid), cpu_seconds(busy.pid)
            time.sleep(args.seconds)
            after = cpu_seconds(quiet.pid), cpu_seconds(busy.pid)
        finally:
            for proc in (quiet, busy):
                proc.terminate()
                proc.wait(10)
    none_cpu, jobs_cpu = after[0] - before[0], after[1] - before[1]
    print(f"idle for {args.seconds:.0f} s, CPU time of each `kflab ui` process:")
    print(f"  no recurring run:        {none_cpu:.3f} s ({100 * none_cpu / args.seconds:.2f} % "
          "of a core)")
    print(f"  {args.jobs} recurring runs waiting: {jobs_cpu:.3f} s "
          f"({100 * jobs_cpu / args.seconds:.2f} % of a core)")
    print(f"  difference: {jobs_cpu - none_cpu:+.3f} s")
    print(f"load average before {load[0]:.2f}, after {os.getloadavg()[0]:.2f} "
          f"({os.cpu_count()} CPUs)")


if __name__ == "__main__":
    main()
