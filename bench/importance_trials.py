"""How many trials before Katib plots' parameter importance means something?

kflab draws parameter importance with Optuna's mean-decrease-in-impurity evaluator (a random
forest fitted to the completed trials). This measures how often that ranking is wrong when
only one parameter matters: the objective is x0**2, every other parameter is ignored, trials
are sampled at random (as Katib's random search does). For each number of trials and of
parameters it prints, over many seeds, how often an ignored parameter is ranked first and the
mean importance given to the ignored ones (which should be 0).

    .venv/bin/python bench/importance_trials.py [--seeds 100]

plots.py puts a caveat on importance plots below MIN_TRIALS_PER_PARAMETER completed trials per
parameter; the numbers this prints are the reason (docs/tuning.md quotes them).
"""

from __future__ import annotations

import argparse
import statistics

import optuna


def importance(n_trials: int, n_params: int, seed: int) -> dict[str, float]:
    def objective(trial: optuna.Trial) -> float:
        xs = [trial.suggest_float(f"x{i}", -1, 1) for i in range(n_params)]
        return xs[0] ** 2

    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=seed))
    study.optimize(objective, n_trials=n_trials)
    return optuna.importance.get_param_importances(
        study, evaluator=optuna.importance.MeanDecreaseImpurityImportanceEvaluator(seed=0))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=100)
    ap.add_argument("--params", type=int, nargs="+", default=[2, 3])
    ap.add_argument("--trials-per-param", type=float, nargs="+",
                    default=[2, 3, 5, 7.5, 10, 15, 20])
    args = ap.parse_args()
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    print("params trials per-param  ignored-ranked-first  ignored-importance(mean)")
    for p in args.params:
        for per in args.trials_per_param:
            n = max(2, round(per * p))
            wrong, ignored = 0, []
            for seed in range(args.seeds):
                scores = importance(n, p, seed)
                wrong += max(scores, key=scores.get) != "x0"
                ignored.append(sum(v for k, v in scores.items() if k != "x0"))
            print(f"{p:6d} {n:6d} {n / p:9.1f}  {wrong / args.seeds:20.0%}  "
                  f"{statistics.mean(ignored):24.2f}", flush=True)


if __name__ == "__main__":
    main()
