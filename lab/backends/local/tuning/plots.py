"""PNG plots of a finished experiment: objective per trial and parameter importance.

Drawn with matplotlib's Agg backend (no display needed); importance comes from Optuna's
mean-decrease-in-impurity evaluator over the completed trials (fANOVA gives similar
rankings but costs seconds per experiment). A plot that cannot be drawn (too few
completed trials) is skipped with the reason, never an error.

Each title names the experiment and its algorithm, so the plots of two experiments (random
search and TPE side by side) cannot be mistaken for each other. Trials without an objective
(failed, killed, early-stopped, metrics unavailable) are drawn as red markers
along the bottom edge, counted in the legend by state.

Importance is a random forest fitted to the completed trials. With few trials per parameter
its ranking is mostly noise. Measured with bench/importance_trials.py (random search, an
objective that depends on one parameter only, 100 seeds): with 2 parameters and 6 trials the
ignored parameter is ranked first in 17% of runs and gets 36% of the importance on average
(its true share is 0); at 10 trials per parameter it is never ranked first and its share is
down to 12% (9% with 3 parameters). That matches the usual rule of thumb of about 10
observations per predictor for a fitted model (Harrell, Regression Modeling Strategies,
sec. 4.4). Below MIN_TRIALS_PER_PARAMETER completed trials per parameter the plot says so in
red on its face.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

MIN_TRIALS_PER_PARAMETER = 10
NO_OBJECTIVE_COLOR = "tab:red"


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, path: Path) -> Path:
    fig.savefig(path, dpi=90)
    _pyplot().close(fig)
    return path


def objective_plot(path: Path, rows: list[tuple[int, float | None, str]], metric: str,
                   maximize: bool, experiment: str = "", algorithm: str = "") -> Path | None:
    """rows: (trial number, objective or None, state)."""
    fig = objective_figure(rows, metric, maximize, experiment, algorithm)
    return None if fig is None else _save(fig, path)


def objective_figure(rows: list[tuple[int, float | None, str]], metric: str, maximize: bool,
                     experiment: str = "", algorithm: str = "") -> Any:
    plt = _pyplot()
    done = [(n, v) for n, v, _ in rows if v is not None]
    missing = [(n, s) for n, v, s in rows if v is None]
    if not done and not missing:
        return None
    fig, ax = plt.subplots(figsize=(7, 4))
    if done:
        ax.scatter([n for n, _ in done], [v for _, v in done], label=metric, color="tab:blue",
                   zorder=3)
        best, run = [], None
        for _, v in done:
            run = v if run is None else (max(run, v) if maximize else min(run, v))
            best.append(run)
        ax.step([n for n, _ in done], best, where="post", color="tab:orange",
                label="best so far", zorder=2)
    if missing:
        # Along the bottom edge (x in trials, y in axes units): a failed trial has no value,
        # but it did run and cost time.
        ax.margins(y=0.12)
        for state, marker in _state_markers(missing):
            xs = [n for n, s in missing if s == state]
            ax.scatter(xs, [0.04] * len(xs), marker=marker, s=80, linewidths=2,
                       color=NO_OBJECTIVE_COLOR, label=f"{state}, no {metric} ({len(xs)})",
                       zorder=4, transform=ax.get_xaxis_transform())
            for n in xs:
                ax.axvline(n, color=NO_OBJECTIVE_COLOR, alpha=0.35, linestyle="--", zorder=1)
    ax.set_xlabel("trial (in start order)")
    ax.set_ylabel(metric)
    goal = "maximize" if maximize else "minimize"
    ax.set_title(_title(experiment, algorithm, f"{metric} per trial ({goal})"))
    ax.legend(loc="best", fontsize="small")
    fig.tight_layout()
    return fig


def _state_markers(missing: list[tuple[int, str]]) -> list[tuple[str, str]]:
    states = sorted({s for _, s in missing})
    markers = ["x", "X", "v", "s", "D", "P"]
    return [(s, markers[i % len(markers)]) for i, s in enumerate(states)]


def _title(experiment: str, algorithm: str, what: str) -> str:
    name = f"{experiment} ({algorithm})" if experiment and algorithm else experiment
    return f"{name}: {what}" if name else what


def importance_caveat(completed: int, parameters: int) -> str | None:
    """Why an importance ranking from `completed` trials over `parameters` is not to be
    trusted, or None when there are enough trials."""
    need = MIN_TRIALS_PER_PARAMETER * max(parameters, 1)
    if completed >= need:
        return None
    return (f"only {completed} completed trials for {parameters} parameter(s): under "
            f"{MIN_TRIALS_PER_PARAMETER} per parameter ({need}) this ranking is mostly noise")


def importance_plot(path: Path, study: Any, experiment: str = "",
                    algorithm: str = "") -> Path | None:
    fig = importance_figure(study, experiment, algorithm)
    return None if fig is None else _save(fig, path)


def importance_figure(study: Any, experiment: str = "", algorithm: str = "") -> Any:
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
    plt = _pyplot()
    names = list(scores)[::-1]
    caveat = importance_caveat(len(complete), len(names))
    fig, ax = plt.subplots(figsize=(7, 0.5 * len(names) + (2.3 if caveat else 1.5)))
    ax.barh(names, [scores[n] for n in names],
            color="tab:gray" if caveat else "tab:green", hatch="//" if caveat else None)
    ax.set_xlabel("importance (mean decrease in impurity of a random forest)")
    ax.set_title(_title(experiment, algorithm,
                        f"parameter importance ({len(complete)} completed trials)"))
    if caveat:
        fig.text(0.5, 0.01, "Caveat: " + caveat, ha="center", va="bottom", color="tab:red",
                 fontsize="small", wrap=True)
        fig.tight_layout(rect=(0, 0.1, 1, 1))
    else:
        fig.tight_layout()
    return fig
