"""HTML reports opened in a real browser (headless Chromium from Debian; installed by
scripts/standins/50-chromium.sh, skipped without it): a scenario run's report with its Katib
plots, `kflab report NAME`, and the class page of `kflab grade collect`."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
import yaml

from lab.scenarios import export, gradebook, grading, guided, handin, loader
from tests.conftest import run_kflab
from tests.unit.tuning_helpers import experiment

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None,
                                reason="chromium not installed (scripts/standins/50-chromium.sh)")

# A trial that fails for n == 3: the report must show failed trials too.
TRIAL = """\
import sys
args = dict(a[2:].split("=", 1) for a in sys.argv[1:] if a.startswith("--"))
x, n = float(args["x"]), int(args["n"])
if n == 3:
    sys.exit("diverged")
print(f"loss={(x - 0.5) ** 2 + n / 10:.6f}")
"""


def chromium(tmp_path: Path, page: Path, *args: str) -> subprocess.CompletedProcess[str]:
    profile = tmp_path / f"profile-{len(list(tmp_path.glob('profile-*')))}"
    profile.mkdir()
    return subprocess.run(
        [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--no-first-run", f"--user-data-dir={profile}", *args, page.resolve().as_uri()],
        capture_output=True, text=True, timeout=120, check=False)


def screenshot(tmp_path: Path, page: Path, height: int = 2400) -> Any:
    from PIL import Image

    shot = tmp_path / f"{page.stem}.png"
    out = chromium(tmp_path, page, f"--screenshot={shot}", f"--window-size=1280,{height}")
    assert shot.exists(), out.stderr[-2000:]
    return Image.open(shot).convert("RGB")


def pixels_near(image: Any, rgb: tuple[int, int, int], tol: int = 30) -> int:
    import numpy as np

    diff = np.abs(np.asarray(image, dtype=int) - np.array(rgb))
    return int((diff <= tol).all(axis=-1).sum())


class Cells(HTMLParser):
    """Rows of every table in a DOM, as text."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self.cell: list[str] | None = None
        self.imgs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self.cell = []
        elif tag == "img":
            self.imgs.append(dict(attrs).get("src") or "")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self.cell is not None:
            self.rows[-1].append(" ".join("".join(self.cell).split()))
            self.cell = None

    def handle_data(self, data: str) -> None:
        if self.cell is not None:
            self.cell.append(data)


def dom(tmp_path: Path, page: Path) -> Cells:
    out = chromium(tmp_path, page, "--dump-dom")
    assert out.returncode == 0 and "<html" in out.stdout, out.stderr[-2000:]
    cells = Cells()
    cells.feed(out.stdout)
    return cells


def self_contained(text: str) -> None:
    assert "Content-Security-Policy" in text and "default-src 'none'" in text
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", text, re.I)
    assert "<script" not in text.lower()


