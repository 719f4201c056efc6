"""Results as JSON and JUnit XML, so an instructor can grade a class or a CI can gate."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from lab.scenarios.runner import ScenarioResult


def result_dict(result: ScenarioResult) -> dict[str, Any]:
    """A result as JSON data. A check's `message` is the text a learner reads when it fails,
    so it is kept for failing checks only (null for a passing one)."""
    data = result.to_dict()
    for step in data["steps"]:
        for check in [*step["checks"], *(step["before"] or [])]:
            if check["ok"]:
                check["message"] = None
    return data


def write_json(results: list[ScenarioResult], path: Path) -> None:
    path.write_text(json.dumps([result_dict(r) for r in results], indent=2) + "\n")


def to_junit(results: list[ScenarioResult]) -> ET.Element:
    suites = ET.Element("testsuites", name="kflab")
    for res in results:
        failures = sum(s.status == "failed" for s in res.steps)
        errors = sum(s.status == "error" for s in res.steps)
        skipped = sum(s.status == "skipped" for s in res.steps)
        suite = ET.SubElement(
            suites, "testsuite", name=res.id, tests=str(len(res.steps)),
            failures=str(failures), errors=str(errors), skipped=str(skipped),
            time=f"{res.seconds:.3f}", timestamp=res.started_at,
        )
        for step in res.steps:
            case = ET.SubElement(suite, "testcase", classname=f"{res.id}.{res.mode}",
                                 name=step.id, time=f"{step.seconds:.3f}")
            lines = [f"{'ok ' if c.ok else 'FAIL'} {c.label}: {c.observed}" for c in step.checks]
            detail = "\n".join(lines)
            if step.status == "failed":
                failed = [c for c in step.checks if not c.ok]
                msg = step.error or "; ".join(c.message for c in failed)
                ET.SubElement(case, "failure", message=msg).text = detail
            elif step.status == "error":
                ET.SubElement(case, "error", message=step.error or "error").text = detail
            elif step.status == "skipped":
                ET.SubElement(case, "skipped",
                              message=step.skip_reason or "an earlier step did not pass")
            if detail:
                ET.SubElement(case, "system-out").text = detail
    return suites


def write_junit(results: list[ScenarioResult], path: Path) -> None:
    tree = ET.ElementTree(to_junit(results))
    ET.indent(tree)
    tree.write(path, encoding="utf-8", xml_declaration=True)
