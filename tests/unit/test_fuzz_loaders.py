"""Fuzzing every loader of user files (hypothesis): structured mutations of real files and raw
bytes. Whatever comes in, the outcome is a value or an InputError/LabError that names the
file (and the field or line) -- never another exception, never a traceback, never a hang.

In-process for the loaders themselves (fast, many examples); through the real CLI in a
subprocess for raw bytes (exit code 2, no traceback)."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lab.errors import InputError, LabError

REPO = Path(__file__).resolve().parents[2]
FUZZ = settings(max_examples=150, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])
CLI_FUZZ = settings(max_examples=10, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])

NASTY = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=30),
    st.sampled_from(["[/raw]", "/data/[/raw]", "a\x00b", "../../../../etc", "a" * 300,
                     "2024-13-45", "abc", "-1", "1e999", "0x1F", "~nobody/x", "http://[x",
                     "${trialParameters.nope}", "²", "10**12", "1000000000000"]),
    st.lists(st.integers(min_value=-5, max_value=5), max_size=3),
    st.dictionaries(st.text(max_size=6), st.integers(), max_size=3),
)
# Raw text biased towards YAML's own syntax, so it reaches the parser's corners.
YAMLISH = st.lists(st.sampled_from([*"{}[]:-&*!|>'\"#%@`,? \n\t<=~.aZ09", "<<", "---", "\u00e9",
                                    "\x07", "  ", "&a ", "*a", "!!", "\\"]),
                   max_size=150).map("".join)
RAW = st.one_of(st.binary(max_size=400), YAMLISH.map(str.encode))


def _paths(node: Any, path: tuple = ()) -> list[tuple]:
    out = [path]
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, (*path, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, (*path, i))
    return out


def _real_fields(data: Any, path: tuple) -> list[str]:
    """The fields the object's kind really has at `path` (from lab/kube/fields.json), so
    that additions hit fields the validators read (env, ports, replicas...), not only noise."""
    from lab.kube import fields as tree

    ref: Any = tree._root(data)
    node = data
    for key in path:
        if ref is None or ref == tree.ANY:
            return []
        if ref == tree.EMBEDDED:
            ref = tree._root(node)
            if ref is None:
                return []
        node = node[key]
        if isinstance(key, int):
            continue
        types = tree._tree()["types"][ref]
        ref = types.get(key, types.get(tree.MAP_KEY))
    if ref == tree.EMBEDDED:
        ref = tree._root(node)
    if ref is None or ref == tree.ANY or not isinstance(node, dict):
        return []
    return sorted(k for k in tree._tree()["types"][ref] if k != tree.MAP_KEY)


@st.composite
def mutated(draw: Any, base: Any) -> Any:
    """`base` with 1-3 edits: a value replaced, a key removed, or a key added (a real field
    of that place, or noise) with a hostile value."""
    data = copy.deepcopy(base)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(_paths(data)))
        parent = data
        for key in path[:-1]:
            parent = parent[key]
        op = draw(st.sampled_from(["replace", "replace", "delete", "add", "add"]))
        if op == "add":
            target = parent[path[-1]] if path else data
            if isinstance(target, dict):
                real = _real_fields(data, path)
                key = draw(st.sampled_from(real) if real and draw(st.booleans())
                           else st.text(min_size=1, max_size=8))
                target[key] = draw(NASTY)
        elif not path:
            continue
        elif op == "replace":
            parent[path[-1]] = draw(NASTY)
        else:
            del parent[path[-1]]
    return data


def _dump(data: Any) -> str:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


WHOLE_FILE = ("no objects in file", "expected one", "file size", "empty")


def _names_file(exc: LabError, file: Path) -> None:
    """The error names the file, and the field or the line unless it is about the whole
    file (empty, too big, several documents where one is expected)."""
    text = str(exc)
    assert file.name in text or str(file) in text, text
    if isinstance(exc, InputError) and exc.file == str(file):
        assert exc.field or exc.line or any(w in exc.problem for w in WHOLE_FILE), text


def _expect_clean(call: Any, file: Path) -> Any:
    try:
        return call()
    except LabError as exc:  # anything else propagates and fails the test
        _names_file(exc, file)
        return None


# --- manifests: load + kflab's validation (what `kflab apply` does before applying) ---------

MANIFESTS = [REPO / p for p in ("scenarios/katib-hpo/solutions/tpe.yaml",
                                "scenarios/grid-search-pipeline/solutions/grid.yaml",
                                "scenarios/distributed-training/solutions/pytorchjob.yaml",
                                "scenarios/kserve-serving/assets/isvc.yaml")]
PIPELINE_RUN = {"apiVersion": "kflab.dev/v1", "kind": "PipelineRun", "metadata": {"name": "r"},
                "spec": {"pipeline": "tiny.py", "arguments": {"n": 3}}}


def _plan(tmp: Path, text: str | bytes) -> None:
    from lab.backends.local import LocalBackend
    from lab.kube.manifests import plan

    path = tmp / "m.yaml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    _expect_clean(lambda: plan(LocalBackend(str(tmp / "state")), [path]), path)


@pytest.mark.parametrize("base", [*MANIFESTS, "pipelinerun"],
                         ids=lambda b: getattr(b, "stem", b))
def test_manifest_mutations(base: Any, tmp_path_factory: pytest.TempPathFactory) -> None:
    data = PIPELINE_RUN if base == "pipelinerun" else yaml.safe_load(base.read_text())

    @FUZZ
    @given(mutated(data))
    def run(doc: Any) -> None:
        _plan(tmp_path_factory.mktemp("m"), _dump(doc))

    run()


@FUZZ
@given(RAW)
def test_manifest_raw_bytes(tmp_path_factory: pytest.TempPathFactory, raw: bytes) -> None:
    _plan(tmp_path_factory.mktemp("raw"), raw)


# --- scenario.yaml, lab.yaml, request bodies, kubeconfigs -----------------------------------

SCENARIO = yaml.safe_load((REPO / "tests/data/scenarios/hello-files/scenario.yaml").read_text())


def _scenario(tmp: Path, raw: bytes) -> None:
    from lab.scenarios.loader import load_scenario

    folder = tmp / "hello-files"
    (folder / "steps").mkdir(parents=True)
    for step in ("greet", "count"):
        (folder / f"steps/{step}.md").write_text(step)
    (folder / "scenario.yaml").write_bytes(raw)
    _expect_clean(lambda: load_scenario(folder), folder / "scenario.yaml")


@FUZZ
@given(st.one_of(mutated(SCENARIO).map(lambda d: _dump(d).encode()), RAW))
def test_scenario_files(tmp_path_factory: pytest.TempPathFactory, raw: bytes) -> None:
    _scenario(tmp_path_factory.mktemp("s"), raw)


LAB = {"provider": "vagrant-libvirt", "cpus": 4, "memory": "8Gi",
       "vagrant": {"network": "user"}, "components": ["katib"]}


@FUZZ
@given(st.one_of(mutated(LAB).map(lambda d: _dump(d).encode()), RAW))
def test_lab_profiles(tmp_path_factory: pytest.TempPathFactory, raw: bytes) -> None:
    from lab import config

    path = tmp_path_factory.mktemp("p") / "lab.yaml"
    path.write_bytes(raw)
    _expect_clean(lambda: config.load(path), path)


BODY = {"instances": [[5.1, 3.5, 1.4, 0.2]], "inputs": [{"name": "x", "shape": [1, 4],
                                                         "datatype": "FP32", "data": [1]}]}


@FUZZ
@given(st.one_of(mutated(BODY).map(lambda d: __import__("json").dumps(d).encode()),
                 mutated(BODY).map(lambda d: _dump(d).encode()), RAW))
def test_request_bodies(tmp_path_factory: pytest.TempPathFactory, raw: bytes) -> None:
    from lab.kube.inference import load_request

    path = tmp_path_factory.mktemp("b") / "body.json"
    path.write_bytes(raw)
    _expect_clean(lambda: load_request(path), path)


KUBECONFIG = {"apiVersion": "v1", "kind": "Config", "current-context": "c",
              "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
              "clusters": [{"name": "k", "cluster": {"server": "https://127.0.0.1:6443",
                                                    "certificate-authority": "ca.crt"}}],
              "users": [{"name": "u", "user": {"token": "t"}}]}


@FUZZ
@given(st.one_of(mutated(KUBECONFIG).map(lambda d: _dump(d).encode()), RAW))
def test_kubeconfigs(tmp_path_factory: pytest.TempPathFactory, raw: bytes) -> None:
    from lab.providers.existing import extract_context

    path = tmp_path_factory.mktemp("k") / "config"
    path.write_bytes(raw)
    try:
        extract_context(path, "")
    except InputError as exc:
        _names_file(exc, path)
    except LabError as exc:  # a context or cluster missing: named with the file
        assert str(path) in str(exc)


# --- raw bytes through the real CLI --------------------------------------------------------

def _cli(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "KFLAB_STATE": str(tmp / "state")}
    return subprocess.run([sys.executable, "-m", "lab.cli", *args], capture_output=True,
                          text=True, env=env, cwd=tmp, timeout=120, check=False)


@pytest.mark.parametrize("command", ["apply", "predict", "scenario", "doctor"])
def test_cli_raw_bytes(command: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    @CLI_FUZZ
    @given(RAW)
    def run(raw: bytes) -> None:
        tmp = tmp_path_factory.mktemp("cli")
        name = {"apply": "m.yaml", "predict": "body.json", "scenario": "sc/scenario.yaml",
                "doctor": "lab.yaml"}[command]
        path = tmp / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(raw)
        args = {"apply": ["apply", "-f", str(path)],
                "predict": ["predict", "iris", "-f", str(path)],
                "scenario": ["scenario", "validate", str(path.parent)],
                "doctor": ["doctor", "--json", "-p", str(path)]}[command]
        out = _cli(tmp, *args)
        assert "Traceback" not in out.stderr + out.stdout, out.stderr
        assert out.returncode != 70, out.stderr  # the safety net: a bug, not bad input
        if command == "doctor" and out.returncode in (0, 1):
            return  # random bytes that happen to be a valid (empty) profile
        assert out.returncode == 2, (out.returncode, out.stderr)
        assert out.stderr.startswith("error: "), out.stderr
        assert path.name in out.stderr or "not found" in out.stderr, out.stderr

    run()


# --- exhaustive: every real field of every place in a manifest, with each hostile value ----

HOSTILE_VALUES = [5, -1, 10**12, 1.5, True, None, "abc", "a" * 300, "/data/[/raw]", "a\x00b",
                  [5], {"x": 5}]


def _slots(data: Any) -> list[tuple[tuple, str]]:
    """(path of a mapping, a real field of it) for every mapping in the object (nested
    object metadata aside: nothing reads it)."""
    return [(path, f) for path in _paths(data) if isinstance(_at(data, path), dict)
            and "metadata" not in path[1:] for f in _real_fields(data, path)]


def _at(data: Any, path: tuple) -> Any:
    for key in path:
        data = data[key]
    return data


@pytest.mark.parametrize("base", [*MANIFESTS, "pipelinerun"],
                         ids=lambda b: getattr(b, "stem", b))
def test_every_field_slot(base: Any, tmp_path: Path) -> None:
    """Type confusion everywhere a real field can be: fuzzing by chance rarely puts `5` in
    exactly `containers[0].env`, so each (place, field, value) is tried once, on the
    validation `kflab apply` runs before anything is applied."""
    from lab.backends.local import LocalBackend
    from lab.kube.manifests import validate_document
    from lab.yamlio import Located

    data = PIPELINE_RUN if base == "pipelinerun" else yaml.safe_load(base.read_text())
    (tmp_path / "tiny.py").write_text("x = 1\n")
    backend = LocalBackend(str(tmp_path / "state"))
    path = tmp_path / "m.yaml"
    tried = 0
    for where, field in _slots(data):
        for value in HOSTILE_VALUES:
            doc = copy.deepcopy(data)
            _at(doc, where)[field] = value
            located = Located(doc, str(path))
            _expect_clean(lambda d=located: validate_document(backend, d, tmp_path), path)
            tried += 1
    assert tried > 100
