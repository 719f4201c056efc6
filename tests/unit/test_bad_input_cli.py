"""Bad input through the real CLI, in a subprocess: exit code 2, one error naming the file and
the field, never a traceback. The cases include every kind of the issue's 23 tracebacks on
input (non-UTF-8 bytes, `2024-13-45`, deep nesting, `containerPort: abc`, `env: 5`, a
300-character name, `replicas: 10**12`) and the absurd values lab/limits.py refuses."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from lab import limits

REPO = Path(__file__).resolve().parents[2]

JOB = """\
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: job}
spec:
  nprocPerNode: "1"
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      template:
        spec:
          containers:
            - name: pytorch
              command: [python3, -c, "print('ran')"]
              env: [{name: A, value: "1"}]
              ports: [{name: pytorchjob-port, containerPort: 23456}]
"""

EXPERIMENT = """\
apiVersion: kubeflow.org/v1beta1
kind: Experiment
metadata: {name: exp}
spec:
  objective: {type: minimize, objectiveMetricName: loss}
  algorithm: {algorithmName: random}
  maxTrialCount: 2
  parallelTrialCount: 1
  parameters:
    - {name: x, parameterType: int, feasibleSpace: {min: "1", max: "4"}}
  trialTemplate:
    primaryContainerName: training-container
    trialParameters: [{name: x, reference: x}]
    trialSpec:
      apiVersion: batch/v1
      kind: Job
      spec:
        template:
          spec:
            containers:
              - name: training-container
                command: [python3, -c, "print('loss=1')", "${trialParameters.x}"]
                env: [{name: A, value: "1"}]
"""

ISVC = """\
apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata: {name: iris}
spec:
  predictor:
    model:
      modelFormat: {name: sklearn}
      storageUri: file:///models/iris
