"""Katib plots: each names its experiment and algorithm, trials without an objective are
drawn and counted in the legend, and importance from too few trials says it is noise."""

from __future__ import annotations

from pathlib import Path

import pytest

plots = pytest.importorskip("lab.backends.local.tuning.plots")
optuna = pytest.importorskip("optuna")


def _legend(fig) -> list[str]:
    return [t.get_text() for t in fig.axes[0].get_legend().get_texts()]


def test_objective_plot_names_the_experiment_and_shows_failed_trials(tmp_path: Path) -> None:
    rows = [(0, 0.91, "Succeeded"), (1, None, "Failed"), (2, 0.95, "Succeeded"),
            (3, None, "Failed"), (4, None, "EarlyStopped")]
    fig = plots.objective_figure(rows, "accuracy", True, "random-search", "random")
    ax = fig.axes[0]
    assert ax.get_title() == "random-search (random): accuracy per trial (maximize)"
    assert _legend(fig) == ["accuracy", "best so far", "EarlyStopped, no accuracy (1)",
                            "Failed, no accuracy (2)"]
    failed = next(c for c in ax.collections if c.get_label() == "Failed, no accuracy (2)")
    assert [x for x, _ in failed.get_offsets()] == [1, 3]
    assert failed.get_alpha() in (None, 1.0)  # drawn solid, not faint
    tpe = plots.objective_figure(rows, "accuracy", True, "tpe-search", "tpe")
    assert tpe.axes[0].get_title() != ax.get_title()
    out = plots.objective_plot(tmp_path / "o.png", rows, "accuracy", True, "random-search",
                               "random")
    assert out is not None and out.read_bytes()[:4] == b"\x89PNG"


def test_all_trials_failed_still_draws_them() -> None:
    fig = plots.objective_figure([(0, None, "Failed"), (1, None, "Failed")], "loss", False,
                                 "broken", "random")
    assert _legend(fig) == ["Failed, no loss (2)"]


def _study(n: int, params: int) -> object:
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=1))
    study.optimize(lambda t: sum(t.suggest_float(f"p{i}", 0, 1) ** (i + 1)
                                 for i in range(params)), n_trials=n)
    return study


def _texts(fig) -> str:
    return " ".join(t.get_text() for t in fig.texts)


def test_importance_from_few_trials_carries_a_caveat() -> None:
    few = plots.importance_figure(_study(6, 2), "random-search", "random")
    assert "random-search (random)" in few.axes[0].get_title()
    assert "6 completed trials" in few.axes[0].get_title()
    assert "Caveat: only 6 completed trials for 2 parameter(s)" in _texts(few)
    enough = plots.importance_figure(_study(20, 2), "tpe-search", "tpe")
    assert "Caveat" not in _texts(enough)
    assert plots.importance_caveat(29, 3) is not None and plots.importance_caveat(30, 3) is None
