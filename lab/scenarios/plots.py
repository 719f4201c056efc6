"""The Katib plots a run drew, as reports and grades carry them: read from a state folder's
Experiments (the local backend names each PNG in an annotation), and named in a grade folder.

Both the HTML reports (htmlreport.py) and the grades (grading.py, gradebook.py) read plots
here, so neither needs the other for them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lab import limits
from lab.errors import InputError
from lab.scenarios.handin import slug
from lab.yamlio import read_bytes, read_json

MAX_PLOT_BYTES = 16 * 1024 * 1024  # a Katib plot the local backend draws is ~50 kB

PLOTS_ANNOTATION = "kflab.dev/plots"  # written by the local backend's Katib engine


def experiment_plots(state_root: Path) -> list[dict[str, Any]]:
    """The PNG plots the local backend drew for the Experiments in a state folder
    ({experiment, name, png}), read now: the sandbox that holds them is removed by the next
    run. Records are read, never changed; only PNG files inside the state folder are read
    (the annotation may come from a student's hand-in)."""
    plots: list[dict[str, Any]] = []
    root = state_root.resolve()
    for record in sorted((root / "resources" / "experiments").glob("*/*.json")):
        try:
            exp = read_json(record, limit=limits.MAX_RECORD_BYTES)
            meta = exp.get("metadata") or {}
            raws = str((meta.get("annotations") or {}).get(PLOTS_ANNOTATION, "")).split(",")
        except (InputError, AttributeError):
            continue
        for raw in filter(None, raws[:100]):
            try:
                path = Path(raw).resolve()
                data = read_bytes(path, limit=MAX_PLOT_BYTES) \
                    if path.is_relative_to(root) else b""
            except (OSError, ValueError, InputError):
                data = b""
            if data.startswith(b"\x89PNG"):
                plots.append({"experiment": str(meta.get("name", "")), "name": path.name,
                              "png": data})
    return plots


def plot_file(plot: dict[str, Any]) -> str:
    """The file name of a plot in a grade folder (names come from a hand-in: made safe)."""
    return slug(f"{plot.get('experiment')}-{plot.get('name')}")
