"""Compare two Katib experiments: best accuracy, the trial that reached it, and how many
trials each search needed to get within 0.5 % of its best. Writes comparison.md.

Usage: python3 compare.py random-search tpe-search
"""

import json
import subprocess
import sys


def experiment(name: str) -> dict:
    """The Experiment as Katib reports it (`kflab get experiment NAME -o json`)."""
    out = subprocess.run([sys.executable, "-m", "lab.cli", "get", "experiment", name,
                          "-o", "json"], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def trials(name: str) -> list[dict]:
    out = subprocess.run([sys.executable, "-m", "lab.cli", "get", "trials", "-o", "json"],
                         capture_output=True, text=True, check=True)
    items = json.loads(out.stdout)["items"]
    return [t for t in items
            if t["metadata"]["labels"]["katib.kubeflow.org/experiment"] == name]


def best_accuracy(exp: dict) -> float:
    """The objective of the experiment's best trial (status.currentOptimalTrial)."""
    # TODO: read status.currentOptimalTrial.observation.metrics, find the metric named
    # "accuracy" and return its "max" as a float (Katib writes metric values as text).
    raise NotImplementedError("best_accuracy: see the TODO above")


def main() -> None:
    names = sys.argv[1:] or ["random-search", "tpe-search"]
    lines = ["| experiment | algorithm | best accuracy | best trial | trials | "
             "trials within 0.5 % of best |", "|---|---|---|---|---|---|"]
    for name in names:
        exp = experiment(name)
        best = best_accuracy(exp)
        scores = [float(m["max"]) for t in trials(name)
                  for m in (t["status"].get("observation") or {}).get("metrics", [])
                  if m["name"] == "accuracy" and m["max"] != "unavailable"]
        near = sum(s >= best - 0.005 for s in scores)
        lines.append(f"| {name} | {exp['spec']['algorithm']['algorithmName']} | {best:.4f} | "
                     f"{exp['status']['currentOptimalTrial']['bestTrialName']} | "
                     f"{exp['status'].get('trials', 0)} | {near} |")
    with open("comparison.md", "w") as fh:
        fh.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
