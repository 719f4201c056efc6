"""Compare the 1-node and 3-node TrainJobs (and the SDK's run, once it exists): accuracy and
throughput."""

import json
from pathlib import Path


def load(path: str) -> dict:
    run = json.loads(Path(path).read_text())
    per_rank = run["per_rank"]
    seconds = max(r["seconds"] for r in per_rank)
    samples = sum(r["samples"] for r in per_rank)
    return {"world_size": run["world_size"], "accuracy": run["accuracy"],
            "samples_per_rank": max(r["samples"] for r in per_rank), "seconds": seconds,
            "samples_per_s": round(samples / seconds, 1) if seconds else None}


runs = {"1 node": load("result-1node.json"), "3 nodes": load("result-3nodes.json")}
if Path("result-sdk.json").exists():
    runs["sdk 3 nodes"] = load("result-sdk.json")
one, three = runs["1 node"], runs["3 nodes"]
report = {
    "runs": runs,
    "accuracy_gap": round(max(abs(r["accuracy"] - one["accuracy"]) for r in runs.values()), 4),
    "samples_per_rank_ratio": round(three["samples_per_rank"] / one["samples_per_rank"], 4),
    "throughput_ratio": (round(three["samples_per_s"] / one["samples_per_s"], 3)
                         if one["samples_per_s"] and three["samples_per_s"] else None),
}
print(f"{'run':<12}{'world':>6}{'accuracy':>10}{'samples/rank':>14}{'seconds':>9}{'samples/s':>11}")
for name, r in runs.items():
    print(f"{name:<12}{r['world_size']:>6}{r['accuracy']:>10.4f}{r['samples_per_rank']:>14}"
          f"{r['seconds']:>9.2f}{r['samples_per_s'] or 0:>11}")
print(f"3 nodes vs 1: throughput x{report['throughput_ratio']}, "
      f"accuracy gap {report['accuracy_gap']}")
Path("comparison.json").write_text(json.dumps(report, indent=2))
print("wrote comparison.json")
