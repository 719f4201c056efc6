"""STAND-IN container runtime for one workload: `python -m tests.standins.run_local STATE
MANIFEST.json BASE_DIR` runs the (translated) manifest with kflab's local engines, which
implement the upstream controllers' semantics on this machine, and exits when it is done
(a model server keeps running as a tracked background process). A subprocess per workload,
because the engines handle SIGTERM, which only a main thread may do."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main() -> int:
    from lab.backends.local import LocalBackend
    from lab.errors import LabError

    state, manifest, base = sys.argv[1:4]
    obj = json.loads(Path(manifest).read_text())
    try:
        LocalBackend(state).apply(obj, base_dir=Path(base), wait=True)
    except LabError as exc:
        print(f"run_local: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
