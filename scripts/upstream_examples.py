#!/usr/bin/env python3
"""Run upstream examples unmodified through `kflab apply`, with what their image holds.

A dev harness (not shipped, not part of the test suite). The reviewers of the local
backend run each upstream example with its container's files available; this does the
same on a machine without a cluster or a registry:

- the manifest is read from the upstream tree given on the command line (a bare git
  mirror and a tag, or a checked-out folder) and written unchanged to a scratch folder;
- the files of the example's container image are taken from the same tree, from the
  image's Dockerfile (its ADD/COPY sources, its WORKDIR and `RUN mkdir` folders), and
  placed at their image paths inside a private mount namespace (`unshare -m`: an overlay
  on /opt, a bind mount for a top-level folder such as /katib): nothing is written to the
  host's /opt, and a top-level mount point this harness had to create is removed after;
- the dataset the program would download is made offline: a small synthetic FashionMNIST
  in the real IDX file format (class patterns plus noise, a share of wrong labels, so
  curves fall but never reach the examples' goals) at the path the program reads
  (`data/FashionMNIST/raw/*`, relative to the trial's working folder);
- each example gets a fresh KFLAB_STATE; the verdict compares the final status with what
  Katib v0.19.0 / the Training Operator v1.9.0 give for the same run (see EXPECT).

torchvision: the PyPI wheel matching torch 2.13 (torchvision 0.28.0) is built against
torch's CUDA libraries, so its compiled ops (`_C.so`) cannot load with the CPU torch, and
its import then fails on two unguarded op registrations (nms, qnms). The harness gives
the trial processes a `sitecustomize` (PYTHONPATH) that declares those two op schemas
before torchvision registers them; torchvision's own pure-Python datasets and transforms
(all mnist.py uses) run unchanged, and no compiled op is ever called.

Usage (as root, for the mount namespace):
  .venv/bin/python scripts/upstream_examples.py \
      --katib /work/.mirror/kubeflow+katib/repo \
      --training-operator /work/.mirror/kubeflow+training-operator/repo [--only grid]
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import io
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
KFLAB = Path(sys.executable).with_name("kflab")
PYTORCH_MNIST = ("katib", "examples/v1beta1/trial-images/pytorch-mnist/Dockerfile.cpu")
# image -> (tree, Dockerfile that builds it). The Training Operator's simple.yaml names an
# older build of the same Katib trial image (kubeflowkatib/pytorch-mnist:v1beta1-45c5727);
# its sources at Katib v0.19.0 are the closest the fetched trees hold.
IMAGES = {
    "ghcr.io/kubeflow/katib/pytorch-mnist-cpu:v0.19.0": PYTORCH_MNIST,
    "docker.io/kubeflowkatib/pytorch-mnist:v1beta1-45c5727": PYTORCH_MNIST,
}


@dataclass
class Example:
    tree: str  # katib | training-operator
    path: str
    expect: str  # key of EXPECT
    checks: tuple[str, ...] = ()


KATIB = "examples/v1beta1/"
EXAMPLES = [
    Example("training-operator", "examples/pytorch/simple.yaml", "job-succeeded"),
    Example("katib", KATIB + "kubeflow-training-operator/pytorchjob-mnist.yaml",
            "max-trials", ("job-trials",)),
    Example("katib", KATIB + "metrics-collector/file-metrics-collector.yaml", "max-trials"),
    Example("katib", KATIB + "metrics-collector/file-metrics-collector-with-json-format.yaml",
            "max-trials"),
    Example("katib", KATIB + "early-stopping/median-stop-with-json-format.yaml",
            "max-trials"),
    Example("katib", KATIB + "early-stopping/median-stop.yaml", "max-trials"),
    Example("katib", KATIB + "metrics-collector/metrics-collection-strategy.yaml",
            "max-trials", ("strategies",)),
    Example("katib", KATIB + "resume-experiment/from-volume-resume.yaml", "resume"),
    Example("katib", KATIB + "resume-experiment/long-running-resume.yaml", "resume"),
    Example("katib", KATIB + "trial-template/trial-metadata-substitution.yaml", "max-trials",
            ("metadata-env",)),
] + [
    Example("katib", KATIB + "hp-tuning/" + name, "max-trials") for name in (
        "hyperband.yaml", "grid.yaml", "random.yaml", "tpe.yaml", "multivariate-tpe.yaml",
        "cma-es.yaml", "sobol.yaml", "bayesian-optimization.yaml",
        "hyperopt-distribution.yaml", "optuna-distribution.yaml")
]

# What upstream gives for these runs. Katib v0.19.0: an experiment whose goal is never
# reached (loss 0.001 / accuracy 0.99 are out of reach on FashionMNIST in 1-4 epochs, and
# on the synthetic set) ends Succeeded with reason ExperimentMaxTrialsReached once
# maxTrialCount trials completed (experiment_controller.go `ReconcileExperiment` /
# util/status_util.go `UpdateExperimentStatusCondition`), every trial Succeeded or
# EarlyStopped (medianstop) with its objective in status.observation. Training Operator
# v1.9.0: a PyTorchJob whose Master succeeds is Succeeded, "PyTorchJob <name> is
# successfully completed." (pytorchjob_controller.go `UpdateJobStatus`).
EXPECT = {
    "max-trials": "Experiment Succeeded (ExperimentMaxTrialsReached), maxTrialCount trials "
                  "Succeeded or EarlyStopped, each with a numeric objective, none Failed",
    # Katib's e2e test of these two examples (test/e2e/v1beta1/scripts/gh-actions/
    # run-e2e-experiment.py): once Succeeded, maxTrialCount + 1 and parallelTrialCount + 1;
    # the Experiment gets Restarting, keeps its trials and Succeeds again.
    "resume": "as max-trials, then applied again with maxTrialCount + 1 and "
              "parallelTrialCount + 1 (Katib's e2e step): Restarting, the trials kept, "
              "Succeeded (ExperimentMaxTrialsReached) with maxTrialCount + 1 trials",
    "job-succeeded": "PyTorchJob Succeeded (PyTorchJobSucceeded): 'PyTorchJob <name> is "
                     "successfully completed.', every replica succeeded",
}


# --- upstream trees --------------------------------------------------------------------

@dataclass
class Tree:
    where: Path
    ref: str | None  # a tag of a bare mirror; None for a checked-out folder

    def read(self, path: str) -> bytes:
        if self.ref is None:
            return (self.where / path).read_bytes()
        return subprocess.run(["git", "--git-dir", str(self.where), "show",
                               f"{self.ref}:{path}"], check=True,
                              capture_output=True).stdout

    def export(self, path: str, dest: Path) -> None:
        """Copy the folder `path` of the tree to `dest` (its contents)."""
        dest.mkdir(parents=True, exist_ok=True)
        if self.ref is None:
            shutil.copytree(self.where / path, dest, dirs_exist_ok=True)
            return
        data = subprocess.run(["git", "--git-dir", str(self.where), "archive", self.ref,
                               path], check=True, capture_output=True).stdout
        prefix = path.rstrip("/") + "/"
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            for member in tar.getmembers():
                if not member.name.startswith(prefix) or not member.isfile():
                    continue
                target = dest / member.name[len(prefix):]
                target.parent.mkdir(parents=True, exist_ok=True)
                src = tar.extractfile(member)
                assert src is not None
                target.write_bytes(src.read())
                target.chmod(0o755 if member.mode & 0o111 else 0o644)


def tree(arg: str, default_ref: str) -> Tree:
    where = Path(arg)
    bare = (where / "HEAD").exists() and (where / "objects").is_dir()
    return Tree(where, default_ref if bare else None)


# --- the image -------------------------------------------------------------------------

def stage_image(t: Tree, dockerfile: str, root: Path) -> list[str]:
    """Lay the files the Dockerfile puts in the image under `root` (root/opt/...), and
    return what was done, one line each. Only what these images use: ADD/COPY of a
    folder of the build context (the tree), WORKDIR and `RUN mkdir`."""
    done = []
    for raw in t.read(dockerfile).decode().splitlines():
        words = raw.split()
        if not words:
            continue
        op = words[0].upper()
        if op in ("ADD", "COPY") and len(words) == 3:
            src, dst = words[1], words[2]
            t.export(src, root / dst.lstrip("/"))
            done.append(f"{op} {src} -> {dst}")
        elif op == "WORKDIR":
            (root / words[1].lstrip("/")).mkdir(parents=True, exist_ok=True)
        elif op == "RUN" and len(words) >= 3 and words[1] == "mkdir":
            for d in words[2:]:
                if d.startswith("/"):
                    (root / d.lstrip("/")).mkdir(parents=True, exist_ok=True)
                    done.append(f"mkdir {d}")
    return done


def fashion_mnist(raw: Path, train: int = 1280, test: int = 200, seed: int = 7) -> None:
    """A small FashionMNIST in the IDX format torchvision reads (magic 0x0803 images,
    0x0801 labels, big-endian sizes): a fixed black-and-white pattern per class, a tenth
    of its pixels flipped, a fifth of the labels wrong, so a model learns something and
    never reaches the examples' goals."""
    import random

    rng = random.Random(seed)  # noqa: S311 -- a reproducible data set, not a secret
    patterns = [[rng.random() < 0.5 for _ in range(784)] for _ in range(10)]
    raw.mkdir(parents=True, exist_ok=True)
    for prefix, n in (("train", train), ("t10k", test)):
        images, labels = bytearray(), bytearray()
        for _ in range(n):
            label = rng.randrange(10)
            pat = patterns[label]
            images += bytes(255 if pat[i] != (rng.random() < 0.1) else 0 for i in range(784))
            labels.append(label if rng.random() >= 0.2 else rng.randrange(10))
        (raw / f"{prefix}-images-idx3-ubyte").write_bytes(
            struct.pack(">IIII", 0x0803, n, 28, 28) + bytes(images))
        (raw / f"{prefix}-labels-idx1-ubyte").write_bytes(
            struct.pack(">II", 0x0801, n) + bytes(labels))


