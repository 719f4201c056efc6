"""Grid search over a scikit-learn Pipeline -- the grid of the grid-search-pipeline lab:
2 vectorisers x 2 normalisers x 3 naive-Bayes alphas, 5-fold cross-validation, 60 fits --
run through joblib, either one fit after another in this process or on a Dask cluster.

Usage: python grid_search.py --backend sequential|dask [--workers 2] [--repeat 3] --out FILE

The search is timed --repeat times and the fastest is kept (the first run of a fresh
process or cluster also pays for imports). With --backend dask, the sequential search is
timed again between the Dask runs, so that both are timed on the machine as it is at that
moment (other programs come and go); starting the Dask cluster is timed apart. Dask's task
stream records when each task (a batch of fits) ran on which worker; compare.py finds how
many workers ran fits and how many ran at the same time -- what parallelism is, whatever
else the machine is doing -- and prints the load average beside the speed-up.
"""

import argparse
import contextlib
import csv
import importlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import joblib
from dask.distributed import Client, LocalCluster, get_task_stream
from sklearn.feature_extraction.text import CountVectorizer, TfidfVectorizer
from sklearn.model_selection import GridSearchCV, StratifiedKFold
from sklearn.naive_bayes import MultinomialNB
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import Normalizer

VECTORISERS = {"count": CountVectorizer(), "tfidf": TfidfVectorizer(norm=None)}
NORMALISERS = {"none": "passthrough", "l2": Normalizer(norm="l2")}
WARM_UP = ["sklearn.model_selection", "sklearn.pipeline", "sklearn.feature_extraction.text",
           "sklearn.naive_bayes"]
GRID = {"vectoriser": list(VECTORISERS.values()),
        "normaliser": list(NORMALISERS.values()),
        "classifier__alpha": [0.01, 0.3, 3.0]}


def name_of(value: object) -> object:
    """A grid value as text for the JSON report (the estimator's name in this file)."""
    for names in (VECTORISERS, NORMALISERS):
        for name, candidate in names.items():
            if value is candidate:
                return name
    return value


def make_search(n_jobs: int) -> GridSearchCV:
    pipe = Pipeline([("vectoriser", CountVectorizer()), ("normaliser", "passthrough"),
                     ("classifier", MultinomialNB())])
    # pre_dispatch="all": hand every fit to the backend at once and let it balance them
    # (joblib's default keeps only 2 x n_jobs in flight); no effect when n_jobs is 1.
    return GridSearchCV(pipe, GRID, cv=StratifiedKFold(n_splits=5), n_jobs=n_jobs,
                        pre_dispatch="all")


@contextlib.contextmanager
def dask_cluster(workers: int, scatter: list) -> Iterator[Client]:
    """Start a Dask cluster on this machine -- a scheduler and `workers` worker processes
    with one thread each, listening on 127.0.0.1 only, no dashboard -- and a Client
    connected to it; make it joblib's backend, scattering `scatter` (the data every fit
    needs) so that it travels to each worker once, not with each of the 60 fits. Yield the
    Client; stop everything on the way out."""
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                      host="127.0.0.1", dashboard_address=None) as cluster, \
            Client(cluster) as client, \
            joblib.parallel_backend("dask", scatter=scatter):
        yield client


def timed_search(texts: list[str], labels: list[int], dask: bool) -> tuple[GridSearchCV, float]:
    """One search, timed: on the active joblib backend (Dask, inside dask_cluster()), or in
    this process, one fit after another."""
    search = make_search(-1 if dask else 1)
    t0 = time.perf_counter()
    if dask:
        search.fit(texts, labels)
    else:
        with joblib.parallel_backend("sequential"):  # whatever backend is active around it
            search.fit(texts, labels)
    return search, round(time.perf_counter() - t0, 3)


def fit_intervals(tasks: list[dict]) -> list[list]:
    """From Dask's task stream: [worker, start, stop] of each task's computation (a batch of
    fits), on the clock of this machine; compare.py finds how many overlapped."""
    return [[task.get("worker"), ss["start"], ss["stop"]] for task in tasks
            for ss in task.get("startstops", ()) if ss.get("action") == "compute"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", choices=["sequential", "dask"], required=True)
    ap.add_argument("--workers", type=int, default=2, help="Dask worker processes")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--data", default="data/reviews.csv")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    with open(args.data, newline="") as fh:
        rows = list(csv.DictReader(fh))
    texts, labels = [r["text"] for r in rows], [int(r["label"]) for r in rows]

    startup, address, times, sequential, runs = None, None, [], [], []
    if args.backend == "sequential":
        for _ in range(args.repeat):
            search, seconds = timed_search(texts, labels, dask=False)
            times.append(seconds)
        sequential = times
    else:
        t0 = time.perf_counter()
        with dask_cluster(args.workers, [texts, labels]) as client:
            startup = round(time.perf_counter() - t0, 3)
            address = client.scheduler.address
            for module in WARM_UP:  # the workers load scikit-learn before the clock runs
                client.run(importlib.import_module, module)
            for _ in range(args.repeat):  # sequential, Dask, sequential, Dask, ...
                sequential.append(timed_search(texts, labels, dask=False)[1])
                with get_task_stream(client) as stream:
                    search, seconds = timed_search(texts, labels, dask=True)
                times.append(seconds)
                runs.append(fit_intervals(stream.data))

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    result = {
        "backend": args.backend,
        "workers": args.workers if args.backend == "dask" else 1,
        "scheduler": address,
        "cores": cores,
        "rows": len(texts),
        "candidates": len(search.cv_results_["params"]),
        "splits": search.n_splits_,
        "best_params": {k: name_of(v) for k, v in sorted(search.best_params_.items())},
        "best_score": float(search.best_score_),
        "mean_test_scores": [float(s) for s in search.cv_results_["mean_test_score"]],
        "fit_seconds": min(times),
        "fit_seconds_all": times,
        "sequential_seconds": min(sequential),
        "sequential_seconds_all": sequential,
        "startup_seconds": startup,
        # per Dask run: when each batch of fits computed, on which worker
        "fit_intervals": runs,
        "load_average": [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg")
        else None,
    }
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(f"{args.backend}: {result['candidates']} candidates x {result['splits']} folds, "
          f"best {result['best_params']} accuracy {result['best_score']:.4f}, "
          f"fit {result['fit_seconds']:.2f} s (runs: {times})"
          + (f"; sequential between them {min(sequential):.2f} s (runs: {sequential}), "
             f"cluster start {startup:.2f} s" if startup is not None else ""))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
