"""Each lab step's text ends by pointing at the `kflab ui` view that shows what the step did:
one line, the same wording everywhere, naming a view the UI has and the resource the step's
checks look at; a step whose checks read only files points at a resource an earlier step of
the lab made (the model server a query step sends to) or at the lab's own progress page."""

from __future__ import annotations

import re

import pytest

from lab.scenarios import loader
from lab.scenarios.model import Scenario, Step
from lab.webui.server import STATIC

LINE = re.compile(r"^In `kflab ui`, open (\w+) -> (\S+) to (?:see|send) [^`]+\.$", re.M)
VIEWS = {"PipelineRun": "Runs", "Experiment": "Experiments", "PyTorchJob": "Jobs",
         "TFJob": "Jobs", "TrainJob": "Jobs", "InferenceService": "InferenceServices",
         "Notebook": "Notebooks"}


def _checked(step: Step) -> tuple[str, str] | None:
    """The first resource the step's checks look at that the UI has a view of."""
    for c in step.checks:
        kind = {"pipeline-run": "PipelineRun", "http-predict": "InferenceService"}.get(
            c.type, c.params.get("kind"))
        if kind in VIEWS and c.params.get("name"):
            return VIEWS[kind], c.params["name"]
    return None


@pytest.mark.parametrize("scenario", loader.load_all(), ids=lambda s: s.id)
def test_every_step_points_at_its_view(scenario: Scenario) -> None:
    nav = STATIC.joinpath("index.html").read_text()
    earlier: set[tuple[str, str]] = set()
    for step in scenario.steps:
        text = step.text_file.read_text()
        found = LINE.findall(text)
        assert len(found) == 1, f"{step.text_file}: one `In `kflab ui`, open` line"
        assert text.rstrip().splitlines()[-1].startswith("In `kflab ui`, open"), \
            f"{step.text_file}: the pointer is the step text's last line"
        view, name = found[0]
        assert f'href="#/{view.lower()}"' in nav, f"{step.text_file}: no view '{view}'"
        checked = _checked(step)
        allowed = {checked} if checked else {("Labs", scenario.id), *earlier}
        assert (view, name) in allowed, f"{step.text_file}: {view} -> {name}, not {allowed}"
        if checked:
            earlier.add(checked)
