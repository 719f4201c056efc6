"""Does the trace name the profile's top operator, and does findings.md name it too?
`kflab check` runs this.

Usage: python check_profile.py [--profile profile.json] [--trace trace.json]
                               [--report findings.md | --no-report]
Exit 0 when the trace is a Chrome trace with events of the top operator in --profile and,
unless --no-report, the report's `Top op:` line names that operator.
"""

import argparse
import json
import re
import sys
from pathlib import Path

LINE = re.compile(r"^[\s*_#>-]*top op[\s*_]*:[\s*_`]*([^\s`*]+)", re.IGNORECASE | re.MULTILINE)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--profile", default="profile.json")
    ap.add_argument("--trace", default="trace.json")
    ap.add_argument("--report", default="findings.md")
    ap.add_argument("--no-report", action="store_true")
    args = ap.parse_args()
    for path in (args.profile, args.trace):
        if not Path(path).is_file():
            print(f"{path} does not exist: run python profile_step.py first")
            return 1
    top = json.loads(Path(args.profile).read_text())["top_ops"][0]["name"]
    try:
        events = json.loads(Path(args.trace).read_text())["traceEvents"]
    except (ValueError, KeyError, TypeError):
        print(f"{args.trace} is not a Chrome trace (JSON with traceEvents)")
        return 1
    spans = [e for e in events if isinstance(e, dict) and e.get("name") == top and "dur" in e]
    if not spans:
        print(f"{args.trace} has no event named {top!r}, the top operator of {args.profile}: "
              "profile and trace must come from the same run")
        return 1
    print(f"{args.trace}: {len(spans)} events of the top operator {top}")
    if args.no_report:
        return 0
    report = Path(args.report)
    if not report.is_file():
        print(f"{report} does not exist: write it with a line such as `Top op: aten::addmm`")
        return 1
    found = LINE.search(report.read_text(errors="replace"))
    if not found:
        print(f"{report} has no line `Top op: <operator>`")
        return 1
    if found.group(1) != top:
        print(f"{report} names {found.group(1)!r}, but the top operator in {args.profile} "
              f"is {top!r}")
        return 1
    print(f"{report} names {top}, the top operator of this profile")
    return 0


if __name__ == "__main__":
    sys.exit(main())
