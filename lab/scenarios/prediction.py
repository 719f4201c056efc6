"""Predictions in scenarios: the `http-predict` check and the `predict` solve action.

Both send a real request through the backend (`backend.predict`), so a check passes only
when a live model server answers with the expected predictions.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lab.errors import LabError
from lab.kube import inference
from lab.scenarios.context import Context
from lab.yamlio import load_json, read_text

BODY_KEYS = ("request", "instances", "file")


def _one_body(p: dict[str, Any]) -> str | None:
    given = [k for k in BODY_KEYS if k in p]
    if len(given) != 1:
        return ("give exactly one of 'request' (a V1/V2 body), 'instances' (V1 rows) or "
                "'file' (a JSON body in the work folder)")
    if "request" in p and inference.detect(p["request"]) is None:
        return 'request: not a V1 ({"instances": ...}) or V2 ({"inputs": ...}) body'
    return None


def _body(ctx: Context, p: dict[str, Any]) -> dict[str, Any]:
    if "request" in p:
        return p["request"]
    if "instances" in p:
        return {"instances": p["instances"]}
    return inference.load_request(ctx.workdir / p["file"])


def valid_check(p: dict[str, Any]) -> str | None:
    if (problem := _one_body(p)) is not None:
        return problem
    if "expect" not in p and "differ_from" not in p:
        return "expect: give the expected predictions (and/or 'differ_from': a saved response)"
    if p.get("tolerance", 0) < 0:
        return "tolerance: must be >= 0"
    return None


def check(ctx: Context, p: dict[str, Any]) -> tuple[bool, str]:
    """(holds, what was observed) for one http-predict check."""
    try:
        response = ctx.backend.predict(p["name"], _body(ctx, p), p.get("namespace", "default"),
                                       p.get("protocol"))
        got = inference.predictions(response)
    except LabError as exc:
        return False, str(exc).splitlines()[0]
    if "expect" in p and not inference.close(got, p["expect"], float(p.get("tolerance", 0))):
        tol = f" (tolerance {p['tolerance']})" if p.get("tolerance") else ""
        return False, f"predictions {got}, expected {p['expect']}{tol}"
    if "differ_from" in p:
        saved = ctx.workdir / p["differ_from"]
        try:
            before = inference.predictions(load_json(read_text(saved), p["differ_from"]))
        except LabError:
            return False, f"no saved response to compare with in {p['differ_from']}"
        if inference.close(got, before, float(p.get("tolerance", 0))):
            return False, f"predictions {got} are unchanged from {p['differ_from']}"
        return True, f"predictions {got} (were {before})"
    return True, f"predictions {got}"


def valid_action(v: Any) -> str | None:
    if not isinstance(v, dict) or "name" not in v:
        return ("give a mapping with 'name' and one of 'file', 'instances' or 'request' "
                "(optional: 'protocol', 'namespace', 'save')")
    extra = set(v) - {"name", "namespace", "protocol", "save", *BODY_KEYS}
    if extra:
        return f"unknown key(s): {', '.join(sorted(extra))}"
    if v.get("protocol") not in (None, *inference.PROTOCOLS):
        return f"protocol: use one of {', '.join(inference.PROTOCOLS)}"
    return _one_body(v)


def run_action(ctx: Context, v: dict[str, Any]) -> str:
    response = ctx.backend.predict(v["name"], _body(ctx, v), v.get("namespace", "default"),
                                   v.get("protocol"))
    if v.get("save"):
        dest: Path = ctx.workdir / v["save"]
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(json.dumps(response, indent=2) + "\n")
    saved = f" (saved to {v['save']})" if v.get("save") else ""
    return f"predicted with {v['name']}: {inference.predictions(response)}{saved}"
