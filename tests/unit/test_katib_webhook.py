"""Katib's pod webhook joins the primary container's command and args into one `sh -c`
string (katib v0.19.0 pkg/webhook/v1beta1/pod/utils.go wrapWorkerContainer). The stand-in
(tests/standins/katib_webhook.py) must reproduce upstream's own test cases
(inject_webhook_test.go TestWrapWorkerContainer), and a trial that kflab's cluster path
prepares must still run the learner's command after that rewrite."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.standins.katib_webhook import kubelet_expand, wrap_worker_container

METRIC = "metric.log"
EARLY = ("if test -f $$$$.pid && [ $(head -n 1 $$.pid) = early-stopped ]; then echo Training "
         "Container was Early Stopped; else echo Training Container was Failed; exit 1; fi")


@pytest.mark.parametrize(("command", "early", "want_args"), [
    # "Tensorflow container without sh -c"
    (["python main.py"], False, f"python main.py 1>{METRIC} 2>&1 && echo completed > $$$$.pid"),
    # "Tensorflow container with sh -c"
    (["sh", "-c", "python main.py"], False,
     f"python main.py 1>{METRIC} 2>&1 && echo completed > $$$$.pid"),
    # "Container with early stopping command"
    (["python main.py"], True,
     f"python main.py 1>{METRIC} 2>&1 || {EARLY} && echo completed > $$$$.pid"),
])
def test_the_standin_webhook_matches_upstreams_cases(command: list[str], early: bool,
                                                     want_args: str) -> None:
    container = {"name": "tensorflow", "command": command}
    wrap_worker_container(container, collector="StdOut", metrics_file=METRIC,
                          early_stopping=early)
    assert container == {"name": "tensorflow", "command": ["sh", "-c"], "args": [want_args]}


def test_the_join_is_unquoted_and_sh_c_is_kept_only_in_front() -> None:
    later = {"command": ["python3", "run.py", "--", "sh", "-c", "python3 train.py --lr=0.1"]}
    wrap_worker_container(later, collector="None", metrics_file="/var/log/katib/metrics.log")
    assert later["command"] == ["sh", "-c"]
    assert later["args"] == ["python3 run.py -- sh -c python3 train.py --lr=0.1 && echo "
                             "completed > /var/log/katib/$$$$.pid"]
    assert kubelet_expand("a $$$$.pid $(head -n 1 $$.pid) $(HOME)") == \
        "a $$.pid $(head -n 1 $$.pid) $(HOME)"


def _trial_container(command: list[str], args: list[str] | None = None) -> tuple:
    from lab.backends.cluster.tuning.handler import prepare

    container = {"name": "training-container", "image": "python:3.11-slim",
                 "command": command, **({"args": args} if args else {})}
    exp = {"apiVersion": "kubeflow.org/v1beta1", "kind": "Experiment",
           "metadata": {"name": "hpo", "namespace": "lab"},
           "spec": {"trialTemplate": {"primaryContainerName": "training-container",
                                      "trialSpec": {"apiVersion": "batch/v1", "kind": "Job",
                                                    "spec": {"template": {"spec": {
                                                        "restartPolicy": "Never",
                                                        "containers": [container]}}}}}}}
    return exp, prepare


@pytest.mark.parametrize(("command", "args"), [
    (["sh", "-c", "python3 train.py --lr=${trialParameters.lr} --name='a b'"], None),
    (["python3", "train.py", "--lr=${trialParameters.lr}", "--name=a b"], None),
    (["python3"], ["train.py", "--lr=${trialParameters.lr}", "--name=a b"]),
])
def test_a_kflab_trial_runs_the_learners_command_after_the_webhooks_join(
        tmp_path: Path, command: list[str], args: list[str] | None) -> None:
    """Katib substitutes the parameter, the webhook joins (StdOut collector), the kubelet
    expands, `sh` runs it: the trial's own script must run and its metric reach the file.
    The pod's mounts are played by replacing their paths with local folders (no mount
    namespace here)."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "train.py").write_text(
        "import argparse\np = argparse.ArgumentParser()\np.add_argument('--lr')\n"
        "p.add_argument('--name')\na = p.parse_args()\n"
        "print(f'name={a.name!r}')\nprint(f'accuracy={float(a.lr) * 2}')\n")
    exp, prepare = _trial_container(command, args)
    exp, _, files = prepare(exp, work)
    pod = exp["spec"]["trialTemplate"]["trialSpec"]["spec"]["template"]["spec"]
    container = pod["containers"][0]
    files_dir, work_dir, logs = tmp_path / "files", tmp_path / "pod-work", tmp_path / "katib"
    for d in (files_dir, work_dir, logs):
        d.mkdir()
    for rel, data in files.entries.values():
        (files_dir / rel).parent.mkdir(parents=True, exist_ok=True)
        (files_dir / rel).write_bytes(data)
    wrap_worker_container(container, collector="StdOut",
                          metrics_file="/var/log/katib/metrics.log")
    script = kubelet_expand(container["args"][0]).replace("${trialParameters.lr}", "0.25")
    for mount, local in (("/kflab/files", files_dir), ("/kflab/work", work_dir),
                         ("/var/log/katib", logs)):
        script = script.replace(mount, str(local))
    assert container["command"] == ["sh", "-c"]
    done = subprocess.run(["sh", "-c", script], cwd=work_dir, capture_output=True, text=True,
                          timeout=60, env={"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"})
    out = (logs / "metrics.log").read_text()
    assert done.returncode == 0, (done.stderr, out)
    assert "accuracy=0.5" in out and "name='a b'" in out, out
    assert [p.read_text().strip() for p in logs.glob("*.pid")] == ["completed"]
