"""A broken scenario file gives an error naming the file, the line and the field."""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lab.errors import InputError
from lab.scenarios.loader import discover, load_scenario

GOOD = """\
id: demo
title: Demo
level: beginner
duration: 5m
steps:
  - id: make-file
    title: Make a file
    text: steps/one.md
    hints: ["touch it"]
    solve:
      - command: [python, -c, "open('out.txt', 'w').write('hi')"]
    checks:
      - type: file-exists
        path: out.txt
        message: out.txt is missing
"""


def make(tmp_path: Path, text: str) -> Path:
    folder = tmp_path / "demo"
    (folder / "steps").mkdir(parents=True, exist_ok=True)
    (folder / "steps" / "one.md").write_text("# One\n")
    (folder / "scenario.yaml").write_text(text)
    return folder


def load_error(tmp_path: Path, text: str) -> InputError:
    with pytest.raises(InputError) as exc:
        load_scenario(make(tmp_path, text))
    return exc.value


def test_good_scenario_loads(tmp_path: Path) -> None:
    s = load_scenario(make(tmp_path, GOOD))
    assert s.id == "demo" and s.steps[0].checks[0].type == "file-exists"
    assert s.steps[0].checks[0].where.endswith("scenario.yaml:13")


@pytest.mark.parametrize(
    ("old", "new", "line", "field", "words"),
    [
        ("type: file-exists", "type: file-exist", 13, "steps[0].checks[0].type",
         "did you mean 'file-exists'"),
        ("        path: out.txt\n", "", 13, "steps[0].checks[0].path", "missing"),
        ("level: beginner", "level: expert", 3, "level", "unknown level"),
        ("    text: steps/one.md", "    text: steps/two.md", 8, "steps[0].text", "not found"),
        ("      - command: [python", "      - run: [python", 11, "steps[0].solve[0].run",
         "unknown action"),
        ("        message: out.txt is missing", "        mesage: x", 15,
         "steps[0].checks[0].mesage", "did you mean 'message'"),
        ("id: demo", "id: other", 1, "id", "does not match the folder"),
        ("  - id: make-file", "  - id: Make File", 6, "steps[0].id", "not a valid id"),
        # issue 23, point 9: checks that could never pass or never end, and a missing source
        ("        path: out.txt\n", "        path: out.txt\n        timeout: .inf\n", 15,
         "steps[0].checks[0].timeout", "must be a number of seconds"),
        ("        path: out.txt\n", "        path: out.txt\n        contains: \"(\"\n", 15,
         "steps[0].checks[0].contains", "invalid regular expression"),
        ("      - type: file-exists\n        path: out.txt\n",
         "      - type: condition\n        kind: Pod\n        name: p\n"
         "        condition: Ready\n", 14, "steps[0].checks[0].kind",
         "does not read the kind 'Pod'"),
        ("      - command: [python, -c, \"open('out.txt', 'w').write('hi')\"]",
         "      - copy: {from: assets/nope.txt, to: out.txt}", 11,
         "steps[0].solve[0].copy.from", "not found in the scenario folder"),
    ],
)
def test_broken_scenarios_name_file_line_field(tmp_path: Path, old: str, new: str, line: int,
                                               field: str, words: str) -> None:
    assert old in GOOD
    err = load_error(tmp_path, GOOD.replace(old, new))
    assert err.file.endswith("demo/scenario.yaml")
    assert err.line == line, str(err)
    assert err.field == field, str(err)
    assert words in str(err)


def test_a_hint_with_an_unquoted_colon_is_told_to_quote_it(tmp_path: Path) -> None:
    err = load_error(tmp_path, GOOD.replace('hints: ["touch it"]',
                                            "hints:\n      - Run: touch out.txt"))
    assert err.field == "steps[0].hints[0]" and err.line == 10, str(err)
    assert "because of the ': ' in it" in str(err)
    assert 'quote it: - "Run: touch out.txt"' in str(err)