"""


FIFO = b"\x00<fifo>"  # a `files` value: made with os.mkfifo (reading one would block)
MANIFEST = ('{"kind": "kflab-export", "format": 1, "student": "Eve", "state_root": "/x", '
            '"scenarios": {"pipeline-classifiers": {"workdir": "/x/w"}}}')


def deep_tar(depth: int) -> bytes:
    """A hand-in archive with one member `depth` folders deep."""
    import io
    import tarfile

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        info = tarfile.TarInfo("/".join(["d"] * depth) + "/f")
        tar.addfile(info, io.BytesIO(b""))
    return buf.getvalue()


def deep(n: int) -> str:
    return "".join(" " * i + "a:\n" for i in range(n))


@dataclass
class Case:
    """`files` are written to a temp folder; `args` may name them as {name}."""

    id: str
    files: dict[str, str | bytes]
    args: list[str]
    expect: list[str]  # substrings of stderr besides the file name

    def command(self, folder: Path) -> list[str]:
        paths = {k.replace(".", "_").replace("/", "_"): str(folder / k) for k in self.files}
        return [a.format(dir=folder, **paths) for a in self.args]


def apply(id: str, text: str | bytes, *expect: str) -> Case:
    return Case(id, {"m.yaml": text}, ["apply", "-f", "{m_yaml}"], list(expect))


SUB: Callable[[str, str, str], str] = lambda text, old, new: text.replace(old, new, 1)  # noqa: E731
WORKER = ("    Worker:\n      replicas: 1000000000000\n      template:\n        spec:\n"
          "          containers:\n            - {name: pytorch, command: [python3, x.py]}\n")

CASES = [
    # --- the loader ---
    apply("non-utf8", JOB.encode().replace(b"name: job", b"name: j\xf6b"),
          "not UTF-8", "byte 0xf6 at byte offset"),
    apply("timestamp-2024-13-45", SUB(EXPERIMENT, "parallelTrialCount: 1",
                                      "parallelTrialCount: 2024-13-45"),
          "spec.parallelTrialCount", "expected int, got str ('2024-13-45')"),
    apply("deep-block-nesting", deep(500), "MAX_DEPTH"),
    apply("deep-flow-nesting", "a: " + "[" * 100_000 + "]" * 100_000, "nesting depth"),
    apply("alias-bomb", "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [{', '.join([f'*{p}'] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi")),
        "MAX_NODES"),
    apply("huge-integer", SUB(JOB, "replicas: 1", "replicas: " + "9" * 30), "64 bits",
          "spec.pytorchReplicaSpecs.Master.replicas"),
    apply("binary-tag", SUB(JOB, "value: \"1\"", "value: !!binary aGk="), "!!binary"),
    apply("python-tag", SUB(JOB, "value: \"1\"", "value: !!python/object/apply:os.system [id]"),
          "!!python"),
    apply("oversize-file", "# " + "x" * limits.MAX_FILE_BYTES + "\n", "MAX_FILE_BYTES"),
    apply("not-a-mapping", "- just\n- a list\n", "a manifest must be a mapping"),
    apply("metadata-list", SUB(JOB, "metadata: {name: job}", "metadata: [job]"),
          "metadata.name"),
    # --- PyTorchJob fields ---
    apply("containerPort-abc", SUB(JOB, "containerPort: 23456", "containerPort: abc"),
          "spec.pytorchReplicaSpecs.Master.template.spec.containers[0].ports[0].containerPort"),
    apply("containerPort-range", SUB(JOB, "containerPort: 23456", "containerPort: 70000"),
          "containerPort", "65535"),
    apply("ports-5", SUB(JOB, "ports: [{name: pytorchjob-port, containerPort: 23456}]",
                         "ports: 5"), "containers[0].ports", "expected a list"),
    apply("env-5", SUB(JOB, 'env: [{name: A, value: "1"}]', "env: 5"),
          "spec.pytorchReplicaSpecs.Master.template.spec.containers[0].env",
          "expected a list"),
    apply("replicas-10**12", JOB + WORKER, "spec.pytorchReplicaSpecs.Worker.replicas",
          "MAX_LOCAL_PROCESSES"),
    apply("nproc-huge", SUB(JOB, 'nprocPerNode: "1"', 'nprocPerNode: "100000"'),
          "spec.nprocPerNode", "MAX_LOCAL_PROCESSES"),
    apply("nproc-unicode-digit", SUB(JOB, 'nprocPerNode: "1"', 'nprocPerNode: "²"'),
          "spec.nprocPerNode", "not a number"),
    apply("rdzvConf-5", JOB + WORKER.replace("1000000000000", "1")
          + "  elasticPolicy: {rdzvConf: 5}\n", "spec.elasticPolicy.rdzvConf"),
    apply("replica-specs-list", SUB(JOB, "  pytorchReplicaSpecs:\n",
                                    "  pytorchReplicaSpecs: [1, 2]\n  x:\n"),
          "spec.pytorchReplicaSpecs"),
    apply("name-300", SUB(JOB, "name: job", "name: " + "a" * 300), "metadata.name",
          "300 characters"),
    apply("command-empty", SUB(JOB, "command: [python3, -c, \"print('ran')\"]", "command: []"),
          "containers[0].command", "empty"),
    apply("trainjob-command-empty", "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\n"
          "metadata: {name: tj}\nspec:\n  runtimeRef: {name: torch-distributed}\n"
          "  trainer: {numNodes: 1, command: []}\n", "spec.trainer.command", "empty"),
    # --- Experiment fields ---
    apply("trial-env-5", SUB(EXPERIMENT, 'env: [{name: A, value: "1"}]', "env: 5"),
          "spec.trialTemplate.trialSpec.spec.template.spec.containers[0].env"),
    apply("parallel-10**12", SUB(EXPERIMENT, "parallelTrialCount: 1",
                                 "parallelTrialCount: 1000000000000"),
          "spec.parallelTrialCount", "MAX_PARALLEL_TRIALS"),
    apply("max-trials-huge", SUB(EXPERIMENT, "maxTrialCount: 2", "maxTrialCount: 99999999"),
          "spec.maxTrialCount", "MAX_TRIAL_COUNT"),
    apply("grid-10**12", SUB(SUB(EXPERIMENT, "algorithmName: random", "algorithmName: grid"),
                             'max: "4"', 'max: "1000000000000"'),
          "spec.parameters", "MAX_GRID_POINTS"),
    apply("int-bound-huge", SUB(EXPERIMENT, 'max: "4"', 'max: "' + "9" * 40 + '"'),
          "spec.parameters[0].feasibleSpace.max"),
    apply("trial-containers-text", SUB(EXPERIMENT, "            containers:\n",
                                       "            containers: text\n            x:\n"),
          "spec.trialTemplate.trialSpec"),
    apply("spec-text", SUB(EXPERIMENT, "spec:\n", "spec: text\nx:\n"), "spec"),
    # --- InferenceService fields ---
    apply("storage-nul", SUB(ISVC, "storageUri: file:///models/iris", 'storageUri: "a\\0b"'),
          "spec.predictor.model.storageUri"),
    apply("storage-bad-url", SUB(ISVC, "file:///models/iris", "'http://[oops'"),
          "spec.predictor.model.storageUri"),
    apply("storage-nouser", SUB(ISVC, "file:///models/iris", "'~no-such-user-here/m'"),
          "spec.predictor.model.storageUri"),
    apply("storage-too-long", SUB(ISVC, "/models/iris", "/" + "m" * 5000),
          "spec.predictor.model.storageUri"),
    apply("model-env-5", ISVC.replace("      storageUri:", "      env: 5\n      storageUri:")
          .replace("file:///models/iris", "."), "spec.predictor.model.env"),
    # --- the other loaders ---
    Case("predict-body-json", {"b.json": '{"instances": [[1, 2]\n'},
         ["predict", "iris", "-f", "{b_json}"], ["invalid JSON", "column"]),
    Case("predict-body-deep", {"b.json": "[" * 100_000 + "]" * 100_000},
         ["predict", "iris", "-f", "{b_json}"], ["MAX_DEPTH"]),
    Case("predict-body-huge-int", {"b.json": '{"instances": [[' + "9" * 5000 + "]]}"},
         ["predict", "iris", "-f", "{b_json}"], ["4300 digits"]),
    Case("grade-deep", {"g/grade.json": '{"kind": "kflab-grade", "x": ' + "[" * 100_000
                        + "]" * 100_000 + "}"},
         ["grade", "collect", "{dir}/g"], ["nesting depth"]),
    Case("grade-huge-int", {"g/grade.json": '{"kind": "kflab-grade", "x": ' + "9" * 5000
                            + "}"},
         ["grade", "collect", "{dir}/g"], ["4300 digits"]),
    Case("predict-body-bytes", {"b.json": b'{"instances": ["\xff"]}'},
         ["predict", "iris", "-f", "{b_json}"], ["not UTF-8"]),
    Case("lab-yaml-bomb", {"lab.yaml": "provider: host\nx: &x [a, a, a, a, a, a, a, a]\n" + "".join(
        f"{c}: &{c} [{', '.join([f'*{p}'] * 8)}]\n" for p, c in zip("xbcdefgh", "bcdefghi"))},
         ["doctor", "--json", "-p", "{lab_yaml}"], ["MAX_NODES"]),
    Case("lab-yaml-bytes", {"lab.yaml": b"provider: h\xc3\x28st\n"},
         ["doctor", "--json", "-p", "{lab_yaml}"], ["not UTF-8"]),
    Case("scenario-duplicate-key",
         {"sc/scenario.yaml": "id: sc\nid: sc\n", "sc/steps/x.md": "x"},
         ["scenario", "validate", "{dir}/sc"],
         ["field 'id'", "given twice"]),
    Case("profile-path-too-long", {}, ["doctor", "--json", "-p", "p" * 5000],
         ["no such lab profile"]),
    Case("init-path-too-long", {}, ["init", "--provider", "host", "-o", "p" * 5000],
         ["cannot write", "name too long"]),
    Case("pipeline-sys-exit", {"p.py": "import sys\nsys.exit(3)\n"},
         ["pipeline", "run", "{p_py}"], ["called sys.exit(3)", "__main__"]),
    Case("pipeline-yaml-alias-bomb", {"p.yaml": "pipelineInfo: {name: p}\n"
                                      "x: &x [a, a, a, a, a, a, a, a]\n" + "".join(
                                          f"{c}: &{c} [{', '.join([f'*{p}'] * 8)}]\n"
                                          for p, c in zip("xbcdefgh", "bcdefghi"))},
         ["pipeline", "run", "{p_yaml}", "--backend", "local"], ["MAX_NODES"]),
    Case("pipeline-yaml-python-tag", {"p.yaml": "root: !!python/object/apply:os.system [id]\n"},
         ["pipeline", "run", "{p_yaml}", "--backend", "local"], ["!!python"]),
    Case("bundle-manifest-deep", {"b/bundle.json": "[" * 100_000 + "]" * 100_000},
         ["bundle", "verify", "{dir}/b"], ["MAX_DEPTH"]),
    Case("pipeline-arg-deep", {"p.py": "x = 1\n"},
         ["pipeline", "run", "{p_py}", "-p", "a=" + "[" * 100_000], ["nested too deeply"]),
    # --- issue 34: every user file capped before it is read; FIFOs and devices refused ---
    Case("class-create-dev-zero", {}, ["class", "create", "/dev/zero", "--class", "ml-101"],
         ["/dev/zero", "not a regular file (a character device)"]),
    Case("class-create-fifo", {"roster.csv": FIFO},
         ["class", "create", "{roster_csv}", "--class", "ml-101"], ["(a FIFO)"]),
    Case("class-create-huge-roster", {"roster.csv": "student\n" + "a\n" * 600_000},
         ["class", "create", "{roster_csv}", "--class", "ml-101"], ["MAX_ROSTER_BYTES"]),
    apply("apply-fifo", FIFO, "(a FIFO)"),
    Case("predict-body-fifo", {"b.json": FIFO}, ["predict", "iris", "-f", "{b_json}"],
         ["(a FIFO)"]),
    Case("predict-body-dev-zero", {}, ["predict", "iris", "-f", "/dev/zero"],
         ["/dev/zero", "not a regular file"]),
    Case("notebook-fifo", {"nb.ipynb": FIFO}, ["notebook", "compile", "{nb_ipynb}"],
         ["(a FIFO)"]),
    Case("grade-collect-fifo", {"g/grade.json": FIFO}, ["grade", "collect", "{dir}/g"],
         ["(a FIFO)"]),
    Case("report-fifo", {"r.json": FIFO}, ["report", "{r_json}"], ["(a FIFO)"]),
    Case("handin-manifest-fifo", {"kflab-export.json": FIFO},
         ["scenario", "grade", "pipeline-classifiers", "--work", "{dir}"], ["(a FIFO)"]),
    Case("handin-manifest-deep", {"kflab-export.json": "[" * 100_000 + "]" * 100_000},
         ["scenario", "grade", "pipeline-classifiers", "--work", "{dir}"], ["nesting depth"]),
    Case("handin-journal-huge",
         {"state/progress/pipeline-classifiers.events.jsonl": b"{}\n" * 3_000_000,
          "kflab-export.json": MANIFEST, "state/progress/pipeline-classifiers.json": "{}",
          "work/pipeline-classifiers/pipeline.py": "x = 1\n"},
         ["scenario", "grade", "pipeline-classifiers", "--work", "{dir}"],
         ["MAX_JOURNAL_BYTES"]),
    Case("handin-archive-deep-path", {"h.tar.gz": deep_tar(80)},
         ["scenario", "grade", "pipeline-classifiers", "--work", "{h_tar_gz}"],
         ["MAX_HANDIN_DEPTH"]),
    Case("scenario-cleanup-a-run",
         {"sc/scenario.yaml": "id: sc\ntitle: t\nlevel: beginner\nduration: 1m\n"
                              "cleanup: [PipelineRun]\nsteps:\n  - id: a\n    title: a\n"
                              "    text: a.md\n    checks: [{type: pipeline-run, name: r, "
                              "message: m}]\n", "sc/a.md": "a"},
         ["scenario", "validate", "{dir}/sc"], ["field 'cleanup[0]'", "a missing one grades"]),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_bad_input_exits_2_naming_file_and_field(case: Case, tmp_path: Path) -> None:
    for name, content in case.files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if content is FIFO:  # nothing ever writes to it: a read would block for ever
            os.mkfifo(path)
        elif isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
    args = case.command(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(REPO), "KFLAB_STATE": str(tmp_path / "state"),
           "COLUMNS": "200"}
    out = subprocess.run([sys.executable, "-m", "lab.cli", *args], capture_output=True,
                         text=True, env=env, cwd=tmp_path, timeout=120, check=False)
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert "Traceback" not in out.stderr + out.stdout
    assert "error:" in out.stderr and "bug in kflab" not in out.stderr
    if case.files and case.id != "pipeline-arg-deep":  # a command-line value has no file
        assert next(iter(case.files)).split("/")[-1] in out.stderr
    for text in case.expect:
        assert text in out.stderr, (text, out.stderr)
    assert len(out.stderr.splitlines()) <= 4, out.stderr  # one error (and its fix), no dump


BOOM = """
import sys
import click
from lab import cli
from lab.cli.root import cli as group

@group.command("boom")
def boom():
    raise RuntimeError("a bug\\x1b[2J in kflab")

sys.argv = ["kflab", "boom"]
cli.main()
"""


def test_an_unexpected_error_is_one_line_and_a_saved_traceback(tmp_path: Path) -> None:
    """The last-resort net in main(): a command that raises (injected here, since every real
    case is fixed at its source) prints one line and where the traceback was saved."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "TMPDIR": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", BOOM], capture_output=True, text=True,
                         env=env, timeout=60, check=False)
    assert out.returncode == 70, out.stderr
    assert "Traceback" not in out.stderr
    lines = out.stderr.splitlines()
    assert lines[0] == "error: unexpected RuntimeError: a bug\\x1b[2J in kflab"  # no ESC sent
    saved = Path(lines[1].rsplit(" ", 1)[1])
    assert saved.parent == tmp_path and oct(saved.stat().st_mode)[-3:] == "600"
    report = saved.read_text()
    assert "Traceback" in report and "RuntimeError: a bug" in report and "'boom'" in report
