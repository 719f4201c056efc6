"""PNG plots of a finished experiment: objective per trial and parameter importance.

Drawn with matplotlib's Agg backend (no display needed); importance comes from Optuna's
mean-decrease-in-impurity evaluator over the completed trials (fANOVA gives similar
rankings but costs seconds per experiment). A plot that cannot be drawn (too few
completed trials) is skipped with the reason, never an error.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def objective_plot(path: Path, rows: list[tuple[int, float | None, str]], metric: str,
                   maximize: bool) -> Path | None:
    """rows: (trial number, objective or None, state)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    done = [(n, v) for n, v, _ in rows if v is not None]
    if not done:
        return None
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.scatter([n for n, _ in done], [v for _, v in done], label=metric, color="tab:blue")
    best, run = [], None
    for _, v in done:
        run = v if run is None else (max(run, v) if maximize else min(run, v))
        best.append(run)
    ax.step([n for n, _ in done], best, where="post", color="tab:orange", label="best so far")
    failed = [n for n, v, s in rows if v is None]
    for n in failed:
        ax.axvline(n, color="tab:red", alpha=0.2)
    ax.set_xlabel("trial (in start order; red lines: no objective)")
    ax.set_ylabel(metric)
    ax.set_title(f"{metric} per trial ({'maximize' if maximize else 'minimize'})")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def importance_plot(path: Path, study: Any) -> Path | None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import optuna

    complete = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    if len(complete) < 2:
        return None
    try:
        scores = optuna.importance.get_param_importances(
            study, evaluator=optuna.importance.MeanDecreaseImpurityImportanceEvaluator(seed=0))
    except (RuntimeError, ValueError):
        return None
    if not scores:
        return None
    names = list(scores)[::-1]
    fig, ax = plt.subplots(figsize=(7, 0.5 * len(names) + 1.5))
    ax.barh(names, [scores[n] for n in names], color="tab:green")
    ax.set_xlabel("importance (mean decrease in impurity of a random forest)")
    ax.set_title("parameter importance")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path
