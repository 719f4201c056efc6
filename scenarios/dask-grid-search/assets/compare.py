"""Compare the sequential search with the Dask one: same answer? how much faster?

Usage: python compare.py [--sequential result-sequential.json] [--dask result-dask.json]
Writes comparison.json.
"""

import argparse
import json
from pathlib import Path


def concurrency(intervals: list[list]) -> dict:
    """[worker, start, stop] per computed task -> the workers that computed, and the most
    workers computing at one moment (their intervals overlap in time; one machine's clock)."""
    events = sorted([(start, 1, w) for w, start, _ in intervals] +
                    [(stop, -1, w) for w, _, stop in intervals])
    running: dict[str, int] = {}
    peak = 0
    for _, step, worker in events:  # at equal times a stop (-1) sorts first: touching is not
        running[worker] = running.get(worker, 0) + step  # overlap
        peak = max(peak, sum(1 for n in running.values() if n > 0))
    return {"tasks": len(intervals), "workers_used": len({w for w, _, _ in intervals}),
            "max_concurrent_workers": peak}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sequential", default="result-sequential.json")
    ap.add_argument("--dask", default="result-dask.json")
    ap.add_argument("--out", default="comparison.json")
    args = ap.parse_args()
    seq = json.loads(Path(args.sequential).read_text())
    dsk = json.loads(Path(args.dask).read_text())
    if (seq["backend"], dsk["backend"]) != ("sequential", "dask"):
        raise SystemExit(f"expected a sequential and a dask result, got {seq['backend']} and "
                         f"{dsk['backend']}")
    runs = [concurrency(r) for r in dsk.get("fit_intervals", [])]
    report = {
        "same_grid": (seq["candidates"], seq["splits"]) == (dsk["candidates"], dsk["splits"]),
        "same_best_params": seq["best_params"] == dsk["best_params"],
        "same_best_score": seq["best_score"] == dsk["best_score"],
        "same_scores_everywhere": seq["mean_test_scores"] == dsk["mean_test_scores"],
        "workers": dsk["workers"],
        "cores": dsk["cores"],
        # Parallelism, whatever else the machine does: in some Dask run, fits computed on 2+
        # workers at the same moment (Dask's task stream).
        "workers_used": max((r["workers_used"] for r in runs), default=0),
        "max_workers_at_once": max((r["max_concurrent_workers"] for r in runs), default=0),
        # both timed in the Dask run, taking turns: the same machine at the same moment; a
        # report, not a check: it depends on what else runs (the load average says how much)
        "speedup": round(dsk["sequential_seconds"] / dsk["fit_seconds"], 3),
        "load_average": dsk.get("load_average"),
        "sequential": {k: seq[k] for k in ("best_params", "best_score", "fit_seconds")},
        "dask": {k: dsk[k] for k in ("best_params", "best_score", "fit_seconds",
                                     "sequential_seconds", "startup_seconds")},
    }
    print(f"{'':<28}{'fit s':>8}  best accuracy  best parameters")
    for name, r, seconds in (("sequential (step 1)", seq, seq["fit_seconds"]),
                             ("sequential (between Dask)", dsk, dsk["sequential_seconds"]),
                             ("dask", dsk, dsk["fit_seconds"])):
        print(f"{name:<28}{seconds:>8.2f}  {r['best_score']:>13.4f}  {r['best_params']}")
    print(f"same best parameters: {report['same_best_params']}, same best score: "
          f"{report['same_best_score']}, same score for every candidate: "
          f"{report['same_scores_everywhere']}")
    print(f"fits ran on {report['workers_used']} workers, {report['max_workers_at_once']} of "
          "them computing at the same moment")
    load = report["load_average"]
    print(f"speed-up with {report['workers']} Dask workers on {report['cores']} cores: "
          f"{report['speedup']:.2f}x (cluster start-up, {dsk['startup_seconds']} s, not counted)"
          + (f"; load average {load[0]:.2f} (1 min) while it ran: with other programs busy "
             "the cores are shared and the speed-up shrinks" if load else ""))
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
