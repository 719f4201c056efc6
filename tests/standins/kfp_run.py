"""STAND-IN for KFP's workflow engine (Argo + KFP driver/launcher) for one run:
`python -m tests.standins.kfp_run IR.json PARAMS.json ROOT OUT.json` executes the compiled
pipeline (the IR the KFP API received) with Kubeflow's own local runner, kfp.local, on this
machine, and writes what happened per task to OUT.json.

Images are not pulled: this Python stands in for every component's image. The IR's runtime
`pip install kfp==<the compiling SDK>` is pointed at the kfp installed here (so the pipeline
runs offline); the component code itself runs unchanged.
"""

from __future__ import annotations

import contextlib
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

STAMP = "%Y-%m-%dT%H:%M:%SZ"


def _pin_local_kfp(ir: dict[str, Any]) -> dict[str, Any]:
    from importlib.metadata import version

    text = json.dumps(ir)
    text = re.sub(r"kfp==[0-9][0-9a-z.]*", f"kfp=={version('kfp')}", text)
    return json.loads(text)


def _times(folder: Path) -> tuple[float | None, float | None]:
    """When kfp.local ran a task: its files' first and last modification (epoch seconds)."""
    stamps = [p.stat().st_mtime for p in folder.rglob("*") if p.is_file()]
    return (min(stamps), max(stamps)) if stamps else (None, None)


def main() -> int:
    from kfp import components, local

    ir_file, params_file, root, out_file = sys.argv[1:5]
    ir = _pin_local_kfp(json.loads(Path(ir_file).read_text()))
    params = json.loads(Path(params_file).read_text())
    tasks = list((ir.get("root") or {}).get("dag", {}).get("tasks", {}))
    types = {}
    for name, task in ir["root"]["dag"]["tasks"].items():
        comp = ir["components"][task["componentRef"]["name"]]
        arts = (comp.get("outputDefinitions") or {}).get("artifacts") or {}
        types[name] = {a: d["artifactType"]["schemaTitle"] for a, d in arts.items()}
    Path(ir_file).with_suffix(".local.json").write_text(json.dumps(ir))
    comp = components.load_component_from_file(str(Path(ir_file).with_suffix(".local.json")))
    result: dict[str, Any] = {"state": "RUNNING", "error": None,
                              "started": time.strftime(STAMP, time.gmtime())}
    try:
        local.init(runner=local.SubprocessRunner(use_venv=False), pipeline_root=root,
                   raise_on_error=True)
        comp(**params)
        result["state"] = "SUCCEEDED"
    except Exception as exc:  # the pipeline's own failure: reported, not raised
        result["state"], result["error"] = "FAILED", str(exc)[:2000]
    result["finished"] = time.strftime(STAMP, time.gmtime())
    runs = sorted(p for p in Path(root).iterdir() if p.is_dir())
    folder = runs[-1] if runs else None
    out_tasks = []
    for name in tasks:
        data = None
        if folder is not None:
            with contextlib.suppress(OSError, ValueError):
                data = json.loads((folder / name / "executor_output.json").read_text())
        times = _times(folder / name) if folder is not None else (None, None)
        entry: dict[str, Any] = {"name": name, "started": times[0], "finished": times[1],
                                 "state": "SUCCEEDED" if data is not None else
                                 ("FAILED" if result["state"] == "FAILED" else "SKIPPED"),
                                 "parameters": (data or {}).get("parameterValues", {}),
                                 "artifacts": {}}
        for out_name, group in ((data or {}).get("artifacts") or {}).items():
            for art in group.get("artifacts", []):
                entry["artifacts"][out_name] = {
                    "path": art.get("uri", ""), "metadata": art.get("metadata") or {},
                    "type": types.get(name, {}).get(out_name, "system.Artifact")}
        out_tasks.append(entry)
    result["tasks"] = out_tasks
    Path(out_file).write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