def test_a_misspelt_condition_fails_validation(tmp_path: Path) -> None:
    """`condition: Succeded` can never be set by Katib: validate says so, with the fix."""
    text = GOOD.replace(
        "      - type: file-exists\n        path: out.txt\n",
        "      - type: condition\n        kind: Experiment\n        name: e\n"
        "        condition: Succeded\n")
    err = load_error(tmp_path, text)
    assert err.field == "steps[0].checks[0].condition", str(err)
    assert "Experiment has no condition 'Succeded'" in str(err)
    assert "did you mean 'Succeeded'?" in str(err)
    # a condition this list does not hold, far from every known one, is left alone
    load_scenario(make(tmp_path, text.replace("Succeded", "Suspended")))


def test_bad_jmespath_query_is_reported(tmp_path: Path) -> None:
    text = GOOD.replace(
        "      - type: file-exists\n        path: out.txt\n",
        "      - type: field\n        kind: PipelineRun\n        name: r\n"
        "        query: \"status.[[\"\n        value: 1\n",
    )
    err = load_error(tmp_path, text)
    assert err.field == "steps[0].checks[0].query" and "JMESPath" in str(err)


def test_wrong_type_is_reported(tmp_path: Path) -> None:
    err = load_error(tmp_path, GOOD.replace("hints: [\"touch it\"]", "hints: touch it"))
    assert err.field == "steps[0].hints" and "expected list" in str(err)


def test_every_bundled_scenario_is_valid() -> None:
    found = discover()
    assert "pipeline-classifiers" in found
    for folder in found.values():
        load_scenario(folder)


# Fuzzing: whatever a user writes, the loader answers with InputError or a scenario.
values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=3),
    max_leaves=8,
)
KEYS = ["id", "title", "level", "duration", "steps", "text", "checks", "solve", "hints", "type",
        "message", "timeout", "path", "query", "op", "value", "kind", "name", "argv"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.function_scoped_fixture])
@given(mutations=st.lists(st.tuples(st.sampled_from(KEYS), values), max_size=4),
       where=st.integers(min_value=0, max_value=3))
def test_fuzzed_scenarios_never_crash(tmp_path: Path, mutations: list, where: int) -> None:
    data = yaml.safe_load(GOOD)
    target = [data, data["steps"][0], data["steps"][0]["checks"][0],
              data["steps"][0]["solve"][0]][where]
    for key, value in mutations:
        target[key] = value
    folder = make(tmp_path, yaml.safe_dump(data))
    try:
        load_scenario(folder)
    except InputError as exc:
        assert exc.file and str(exc)
    finally:
        shutil.rmtree(folder)


@settings(max_examples=100, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(max_size=200))
def test_arbitrary_text_never_crashes(tmp_path: Path, text: str) -> None:
    folder = make(tmp_path, text)
    with contextlib.suppress(InputError):  # anything else fails the test
        load_scenario(folder)


def test_every_lab_declares_the_servers_its_closing_summary_tells_learners_to_delete() -> None:
    """The closing summary (guided.still_running) tells learners to delete every model and
    notebook server a lab left running; grading counts a step whose server is gone as
    "passed (cleaned up)" only for kinds the lab declares in `cleanup:`. So every lab whose
    checks read a server declares its kind, and no lab declares anything else."""
    from lab.scenarios.guided import _SERVERS
    from lab.scenarios.integrity import check_targets
    from lab.scenarios.loader import load_all

    for scenario in load_all():
        servers = {kind for step in scenario.steps for check in step.checks
                   for kind, _, _ in check_targets(check) if kind in _SERVERS}
        assert servers == set(scenario.cleanup), (scenario.id, servers, scenario.cleanup)


def test_cleanup_takes_server_kinds_only(tmp_path: Path) -> None:
    folder = tmp_path / "sc"
    folder.mkdir()
    (folder / "a.md").write_text("a")
    base = ("id: sc\ntitle: t\nlevel: beginner\nduration: 1m\ncleanup: {}\nsteps:\n"
            "  - {{id: a, title: a, text: a.md, checks: [{{type: file-exists, path: x, "
            "message: m}}]}}\n")
    (folder / "scenario.yaml").write_text(base.format("[isvc, Notebook, isvc]"))
    assert load_scenario(folder).cleanup == ("InferenceService", "Notebook")
    for bad in ("[PipelineRun]", "[Experiment]", "[PyTorchJob]", "[nope]", "[1]"):
        (folder / "scenario.yaml").write_text(base.format(bad))
        with pytest.raises(InputError, match="a missing one grades failed") as err:
            load_scenario(folder)
        assert err.value.field == "cleanup[0]"