SHIM = '''\
"""torchvision 0.28 from PyPI links torch's CUDA build; with the CPU torch its ops library
does not load and its import fails on two unguarded registrations. Declare those two
schemas first (written by scripts/upstream_examples.py; no op is implemented)."""
import importlib.abc
import sys


class _Schemas(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "torchvision._meta_registrations":
            sys.meta_path.remove(self)
            import torch
            import torchvision.extension as ext
            if not ext._has_ops():
                lib = torch.library.Library("torchvision", "FRAGMENT")
                for op in ("nms", "qnms"):
                    lib.define(op + "(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
                sys.modules["_kflab_torchvision_schemas"] = lib
        return None


sys.meta_path.insert(0, _Schemas())
'''


# --- one run -------------------------------------------------------------------------------

@dataclass
class Result:
    example: Example
    verdict: str = "?"
    reason: str = ""
    conditions: list[str] = field(default_factory=list)
    seconds: float = 0.0
    rc: int | None = None


def images_of(doc: Any) -> list[str]:
    out: list[str] = []
    if isinstance(doc, dict):
        for k, v in doc.items():
            if k == "image" and isinstance(v, str):
                out.append(v)
            else:
                out.extend(images_of(v))
    elif isinstance(doc, list):
        for v in doc:
            out.extend(images_of(v))
    return out


