"""Reference answer for the table: count the model's parameters, then the bytes.

DDP all-reduces every gradient (one per parameter) after every step; an averaging round
all-reduces every parameter once every `every` steps. float32 values are 4 bytes each.
"""

import json
from pathlib import Path

from peers import make_model

n = sum(p.numel() for p in make_model().parameters())
every = json.loads(Path("result-avg.json").read_text())["every"]
Path("table.md").write_text(
    "# Communication per training step\n\n"
    "| run | parameters | bytes per step |\n|---|---|---|\n"
    f"| peers-ddp | {n} | {4 * n} |\n"
    f"| peers-avg | {n} | {4 * n / every:g} |\n")
print(Path("table.md").read_text())
