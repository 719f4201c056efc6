"""Build stage 2 of the recipe from stage 1's best trial: write stage2.yaml.

Reads Katib's own status of gbrt-stage1 (`kflab get experiment gbrt-stage1 -o json`, or
kubectl on a cluster), takes the best trial's parameter assignments, and writes an
Experiment `gbrt-stage2` that keeps stage 1's trial template and searches the parameters
that stage2_parameters() returns.

Usage: python3 make_stage2.py [--stage1 gbrt-stage1] [--out stage2.yaml]
"""

import argparse
import json
import math
import subprocess
import sys
from pathlib import Path

import yaml

MORE_TREES = 4  # stage 2 grows this many times stage 1's trees


def best_assignments(name: str) -> dict[str, str]:
    """Stage 1's best trial as {parameter: value}, from Katib's currentOptimalTrial."""
    out = subprocess.run([sys.executable, "-m", "lab.cli", "get", "experiment", name,
                          "-o", "json"], capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"cannot read experiment {name}: {out.stderr.strip()}")
    best = json.loads(out.stdout)["status"].get("currentOptimalTrial") or {}
    assignments = {a["name"]: a["value"] for a in best.get("parameterAssignments", [])}
    if not assignments:
        raise SystemExit(f"experiment {name} has no best trial yet: wait until it succeeds")
    return assignments


def discrete(name: str, values: list[str]) -> dict:
    """One Katib parameter with a list of values (numbers written as text)."""
    return {"name": name, "parameterType": "discrete", "feasibleSpace": {"list": values}}


def stage2_parameters(best: dict[str, str]) -> list[dict]:
    """The parameters of stage 2, from stage 1's best values, e.g.
    best = {"n_estimators": "200", "max_depth": "3", "learning_rate": "0.1",
            "max_features": "1.0"}

    The recipe: MORE_TREES times as many trees; tree shape (max_depth, max_features) held
    at stage 1's best, each a list of that one value; the learning rate searched again,
    starting at stage 1's best and going lower: the best, half of it, a quarter of it.
    Return a list of discrete(name, [values as text]), one per parameter, e.g.
    discrete("max_depth", [best["max_depth"]]).
    """
    rate = float(best["learning_rate"])
    return [
        discrete("n_estimators", [str(int(best["n_estimators"]) * MORE_TREES)]),
        discrete("max_depth", [best["max_depth"]]),
        discrete("learning_rate", [f"{rate:g}", f"{rate / 2:g}", f"{rate / 4:g}"]),
        discrete("max_features", [best["max_features"]]),
    ]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--stage1", default="gbrt-stage1")
    ap.add_argument("--stage1-file", default="stage1.yaml", help="its manifest (the template)")
    ap.add_argument("--out", default="stage2.yaml")
    args = ap.parse_args()
    best = best_assignments(args.stage1)
    exp = yaml.safe_load(Path(args.stage1_file).read_text())
    exp["metadata"] = {"name": "gbrt-stage2"}
    exp["spec"]["parameters"] = stage2_parameters(best)
    # the grid's size is the budget, so stage 2 ends the same way here and on a cluster
    exp["spec"]["maxTrialCount"] = math.prod(len(p["feasibleSpace"]["list"])
                                             for p in exp["spec"]["parameters"])
    header = (f"# Stage 2 of the gradient-boosting recipe, built by make_stage2.py from the "
              f"best trial of {args.stage1}:\n# "
              + ", ".join(f"{k}={v}" for k, v in best.items()) + "\n")
    Path(args.out).write_text(header + yaml.safe_dump(exp, sort_keys=False))
    print(f"stage 1's best: {best}")
    for p in exp["spec"]["parameters"]:
        print(f"stage 2 {p['name']}: {p['feasibleSpace']['list']}")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