def inner(plan_file: Path) -> int:
    """Inside the private mount namespace: put the image's files in place, run kflab."""
    plan = json.loads(plan_file.read_text())
    subprocess.run(["mount", "--make-rprivate", "/"], check=True)
    for top, (src, upper, work) in plan["overlays"].items():
        subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                        f"lowerdir={src}:{top},upperdir={upper},workdir={work}", top],
                       check=True)
    for top, src in plan["binds"].items():
        subprocess.run(["mount", "--bind", src, top], check=True)
    # the image's files are put in place above, so its command runs as a local process
    # (kflab.dev/runtime: process for every resource), not in a container of the image
    env = dict(os.environ, KFLAB_STATE=plan["state"], PYTHONPATH=plan["shim"],
               KFLAB_RUNTIME="process")
    proc = subprocess.run([str(KFLAB), "apply", "-f", plan["manifest"]], env=env,
                          cwd=plan["cwd"], stdin=subprocess.DEVNULL)
    if proc.returncode != 0 or not plan.get("resume"):
        return proc.returncode
    import yaml

    manifest = Path(plan["manifest"])
    doc = yaml.safe_load(manifest.read_text())
    doc["spec"]["maxTrialCount"] += 1
    doc["spec"]["parallelTrialCount"] += 1
    manifest.write_text(yaml.safe_dump(doc, sort_keys=False))
    print("--- harness: applied again with maxTrialCount + 1, parallelTrialCount + 1 ---",
          flush=True)
    proc = subprocess.run([str(KFLAB), "apply", "-f", plan["manifest"]], env=env,
                          cwd=plan["cwd"], stdin=subprocess.DEVNULL)
    return proc.returncode


