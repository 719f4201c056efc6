"""Lab checks that involve timing check a relation that holds on a busy machine (issue 20):
dask-grid-search checks that fits overlapped on two workers (from Dask's task stream), not
that the search got faster; the speed-up is reported with the load average beside it."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

LAB = Path(__file__).resolve().parents[2] / "scenarios" / "dask-grid-search"


def _compare():
    spec = importlib.util.spec_from_file_location("lab_compare", LAB / "assets" / "compare.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_overlapping_fits_on_two_workers_count_as_concurrent() -> None:
    got = _compare().concurrency([["tcp://127.0.0.1:1", 0.0, 2.0],
                                  ["tcp://127.0.0.1:2", 1.0, 3.0],
                                  ["tcp://127.0.0.1:1", 2.0, 4.0]])
    assert got == {"tasks": 3, "workers_used": 2, "max_concurrent_workers": 2}


def test_two_fits_at_once_on_one_worker_are_not_two_workers_at_once() -> None:
    got = _compare().concurrency([["w1", 0.0, 2.0], ["w1", 1.0, 3.0], ["w2", 3.0, 4.0]])
    assert got == {"tasks": 3, "workers_used": 2, "max_concurrent_workers": 1}


def test_fits_one_after_another_are_not_concurrent() -> None:
    """Touching intervals (one stops as the next starts): no overlap."""
    got = _compare().concurrency([["tcp://127.0.0.1:1", 0.0, 1.0],
                                  ["tcp://127.0.0.1:2", 1.0, 2.0],
                                  ["tcp://127.0.0.1:1", 2.0, 3.0]])
    assert got == {"tasks": 3, "workers_used": 2, "max_concurrent_workers": 1}


def test_the_lab_records_dasks_compute_intervals() -> None:
    """grid_search.py keeps the compute intervals of Dask's task stream records (transfers
    and other actions are not fits). Its file is read as text: importing it loads Dask and
    scikit-learn (a minute on a busy machine)."""
    text = (LAB / "solutions" / "grid_search.py").read_text()
    assert "with get_task_stream(client) as stream:" in text
    assert 'ss.get("action") == "compute"' in text
    assert (LAB / "assets" / "grid_search.py").read_text().count("fit_intervals") == \
        text.count("fit_intervals")


def _result(backend: str, **extra) -> dict:
    base = {"backend": backend, "candidates": 12, "splits": 5, "best_params": {"a": 1},
            "best_score": 0.9, "mean_test_scores": [0.9], "fit_seconds": 4.0, "workers": 2,
            "cores": 2, "sequential_seconds": 4.0, "startup_seconds": 1.5}
    return {**base, **extra}


@pytest.mark.parametrize(("runs", "expected"), [
    ([[["w1", 0.0, 2.0], ["w2", 1.0, 3.0]]], (2, 2)),
    ([[["w1", 0.0, 1.0], ["w1", 1.0, 2.0]]], (1, 1)),
])
def test_compare_reports_concurrency_and_load_not_a_speed_verdict(
        tmp_path: Path, runs: list[list], expected: tuple[int, int]) -> None:
    """Slower than sequential (a busy machine: speed-up 0.8) yet concurrent: comparison.json
    carries what the check reads (workers_used, max_workers_at_once) and the load average."""
    (tmp_path / "seq.json").write_text(json.dumps(_result("sequential")))
    (tmp_path / "dask.json").write_text(json.dumps(_result(
        "dask", fit_seconds=5.0, fit_intervals=runs, load_average=[3.9, 3.5, 2.0])))
    out = subprocess.run([sys.executable, str(LAB / "assets" / "compare.py"), "--sequential",
                          "seq.json", "--dask", "dask.json"], cwd=tmp_path, capture_output=True,
                         text=True, check=True).stdout
    report = json.loads((tmp_path / "comparison.json").read_text())
    assert (report["workers_used"], report["max_workers_at_once"]) == expected
    assert report["speedup"] == 0.8 and report["load_average"] == [3.9, 3.5, 2.0]
    assert "load average 3.90" in out
