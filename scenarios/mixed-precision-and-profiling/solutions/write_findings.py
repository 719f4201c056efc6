"""Reference answer for step 1: the first row of the profile is the top operator."""

import json
from pathlib import Path

ops = json.loads(Path("profile.json").read_text())["top_ops"]
top = ops[0]
Path("findings.md").write_text(
    f"Top op: {top['name']}\n\n"
    f"It took {top['share']:.0%} of the profiled time in {top['calls']} calls. Next: "
    + ", ".join(f"{o['name']} ({o['share']:.0%})" for o in ops[1:4]) + ".\n")
print(Path("findings.md").read_text())