def kflab_json(state: Path, *args: str) -> Any:
    out = subprocess.run([str(KFLAB), "get", *args, "-o", "json"], capture_output=True,
                         text=True, env=dict(os.environ, KFLAB_STATE=str(state)))
    if out.returncode != 0:
        return None
    try:
        return json.loads(out.stdout)
    except ValueError:
        return None


USERS_LOCK = Path(tempfile.gettempdir()) / "kflab-upstream-examples.lock"


def _user_lock() -> int:
    """A shared lock held by every harness run while it runs: a top-level mount point
    (/katib) that one run made is removed only by a run that finds itself alone. Two runs
    side by side used to remove it under each other, and the other run's trials then
    failed ('bind /katib: No such file or directory'), a wrong verdict of the harness's
    own making."""
    fd = os.open(USERS_LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    fcntl.flock(fd, fcntl.LOCK_SH)
    return fd


def _alone(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # converts our shared lock
        return True
    except OSError:
        return False


def run_example(ex: Example, trees: dict[str, Tree], scratch: Path, timeout: float,
                with_image: bool) -> Result:
    import yaml

    res = Result(ex)
    name = ex.path.rsplit("/", 2)[-2] + "-" + Path(ex.path).stem
    work = scratch / name
    shutil.rmtree(work, ignore_errors=True)
    manifest_dir, state = work / "manifest", work / "state"
    manifest_dir.mkdir(parents=True)
    text = trees[ex.tree].read(ex.path)
    manifest = manifest_dir / Path(ex.path).name
    manifest.write_bytes(text)
    docs = [d for d in yaml.safe_load_all(text) if d]
    plan: dict[str, Any] = {"overlays": {}, "binds": {}, "state": str(state),
                            "resume": ex.expect == "resume",
                            "manifest": str(manifest), "cwd": str(manifest_dir),
                            "shim": str(work / "shim")}
    (work / "shim").mkdir()
    (work / "shim" / "sitecustomize.py").write_text(SHIM)
    created: list[Path] = []
    users = _user_lock()
    notes: list[str] = []
    wanted = sorted(set(images_of(docs)))
    missing = [i for i in wanted if i not in IMAGES or IMAGES[i][0] not in trees]
    if with_image and not missing:
        root = work / "image"
        for image in wanted:
            tname, dockerfile = IMAGES[image]
            notes += stage_image(trees[tname], dockerfile, root)
        fashion_mnist(manifest_dir / "data" / "FashionMNIST" / "raw")
        for top in sorted(p.name for p in root.iterdir()):
            host = Path("/") / top
            if host.is_dir() and top == "opt":
                up, wk = work / "upper" / top, work / "ovlwork" / top
                up.mkdir(parents=True)
                wk.mkdir(parents=True)
                plan["overlays"][str(host)] = (str(root / top), str(up), str(wk))
            else:
                with contextlib.suppress(FileExistsError):  # made by a run beside us
                    host.mkdir()
                    created.append(host)
                plan["binds"][str(host)] = str(root / top)
    (work / "plan.json").write_text(json.dumps(plan))
    log = work / "apply.log"
    t0 = time.monotonic()
    try:
        with open(log, "wb") as fh:
            proc = subprocess.Popen(
                ["unshare", "-m", "--propagation", "private", sys.executable,
                 str(Path(__file__).resolve()), "--inner", str(work / "plan.json")],
                stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
            try:
                res.rc = proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
                res.rc = None
    finally:
        if created and _alone(users):  # another harness run may still have it mounted:
            for host in created:  # removing it would detach its mount (Linux >= 3.18)
                with contextlib.suppress(OSError):
                    host.rmdir()
        os.close(users)
    res.seconds = time.monotonic() - t0
    judge(res, ex, docs, state, log, with_image and not missing, missing)
    return res


def _conds(obj: dict[str, Any]) -> list[str]:
    return [f"{c.get('type')}={c.get('status')} {c.get('reason', '')}: "
            f"{(c.get('message') or '')[:90]}" for c in (obj.get("status") or {})
            .get("conditions") or []]


def judge(res: Result, ex: Example, docs: list[dict[str, Any]], state: Path, log: Path,
          imaged: bool, missing: list[str]) -> None:
    out = log.read_text(errors="replace")
    if res.rc == 70 or "a bug in kflab" in out:
        res.verdict, res.reason = "crash", out.strip().splitlines()[-1][:200]
        return
    doc = docs[0]
    kind, meta = doc["kind"], doc["metadata"]
    ns = meta.get("namespace", "default")
    obj = kflab_json(state, f"{kind.lower()}/{meta['name']}", "-n", ns)
    if obj is None:
        if res.rc not in (0, None):
            res.verdict = "refused"
            res.reason = " ".join(out.strip().splitlines()[-3:])[:300]
        else:
            res.verdict, res.reason = "WRONG", "no object stored after apply"
        return
    res.conditions = _conds(obj)
    if res.rc is None:
        # without the image, an OnFailure replica crash-loops as its pod would
        res.verdict = "WRONG" if imaged else "needs-image"
        res.reason = "still running at the harness's timeout"
        return
    if kind == "Experiment":
        judge_experiment(res, ex, doc, obj, state, ns, imaged, missing)
    else:
        judge_job(res, doc, obj, imaged, missing)


def judge_experiment(res: Result, ex: Example, doc: dict[str, Any], obj: dict[str, Any],
                     state: Path, ns: str, imaged: bool, missing: list[str]) -> None:
    st = obj.get("status") or {}
    last = (st.get("conditions") or [{}])[-1]
    trials = (kflab_json(state, "trials", "-n", ns, "-l",
                         f"katib.kubeflow.org/experiment={doc['metadata']['name']}")
              or {}).get("items", [])
    metric = doc["spec"]["objective"]["objectiveMetricName"]
    states: dict[str, int] = {}
    bad = []
    for t in trials:
        tc = ((t.get("status") or {}).get("conditions") or [{}])[-1]
        states[tc.get("type", "?")] = states.get(tc.get("type", "?"), 0) + 1
        obs = {m["name"]: m for m in ((t.get("status") or {}).get("observation") or {})
               .get("metrics", [])}
        if tc.get("type") in ("Succeeded", "EarlyStopped"):
            try:
                float(obs[metric]["latest"])
            except (KeyError, ValueError):
                bad.append(f"{t['metadata']['name']}: no numeric {metric}")
    summary = (f"{last.get('type')} ({last.get('reason')}), {len(trials)} trials: "
               + ", ".join(f"{v} {k}" for k, v in sorted(states.items())))
    best = (st.get("currentOptimalTrial") or {}).get("observation") or {}
    best_v = {m["name"]: m.get("latest") for m in best.get("metrics") or []}
    if best_v:
        summary += f"; best {metric} {best_v.get(metric)}"
    if not imaged:
        failed = states.get("Failed", 0)
        res.verdict = "needs-image" if failed and last.get("type") == "Failed" else "WRONG"
        res.reason = summary + (f" (no image files for {', '.join(missing)})" if missing
                                else " (run with --no-image)")
        return
    max_trials = doc["spec"].get("maxTrialCount")
    extra = check_extras(ex, trials, doc, state)
    if ex.expect == "resume":
        max_trials += 1
        if not any(c.get("type") == "Restarting" and c.get("status") == "True"
                   for c in st.get("conditions") or []):
            extra.append("no Restarting condition after the second apply")
    ok = (last.get("type") == "Succeeded" and last.get("reason") == "ExperimentMaxTrialsReached"
          and len(trials) == max_trials and not bad and not extra
          and states.get("Succeeded", 0) + states.get("EarlyStopped", 0) == max_trials)
    res.verdict = "exact" if ok else "WRONG"
    res.reason = summary + "".join(f"; {b}" for b in bad[:3] + extra[:3])
    if not ok:
        res.reason += f" (upstream: {EXPECT[ex.expect]})"


def check_extras(ex: Example, trials: list[dict[str, Any]], doc: dict[str, Any],
                 state: Path) -> list[str]:
    problems = []
    for t in trials:
        tname = t["metadata"]["name"]
        run = t["spec"].get("runSpec") or {}
        if "metadata-env" in ex.checks:
            c = run["spec"]["template"]["spec"]["containers"][0]
            env = {e["name"]: e.get("value") for e in c.get("env") or []}
            want = {"TRIAL_NAME": tname, "TRIAL_NAMESPACE": t["metadata"]["namespace"],
                    "TRIAL_KIND": "Job", "TRIAL_API_VERSION": "batch/v1",
                    "TRIAL_LABEL_CUSTOM": "custom-label",
                    "TRIAL_ANNOTATION_CUSTOM": "custom-annotation"}
            diff = {k: env.get(k) for k, v in want.items() if env.get(k) != v}
            if diff:
                problems.append(f"{tname}: env {diff}")
        if "job-trials" in ex.checks:
            # mnist.py prints this in every replica once WORLD_SIZE > 1 (gloo by default)
            folder = state / "runs" / "trials" / t["metadata"]["namespace"] / tname
            for log in ("trial.log", "worker-0.log"):
                with contextlib.suppress(OSError):
                    if "Using distributed PyTorch with gloo backend" in \
                            (folder / log).read_text(errors="replace"):
                        continue
                problems.append(f"{tname}: {log} does not show a gloo process group")
        if "strategies" in ex.checks:
            obs = {m["name"]: m for m in ((t.get("status") or {}).get("observation") or {})
                   .get("metrics", [])}
            if set(obs) != {"loss", "accuracy"}:
                problems.append(f"{tname}: observation has {sorted(obs)}")
    return problems


def judge_job(res: Result, doc: dict[str, Any], obj: dict[str, Any], imaged: bool,
              missing: list[str]) -> None:
    st = obj.get("status") or {}
    conds = st.get("conditions") or []
    last = conds[-1] if conds else {}
    reps = {k: {kk: vv for kk, vv in v.items() if kk != "selector"}
            for k, v in (st.get("replicaStatuses") or {}).items()}
    summary = f"{last.get('type')} ({last.get('reason')}): {last.get('message')}; {reps}"
    want = f"{doc['kind']} {doc['metadata']['name']} is successfully completed."
    if not imaged:
        res.verdict = "needs-image" if last.get("type") != "Succeeded" else "WRONG"
        res.reason = summary + (f" (no image files for {', '.join(missing)})" if missing
                                else " (run with --no-image)")
        return
    specs = doc["spec"]["pytorchReplicaSpecs"]
    all_ok = all(reps.get(k, {}).get("succeeded") == v.get("replicas", 1)
                 for k, v in specs.items())
    ok = last.get("type") == "Succeeded" and last.get("message") == want and all_ok
    res.verdict = "exact" if ok else "WRONG"
    res.reason = summary


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--katib", help="kubeflow/katib tree (bare mirror or checkout)")
    ap.add_argument("--katib-ref", default="v0.19.0")
    ap.add_argument("--training-operator", help="kubeflow/training-operator tree")
    ap.add_argument("--training-operator-ref", default="v1.9.0")
    ap.add_argument("--only", action="append", default=[],
                    help="run the examples whose path contains this (repeatable)")
    ap.add_argument("--no-image", action="store_true",
                    help="run without the image's files and dataset (the earlier verdicts)")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per example")
    ap.add_argument("--keep", help="scratch folder to keep (default: a temporary one)")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--inner", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.inner:
        return inner(Path(args.inner))
    trees = {}
    if args.katib:
        trees["katib"] = tree(args.katib, args.katib_ref)
    if args.training_operator:
        trees["training-operator"] = tree(args.training_operator, args.training_operator_ref)
    chosen = [e for e in EXAMPLES if e.tree in trees
              and (not args.only or any(o in e.path for o in args.only))]
    if not chosen:
        print("no example chosen: give --katib and/or --training-operator", file=sys.stderr)
        return 2
    if os.geteuid() != 0:
        print("needs root (unshare -m and mounts)", file=sys.stderr)
        return 2
    scratch = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="kflab-up-"))
    scratch.mkdir(parents=True, exist_ok=True)
    results = []
    for ex in chosen:
        r = run_example(ex, trees, scratch, args.timeout, not args.no_image)
        results.append(r)
        print(f"{r.verdict:<11} {ex.tree} {ex.path.removeprefix(KATIB)}  "
              f"[{r.seconds:.0f} s, rc {r.rc}]\n            {r.reason}", flush=True)
        for c in r.conditions:
            print(f"            - {c}", flush=True)
        if args.json:  # after each example, so a long run can be read as it goes
            Path(args.json).write_text(json.dumps(
                [{"example": f"{x.example.tree} {x.example.path.removeprefix(KATIB)}",
                  "verdict": x.verdict, "reason": x.reason, "conditions": x.conditions,
                  "seconds": round(x.seconds, 1)} for x in results], indent=1))
    counts: dict[str, int] = {}
    for r in results:
        counts[r.verdict] = counts.get(r.verdict, 0) + 1
    print("total:", ", ".join(f"{v} {k}" for k, v in sorted(counts.items())))
    if not args.keep:
        shutil.rmtree(scratch, ignore_errors=True)
    return 1 if any(r.verdict in ("WRONG", "crash") for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
