#!/usr/bin/env python3
"""Make manifests/release-data.json: what kflab ships about the pinned release and its labs,
so `kflab class plan` and `kflab bundle create` need no manifests tree and no compiler.

    python3 scripts/release_data.py --upstream TREE          # maintainers, after a pin moved
    python3 scripts/release_data.py --upstream TREE --check  # exit 1 when the file is stale

TREE is the extracted kubeflow/manifests release that versions.yaml pins (with JobSet's tree
beside it as jobset-<version>, as the kubeflow role unpacks them). Written:
- components: each component's footprint (requests, limits, pods) and images with what each
  is used for (lab/components/release.py, images.py), rendered with kubectl kustomize;
- pipeline_steps: the labs' pipeline steps, compiled: each step's base image and the
  packages it pip-installs when it starts (lab/teaching/steps.py), for the package index an
  offline bundle carries.
Needs kubectl (kustomize), kfp (the `local` extra) and nbformat (the `notebooks` extra).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def make(upstream: Path) -> dict:
    from lab.components import release
    from lab.teaching import steps

    data = release.compute(upstream)
    data["pipeline_steps"] = steps.compute()
    return data


def text(data: dict) -> str:
    return json.dumps(data, indent=1, sort_keys=True) + "\n"


def main() -> int:
    from lab.components import release

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--upstream", required=True, type=Path,
                    help="the extracted kubeflow/manifests tree of the pinned release")
    ap.add_argument("--check", action="store_true", help="compare, write nothing")
    args = ap.parse_args()
    new = text(make(args.upstream))
    path = release.data_file()
    if args.check:
        old = path.read_text() if path.is_file() else ""
        if old != new:
            print(f"{path} is stale: run python3 scripts/release_data.py --upstream "
                  f"{args.upstream}", file=sys.stderr)
            return 1
        print(f"{path} is current")
        return 0
    path.write_text(new)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
