"""Compare the two runs -- loss against wall time, bytes communicated -- and check your
table.md against what the peers measured. `kflab check` runs this too.

Usage: python compare.py [--ddp result-ddp.json] [--avg result-avg.json] [--table table.md]
Exit 0 when every number of table.md is within 1 % of the measured one.
"""

import argparse
import json
import re
import sys
from pathlib import Path

ROW = re.compile(r"^\|\s*(peers-ddp|peers-avg)\s*\|([^|]*)\|([^|]*)\|", re.MULTILINE)


def number(text: str) -> float | None:
    try:
        return float(text.strip().replace(",", "").replace("_", "").replace(" ", ""))
    except ValueError:
        return None


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ddp", default="result-ddp.json")
    ap.add_argument("--avg", default="result-avg.json")
    ap.add_argument("--table", default="table.md")
    args = ap.parse_args()
    runs = {}
    for name, path in (("peers-ddp", args.ddp), ("peers-avg", args.avg)):
        if not Path(path).is_file():
            print(f"{path} is missing: run the PyTorchJob {name} first "
                  f"(kflab apply -f {name}.yaml)")
            return 1
        runs[name] = json.loads(Path(path).read_text())

    print(f"{'run':<10}{'peers':>6}{'every':>6}{'seconds':>9}{'final loss':>11}"
          f"{'to target':>16}{'bytes/step':>12}{'bytes total':>13}")
    for name, r in runs.items():
        target = (f"{r['steps_to_target']} st, {r['seconds_to_target']:.2f}s"
                  if r["reached_target"] else "not reached")
        print(f"{name:<10}{r['world_size']:>6}{r['every']:>6}{r['seconds']:>9.2f}"
              f"{r['final_loss']:>11.4f}{target:>16}{r['bytes_per_step']:>12,.0f}"
              f"{r['bytes_total']:>13,}")
    print("\nloss of peer 0's model on the training set, by wall time (s):")
    for name, r in runs.items():
        points = r["curve"][3::6]
        print(f"  {name}: " + "  ".join(f"{s:.2f}s={loss:.3f}" for _, s, loss in points))

    table = Path(args.table)
    if not table.is_file():
        print(f"\n{table} is missing")
        return 1
    rows = {m.group(1): (m.group(2), m.group(3)) for m in ROW.finditer(table.read_text())}
    wrong = []
    print(f"\n{table} against the measurement:")
    for name, r in runs.items():
        for label, text, measured in (
                ("parameters", rows.get(name, ("?", "?"))[0], r["parameters"]),
                ("bytes per step", rows.get(name, ("?", "?"))[1], r["bytes_per_step"])):
            given = number(text)
            ok = given is not None and abs(given - measured) <= 0.01 * measured
            print(f"  {name} {label}: table {text.strip() or '?'}, measured {measured:,.0f}"
                  f"  {'ok' if ok else 'WRONG'}")
            if not ok:
                wrong.append(f"{name} {label}")
    if wrong:
        print(f"not yet right: {', '.join(wrong)}")
        return 1
    print("table.md matches what the peers measured")
    return 0


if __name__ == "__main__":
    sys.exit(main())
