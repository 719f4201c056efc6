"""Compare the single-process run with the distributed one (reads the two result files)."""

import json
from pathlib import Path

single = json.loads(Path("result-single.json").read_text())
ddp = json.loads(Path("result-ddp.json").read_text())
per_rank = [r["samples"] for r in ddp["per_rank"]]
report = {
    "single": {"accuracy": single["accuracy"], "samples": single["per_rank"][0]["samples"],
               "seconds": single["per_rank"][0]["seconds"]},
    "ddp": {"world_size": ddp["world_size"], "accuracy": ddp["accuracy"],
            "samples_per_rank": per_rank,
            "seconds": max(r["seconds"] for r in ddp["per_rank"])},
    "accuracy_gap": round(abs(single["accuracy"] - ddp["accuracy"]), 4),
    "samples_per_rank_ratio": round(max(per_rank) / single["per_rank"][0]["samples"], 4),
}
print(f"{'run':<8}{'world':>6}{'accuracy':>10}{'samples/rank':>14}{'seconds':>9}")
print(f"{'single':<8}{1:>6}{single['accuracy']:>10.4f}{report['single']['samples']:>14}"
      f"{report['single']['seconds']:>9.2f}")
print(f"{'ddp':<8}{ddp['world_size']:>6}{ddp['accuracy']:>10.4f}{max(per_rank):>14}"
      f"{report['ddp']['seconds']:>9.2f}")
Path("comparison.json").write_text(json.dumps(report, indent=2))
print("wrote comparison.json")
