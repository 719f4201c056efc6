"""Does report.md name the stage that measure.py found slowest? `kflab check` runs this.

Usage: python check_report.py [--measured before.json] [--report report.md]
Exit 0 when the report's `Bottleneck:` line names the slower stage of the measurement.
"""

import argparse
import json
import re
import sys
from pathlib import Path

LINE = re.compile(r"^[\s*_#>-]*bottleneck[\s*_]*:[\s*_`]*(\w+)", re.IGNORECASE | re.MULTILINE)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--measured", default="before.json")
    ap.add_argument("--report", default="report.md")
    args = ap.parse_args()
    measured, report = Path(args.measured), Path(args.report)
    if not measured.is_file():
        print(f"{measured} does not exist: run python measure.py --out {measured} first")
        return 1
    if not report.is_file():
        print(f"{report} does not exist: write it with a line such as `Bottleneck: loading`")
        return 1
    found = LINE.search(report.read_text(errors="replace"))
    if not found:
        print(f"{report} has no line `Bottleneck: <stage>` (loading or training)")
        return 1
    stages = json.loads(measured.read_text())["stages"]
    slowest = min(stages, key=stages.get)
    named = found.group(1).lower()
    numbers = ", ".join(f"{k} {v:,.0f}" for k, v in stages.items())
    if named != slowest:
        print(f"{report} names '{named}', but {measured} measured {numbers} samples/s: "
              f"the slower stage, '{slowest}', bounds the loop")
        return 1
    print(f"{report} names '{named}': the slower stage in {measured} ({numbers} samples/s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
