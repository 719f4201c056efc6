"""What a scenario is, once loaded and validated."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

LEVELS = ("beginner", "intermediate", "advanced")
COMPONENTS = ("pipelines", "katib", "training", "trainer", "kserve", "notebooks", "gpu")
BACKENDS = ("local", "cluster")
# Kinds a lab may tell learners to delete when done: servers, which hold memory and a port
# until deleted. A finished run (PipelineRun, Experiment, a job) holds nothing: deleting it
# is never asked, so a missing one grades failed, never "cleaned up".
CLEANUP_KINDS = ("InferenceService", "Notebook")


@dataclass(frozen=True)
class Check:
    type: str
    message: str
    timeout: float
    params: dict[str, Any]
    where: str  # "file:line" for error reports
    title: str | None = None  # short text for progress output; derived when absent

    @property
    def label(self) -> str:
        """A short line saying what is checked, for progress output and reports."""
        if self.title:
            return self.title
        p = self.params
        target = f"{p.get('kind', '')}/{p['name']}" if "name" in p else p.get("kind", "")
        if self.type == "pipeline-run":
            text = f"pipeline run {p['name']} is {p.get('state', 'SUCCEEDED')}"
        elif self.type == "condition":
            text = f"{target} {p['condition']}={p.get('status', 'True')}"
        elif self.type == "field":
            text = f"{target}: {p['query']} {p.get('op', '==')} {p.get('value')!r}"
        elif self.type == "file-exists":
            text = f"file {p['path']} exists"
        elif self.type == "command":
            text = "command " + " ".join(map(str, p["argv"]))
        elif self.type == "http-predict":
            wants = ([f"== {p['expect']}"] if "expect" in p else []) + (
                [f"differ from {p['differ_from']}"] if "differ_from" in p else [])
            text = f"predictions of InferenceService/{p['name']} {' and '.join(wants)}"
        else:
            text = f"{self.type} {target}".strip()
        return text if len(text) <= 90 else text[:87] + "..."


@dataclass(frozen=True)
class Action:
    verb: str
    args: Any
    where: str


@dataclass(frozen=True)
class Step:
    id: str
    title: str
    text_file: Path
    hints: tuple[str, ...]
    solve: tuple[Action, ...]
    checks: tuple[Check, ...]
    # Preconditions (e.g. a GPU): when one does not hold, the step and the rest of the
    # scenario are skipped with its message as the reason -- skipped, not failed.
    needs: tuple[Check, ...] = ()

    @property
    def text(self) -> str:
        from lab.yamlio import read_text

        return read_text(self.text_file, hint="restore the step's text file")


@dataclass(frozen=True)
class Scenario:
    id: str
    title: str
    level: str
    duration: str
    description: str
    requires: tuple[str, ...]
    backends: tuple[str, ...]
    steps: tuple[Step, ...]
    root: Path
    extra: dict[str, Any] = field(default_factory=dict)
    # backend -> why the scenario cannot run there (`backends: {cluster: "reason"}`)
    unsupported: dict[str, str] = field(default_factory=dict)
    # kinds the lab tells learners to delete when they are done (`cleanup:`): grading
    # counts a step as "passed (cleaned up)" only when what it checked is of these kinds
    cleanup: tuple[str, ...] = ()

    def why_not(self, backend: str) -> str | None:
        """Why this scenario cannot run on `backend`, or None when it can."""
        if backend in self.backends:
            return None
        return self.unsupported.get(backend) or f"not written for the {backend} backend"

    @property
    def assets(self) -> Path:
        return self.root / "assets"

    def step(self, step_id: str) -> Step:
        for s in self.steps:
            if s.id == step_id:
                return s
        raise KeyError(step_id)
