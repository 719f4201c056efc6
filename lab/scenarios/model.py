"""What a scenario is, once loaded and validated."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

LEVELS = ("beginner", "intermediate", "advanced")
COMPONENTS = ("pipelines", "katib", "training", "kserve", "gpu")
BACKENDS = ("local", "cluster")


@dataclass(frozen=True)
class Check:
    type: str
    message: str
    timeout: float
    params: dict[str, Any]
    where: str  # "file:line" for error reports

    @property
    def label(self) -> str:
        return self.params.get("name") or f"{self.type}"


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
        return self.text_file.read_text()


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

    @property
    def assets(self) -> Path:
        return self.root / "assets"

    def step(self, step_id: str) -> Step:
        for s in self.steps:
            if s.id == step_id:
                return s
        raise KeyError(step_id)
