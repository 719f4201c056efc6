"""Compare the single-process run with the multi-worker one (reads the result files)."""

import json
from pathlib import Path

single = json.loads(Path("result-single.json").read_text())
mwms = json.loads(Path("result-mwms.json").read_text())
workers = [json.loads(p.read_text()) for p in sorted(Path("results").glob("*.json"))]
accuracies = [w["accuracy"] for w in workers]
report = {
    "single": {"accuracy": single["accuracy"], "samples": single["samples"],
               "seconds": single["seconds"]},
    "multi_worker": {"workers": mwms["workers"], "accuracy": mwms["accuracy"],
                     "samples_per_worker": [w["samples"] for w in workers],
                     "seconds": max(w["seconds"] for w in workers)},
    "workers_reported": len(workers),
    # MultiWorkerMirroredStrategy keeps one model: every worker ends with the same accuracy
    "accuracy_spread": round(max(accuracies) - min(accuracies), 4),
    "accuracy_gap": round(abs(single["accuracy"] - mwms["accuracy"]), 4),
    "samples_per_worker_ratio": round(max(w["samples"] for w in workers) / single["samples"], 4),
}
print(f"{'run':<14}{'workers':>8}{'accuracy':>10}{'samples/worker':>16}{'seconds':>9}")
print(f"{'single':<14}{1:>8}{single['accuracy']:>10.4f}{single['samples']:>16}"
      f"{single['seconds']:>9.2f}")
for w in workers:
    print(f"{'  ' + w['task']:<14}{w['workers']:>8}{w['accuracy']:>10.4f}{w['samples']:>16}"
          f"{w['seconds']:>9.2f}")
Path("comparison.json").write_text(json.dumps(report, indent=2))
print("wrote comparison.json")
