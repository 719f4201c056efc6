"""Reference answer for step 1: read the two stages from before.json and name the slower one.

The loop can go no faster than its slowest stage, so the stage with fewer samples per second
is the bottleneck.
"""

import json
from pathlib import Path

m = json.loads(Path("before.json").read_text())
loading, training = m["stages"]["loading"], m["stages"]["training"]
slowest = "loading" if loading < training else "training"
Path("report.md").write_text(
    f"Bottleneck: {slowest}\n\n"
    f"Loading alone: {loading:,.0f} samples/s. Training alone: {training:,.0f} samples/s.\n"
    f"End to end: {m['end_to_end']:,.0f} samples/s, no faster than the slower stage.\n")
print(Path("report.md").read_text())
