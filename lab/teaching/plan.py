"""How big a server a class of N needs: the lab profile once, plus N students' peak workloads.

Per lab: CPU and memory = the components' summed requests (footprint.py, rendered from the
pinned manifests) + k3s itself + N x the lab's peak requests (sizing.py), and for labs that
run pipelines N x PIPELINE_PODS task pods in KFP's namespace; disk = the lab VM's default
disk (k3s, every image) + N x the lab's ephemeral storage. Requests are what the scheduler
counts: a lab "fits" when every pod can be scheduled at once, not when it runs fast.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from lab.components.footprint import Footprint, quantity
from lab.scenarios.model import Scenario
from lab.teaching.sizing import DEFAULT_REQUEST, PIPELINE_PODS, Need, lab_need

GIB = Decimal(2**30)
K3S_CPU, K3S_MEMORY = Decimal("0.5"), Decimal("0.5") * GIB  # docs/components.md: ~0.5 GiB
BASE_DISK = Decimal(40) * GIB  # the lab profile's default disk (lab.yaml `disk: 40`)


@dataclass
class Server:
    cpus: Decimal
    memory: Decimal  # bytes
    disk: Decimal    # bytes


@dataclass
class Row:
    lab: str
    cpu: Decimal
    memory: Decimal
    disk: Decimal
    short: list[str]         # which resources are short ("cpu", "memory", "disk")
    why_not: str | None = None  # the lab cannot run on a cluster at all
    gpus: int = 0  # GPUs it needs at once (a GPU lab: one per student)

    @property
    def fits(self) -> bool:
        return self.why_not is None and not self.short


def per_student(need: Need) -> tuple[Decimal, Decimal, Decimal]:
    cpu, mem, disk = need.cpu, need.memory, need.disk
    if need.pipelines:
        cpu += PIPELINE_PODS * quantity(DEFAULT_REQUEST["cpu"])
        mem += PIPELINE_PODS * quantity(DEFAULT_REQUEST["memory"])
        disk += PIPELINE_PODS * quantity(DEFAULT_REQUEST["ephemeral-storage"])
    return cpu, mem, disk


def plan(students: int, scenarios: list[Scenario], components: Footprint,
         server: Server) -> tuple[Row, list[Row]]:
    """(the base row: components + k3s, one row per lab for `students` students)."""
    base = Row("(lab profile + k3s)", components.cpu_requests + K3S_CPU,
               components.memory_requests + K3S_MEMORY, BASE_DISK, [])
    rows = []
    for s in scenarios:
        why = s.why_not("cluster")
        cpu, mem, disk = per_student(lab_need(s))
        row = Row(s.id, base.cpu + students * cpu, base.memory + students * mem,
                  base.disk + students * disk, [], why,
                  students if "gpu" in s.requires else 0)
        row.short = [n for n, need, have in (("cpu", row.cpu, server.cpus),
                                             ("memory", row.memory, server.memory),
                                             ("disk", row.disk, server.disk)) if need > have]
        rows.append(row)
    return base, rows


def this_server(state: object, cpus: float | None, memory: float | None,
                disk: float | None) -> Server:
    """The server given on the command line, each part missing measured on this machine."""
    import os
    import shutil
    from pathlib import Path

    from lab.doctor.rows import GIB as DGIB

    if memory is None:
        with open("/proc/meminfo") as fh:
            kib = next(int(line.split()[1]) for line in fh if line.startswith("MemTotal:"))
        memory = kib * 1024 / DGIB
    if disk is None:
        where = Path(str(state))
        while not where.exists():
            where = where.parent
        disk = shutil.disk_usage(where).free / DGIB
    return Server(Decimal(str(cpus if cpus is not None else os.cpu_count() or 1)),
                  Decimal(str(memory)) * GIB, Decimal(str(disk)) * GIB)