def test_run_report_embeds_the_experiment_plots(tmp_path: Path) -> None:
    folder = tmp_path / "scenarios" / "tiny-hpo"
    (folder / "assets").mkdir(parents=True)
    (folder / "steps").mkdir()
    exp = experiment(maxTrialCount=6, maxFailedTrialCount=6)
    exp["metadata"]["name"] = "tiny-random"
    (folder / "assets" / "experiment.yaml").write_text(yaml.safe_dump(exp))
    (folder / "assets" / "trial.py").write_text(TRIAL)
    (folder / "steps" / "run.md").write_text("# Run\n")
    (folder / "scenario.yaml").write_text(yaml.safe_dump({
        "id": "tiny-hpo", "title": "Tiny HPO", "level": "beginner", "duration": "1m",
        "requires": ["katib"], "steps": [{
            "id": "run", "title": "Run the experiment", "text": "steps/run.md",
            "solve": [{"apply": "experiment.yaml"}],
            "checks": [{"type": "condition", "kind": "Experiment", "name": "tiny-random",
                        "condition": "Succeeded", "message": "the experiment did not finish"},
                       {"type": "field", "kind": "Experiment", "name": "tiny-random",
                        "query": "status.trialsFailed", "op": "==", "value": 0,
                        "title": "no trial failed",
                        "message": "some trials failed: read `kflab logs trial NAME`"}]}]}))
    env = {"KFLAB_SCENARIOS": str(folder.parent), "KFLAB_STATE": str(tmp_path / "state")}
    out = run_kflab("scenario", "run", "tiny-hpo", "--html", "run.html", "--json", "run.json",
                    cwd=tmp_path, env=env)
    assert out.returncode == 1, out.stdout + out.stderr  # the second check fails on purpose
    text = (tmp_path / "run.html").read_text()
    self_contained(text)
    data = json.loads((tmp_path / "run.json").read_text())
    checks = data[0]["steps"][0]["checks"]
    assert [c["ok"] for c in checks] == [True, False]
    assert checks[0]["message"] is None and "some trials failed" in checks[1]["message"]

    cells = dom(tmp_path, tmp_path / "run.html")
    step_row = next(r for r in cells.rows if r and r[0] == "1")
    assert step_row[2] == "failed"
    assert "no trial failed" in step_row[3] and "some trials failed" in step_row[3]
    assert "the experiment did not finish" not in step_row[3]  # a passing check: no failure text
    assert [s[:22] for s in cells.imgs] == ["data:image/png;base64,"] * 2

    image = screenshot(tmp_path, tmp_path / "run.html")
    # The plots' own colours (matplotlib's tab:orange best-so-far line, tab:red crosses for
    # the failed trials) reach the screen only if the browser decoded the embedded images.
    assert pixels_near(image, (255, 127, 14)) > 200
    assert pixels_near(image, (214, 39, 40)) > 50

    # `kflab report NAME` renders the same run again from its saved data.
    out = run_kflab("report", "tiny-hpo", "-o", "again.html", cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stderr
    again = dom(tmp_path, tmp_path / "again.html")
    assert [s[:22] for s in again.imgs] == ["data:image/png;base64,"] * 2
    out = run_kflab("report", "run.json", "-o", "from-json.html", cwd=tmp_path, env=env)
    assert out.returncode == 0 and "tiny-random" in (tmp_path / "from-json.html").read_text()


def test_class_page_in_a_browser(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Three students through the guided flow in process, graded, collected, then read back
    from the browser's DOM; a hostile name stays text."""
    monkeypatch.setenv("KFLAB_SCENARIOS", str(Path(__file__).parents[1] / "data" / "scenarios"))
    scenario = loader.find("hello-files")
    grades = []
    for home, who, greeting, count in (("ada", "Ada", "hello\n", True),
                                       ("bob", "Bob <img src=x onerror=alert(1)>", None, False),
                                       ("cy", "Cy", "hello\n", False)):
        st = tmp_path / home / "state"
        session = guided.start(scenario, st, st.parent / "work", restart=False)
        if greeting:
            (session.workdir / "greeting.txt").write_text(greeting)
            assert guided.check(session, wait=0)[0]
        if count:
            subprocess.run([sys.executable, "count.py"], cwd=session.workdir, check=True)
            assert guided.check(session, wait=0)[0]
        elif who == "Cy":
            guided.solve(session)
        out = tmp_path / f"{home}.tar.gz"
        export.export(st, [], who, out)
        g = grading.grade(scenario, out, tmp_path / "teacher")
        grades.append(gradebook.write(g, tmp_path / "grades" / handin.slug(who))["json"])
    collected, notes = gradebook.collect(grades)
    page = tmp_path / "class.html"
    page.write_text(gradebook.class_page(collected, notes))
    self_contained(page.read_text())
    cells = dom(tmp_path, page)
    body = [r for r in cells.rows if r and r[0] != "student"]
    assert [(r[0], r[1], r[2], r[3], r[4]) for r in body] == [
        ("Ada", "complete", "2/2", "passed", "passed"),
        ("Bob <img src=x onerror=alert(1)>", "failed", "0/2", "failed", "failed"),
        ("Cy", "complete+solve", "2/2", "passed", "passed solve")]
    report = dom(tmp_path, tmp_path / "grades" / "Cy" / "report.html")
    facts = {r[0]: r[1] for r in report.rows if len(r) == 2}
    assert facts["kflab solve used on"] == "count"
