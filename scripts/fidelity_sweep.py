#!/usr/bin/env python3
"""Apply every upstream example, unchanged, to the local backend and record what it gives.

The fidelity page's examples table (docs/fidelity.md) comes from here, never from a hand-written
list. The upstream trees are read from a folder the user names (`--trees DIR`), one checkout
per repository at its pinned tag (TREES below; `DIR/NAME/.git` lets the sweep check the tag):

    git clone --depth 1 -b v0.19.0 https://github.com/kubeflow/katib DIR/katib   (and the others)

Every example of those folders is listed (`list`: docs/fidelity/listing.json, path and sha256),
so a skipped one is visible: a test checks that the results cover the listing. `run` applies
each example as a user would -- `kflab apply -f FILE` from a copy of the example's own folder
(relative paths resolve as in the tree), or `kflab pipeline run FILE` for a KFP sample -- with a
fresh state folder, a timeout per example and the trial counts the example sets, and records a
verdict per column:

- `none`: no container engine (a PATH without podman and docker);
- `engine`: Podman (or Docker) on the machine. No registry is reachable here, so an image
  built from the example's own Dockerfile on a local Debian base (scripts/fidelity_images.py)
  stands in where the real image cannot be pulled, and the row says so.

Verdicts: exact (the outcome a cluster gives: a run to the same end, or the same refusal),
differs (it ran, with the deliberate differences `kflab apply` announced in `note:` lines and
the kflab.dev/local-differences annotation), refused (kflab refused it before anything ran,
with the reason it gave), needs (it ran, or was refused, for want of what the machine lacks --
the example's image, the network for its dataset or model, a GPU -- named in the row), wrong
(an outcome a cluster would not give: a bug). What upstream gives where it is not a clean
success is in EXPECT, with the source it was read from.

Figures that vary from run to run (best values, early-stop counts) are not recorded.

`render` writes docs/fidelity.md from lab/backends/local/fidelity (the rules) and the stored
results; tests/unit/test_fidelity_table.py fails when the page differs from a re-render.

Run it niced and in parts on a shared machine:
    nice -n 10 .venv/bin/python scripts/fidelity_sweep.py run --trees DIR --only katib/
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import fnmatch
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "docs" / "fidelity"
LISTING = DATA / "listing.json"
RESULTS = DATA / "results.json"
PAGE = REPO / "docs" / "fidelity.md"
COLUMNS = ("none", "engine")
VERDICTS = ("exact", "differs", "refused", "needs", "wrong")


@dataclass(frozen=True)
class Tree:
    name: str  # the folder under --trees
    repository: str
    tag: str
    folder: str  # the examples' folder inside the repository
    patterns: tuple[str, ...]  # which files are examples
    note: str = ""

    def files(self, root: Path) -> list[str]:
        base = root / self.name / self.folder
        found = []
        for path in sorted(base.rglob("*")):
            rel = path.relative_to(root / self.name).as_posix()
            if path.is_file() and any(fnmatch.fnmatch(path.name, p) for p in self.patterns) \
                    and not any(fnmatch.fnmatch(path.name, x) for x in SKIP_NAMES):
                found.append(rel)
        return found


SKIP_NAMES = ("*_test.py", "__init__.py")  # KFP samples' tests and packages, not samples
YAML = ("*.yaml", "*.yml")
# The trees kubeflow/manifests 26.03 pins (its README's component table; manifests/versions.yaml).
TREES = (
    Tree("katib", "kubeflow/katib", "v0.19.0", "examples/v1beta1", YAML),
    Tree("training-operator", "kubeflow/training-operator", "v1.9.2", "examples", YAML,
         "the repository is kubeflow/trainer now; the tag is in its history"),
    Tree("kserve", "kserve/kserve", "v0.16.0", "docs/samples/v1beta1", YAML),
    Tree("trainer", "kubeflow/trainer", "v2.1.0", "examples", YAML,
         "no YAML: its examples are notebooks that call the Kubeflow SDK's TrainerClient"),
    Tree("notebooks", "kubeflow/kubeflow", "v1.10.0",
         "components/notebook-controller/config/samples", YAML,
         "the Notebook controller's samples (components/example-notebook-servers holds "
         "Dockerfiles only)"),
    Tree("pipelines", "kubeflow/pipelines", "2.16.0", "samples", ("*.py",),
         "the SDK and server tag the lab pins (kfp 2.16.0 server)"),
)
BY_NAME = {t.name: t for t in TREES}

# What upstream gives where it is not a clean success (key: NAME/path in the tree). Each
# says what a cluster does and where that was read. A kflab outcome that matches is exact.
EXPECT: dict[str, dict[str, str]] = {
    "katib/examples/v1beta1/tekton/pipeline-run.yaml": {
        "outcome": "refused", "match": "learningRate",
        "why": "Katib's webhook refuses it: the trial parameter learningRate is never used "
               "in the template (pkg/webhook/v1beta1/experiment/validator validateTrialTemplate)"},
    "kserve/docs/samples/v1beta1/sklearn/v2/sklearn.yaml": {
        "outcome": "failed", "match": "mlserver.models",
        "why": "fails to load on KServe v0.16: its model-settings.json names "
               "mlserver.models.SKLearnModel, which MLServer 1.5 cannot import"},
    "kserve/docs/samples/v1beta1/xgboost/xgboost.yaml": {
        "outcome": "failed", "match": "mlserver.models",
        "why": "fails to load on KServe v0.16: its model-settings.json names "
               "mlserver.models.XGBoostModel, which MLServer 1.5 cannot import"},
    "kserve/docs/samples/v1beta1/sklearn/v1/perf.yaml": {
        "outcome": "refused", "match": "generateName",
        "why": "kubectl apply refuses it too (cannot use generate name with apply): the "
               "sample's README runs it with kubectl create"},
    "kserve/docs/samples/v1beta1/triton/torchscript/perf.yaml": {
        "outcome": "refused", "match": "generateName",
        "why": "kubectl apply refuses it too (cannot use generate name with apply): the "
               "sample's README runs it with kubectl create"},
    "pipelines/samples/tutorials/DSL - Control structures/DSL - Control structures.py": {
        "outcome": "FAILED",
        "why": "fails on purpose: fail_op exits 1 inside the ExitHandler to show the exit "
               "task still runs"},
    "pipelines/samples/core/exit_handler/exit_handler.py": {
        "outcome": "FAILED",
        "why": "fails on purpose: fail_op exits 1 inside the ExitHandler; the exit task runs"},
    "pipelines/samples/core/retry/retry.py": {
        "outcome": "SUCCEEDED|FAILED",
        "why": "a random draw, on a cluster too: each task exits with a random code and is "
               "retried (set_retry 10 and 5); every attempt fails in about 6% of runs "
               "(0.75^11 + 0.5^6), and the run is FAILED then"},
    "pipelines/samples/core/output_a_directory/output_a_directory.py": {
        "outcome": "import", "match": "",
        "why": "a typo at the tag ('ddef' on line 32): it is not valid Python anywhere"},
    "pipelines/samples/core/parallel_join/parallel_join.py": {
        "outcome": "import", "match": "",
        "why": "written for the KFP v1 SDK (kfp.dsl.ContainerOp): it does not import with "
               "kfp 2.x, on a cluster's SDK either"},
    "pipelines/samples/core/recursion/recursion.py": {
        "outcome": "import", "match": "",
        "why": "written for the KFP v1 SDK (dsl.graph_component): it does not import with "
               "kfp 2.x, on a cluster's SDK either"},
}

# A KFP sample with several pipelines, or required arguments, is run as its own test runs it
# (the sample's *_test.py or __main__): which function, which arguments.
PIPELINE_ARGS: dict[str, list[str]] = {}

NEEDS = (  # (pattern in the logs or the error, what the example needs)
    (re.compile(r"asks for \d+ GPU\(s\)|more GPUs than", re.I),
     "a GPU (more than this machine has)"),
    (re.compile(r"cannot pull image|pull access denied|manifest unknown|"
                r"pinging container registry|initializing source", re.I),
     "its image: it cannot be pulled here (no registry is reachable from this machine)"),
    (re.compile(r"/apis/v2beta1/healthz|/apis/v1beta1/healthz"),
     "a KFP API server: the file calls one (kfp.Client()) when it is imported"),
    (re.compile(r"No such file or directory: '(/[^']+)'|can't open file '(/[^']+)'"),
     "its image: the program {0} lives in the example's container image"),
    (re.compile(r"Temporary failure in name resolution|Network is unreachable|urlopen error|"
                r"Error downloading|"
                r"Failed to establish a new connection|Could not resolve host|"
                r"Name or service not known|ConnectionError|HTTPSConnectionPool"),
     "the network: it downloads what it uses (a dataset, a model, a component) from a host "
     "this machine cannot reach"),
    (re.compile(r"no container engine|install Podman|needs a container engine|"
                r"Podman or Docker", re.I),
     "its image: a container engine (Podman or Docker) would run it"),
)


# --- listing ------------------------------------------------------------------------------

def check_tags(root: Path) -> dict[str, str]:
    """Each tree's tag as its checkout says, or why it cannot be checked."""
    seen = {}
    for t in TREES:
        where = root / t.name
        if not where.is_dir():
            seen[t.name] = "missing"
            continue
        out = subprocess.run(["git", "-C", str(where), "describe", "--tags", "--exact-match"],
                             capture_output=True, text=True)
        seen[t.name] = out.stdout.strip() if out.returncode == 0 else "not a git checkout"
    return seen


def listing(root: Path) -> dict[str, Any]:
    tags = check_tags(root)
    wrong = {n: v for n, v in tags.items() if v != BY_NAME[n].tag}
    if wrong:
        raise SystemExit(f"{root}: these trees are not at their pinned tags: "
                         + ", ".join(f"{n} ({v}; want {BY_NAME[n].tag})"
                                     for n, v in wrong.items())
                         + "\n  fix: git clone --depth 1 -b TAG REPOSITORY DIR/NAME")
    files = {}
    for t in TREES:
        for rel in t.files(root):
            data = (root / t.name / rel).read_bytes()
            files[f"{t.name}/{rel}"] = hashlib.sha256(data).hexdigest()
    return {"trees": {t.name: {"repository": t.repository, "tag": t.tag, "folder": t.folder,
                               "patterns": list(t.patterns), "note": t.note} for t in TREES},
            "files": files}


# --- one example -----------------------------------------------------------------------------

@dataclass
class Outcome:
    verdict: str
    reason: str
    seconds: float = 0.0
    notes: tuple[str, ...] = ()
    rules: tuple[str, ...] = ()
    standin: str = ""

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"verdict": self.verdict, "reason": self.reason,
                               "seconds": round(self.seconds)}
        if self.notes:
            out["notes"] = list(self.notes)
        if self.rules:
            out["rules"] = list(self.rules)
        if self.standin:
            out["standin"] = self.standin
        return out


def kflab() -> str:
    return str(Path(sys.executable).with_name("kflab"))


ENGINES = ("podman", "docker", "nerdctl")


def path_without_engines(where: Path) -> str:
    """A PATH with every program of this one but the container engines' CLIs: one folder of
    links, so kflab finds no engine, as on a machine without one."""
    if not where.is_dir():
        where.mkdir(parents=True)
        for folder in os.environ.get("PATH", "").split(os.pathsep):
            with contextlib.suppress(OSError):
                for entry in os.scandir(folder or "."):
                    link = where / entry.name
                    if entry.name not in ENGINES and not link.exists() and \
                            os.access(entry.path, os.X_OK) and not entry.is_dir():
                        link.symlink_to(entry.path)
    return str(where)


def environment(state: Path, column: str) -> dict[str, str]:
    env = dict(os.environ, KFLAB_STATE=str(state), KFLAB_BACKEND="local", NO_COLOR="1",
               COLUMNS="200")
    for var in ("KFLAB_RUNTIME", "KFLAB_MODEL_MIRROR", "PYTHONPATH",  # nothing hidden
                "KFLAB_CONTAINER_ENGINE"):
        env.pop(var, None)
    if column == "none":
        env["PATH"] = path_without_engines(state.parent.parent / "path-without-engines")
    else:
        env.pop("KFLAB_CONTAINER_ENGINE", None)
        conf = REPO / "tests/integration/systemd_target/containers.conf"  # the open-files cap
        env.setdefault("CONTAINERS_CONF", str(conf))
    return env


def run_cmd(argv: list[str], cwd: Path, env: dict[str, str], timeout: float,
            log: Path) -> int | None:
    """Run in its own process group; None on timeout (the group is stopped)."""
    with open(log, "ab") as fh:
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=fh,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            return proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            for sig, wait in ((signal.SIGINT, 60), (signal.SIGTERM, 30), (signal.SIGKILL, 30)):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, sig)
                try:
                    proc.wait(timeout=wait)
                    break
                except subprocess.TimeoutExpired:
                    continue
            return None


def get_json(env: dict[str, str], cwd: Path, *args: str) -> Any:
    out = subprocess.run([kflab(), "get", *args, "-o", "json"], capture_output=True, text=True,
                         env=env, cwd=cwd, timeout=120)
    if out.returncode != 0:
        return None
    try:
        return json.loads(out.stdout)
    except ValueError:
        return None


def error_line(text: str) -> str:
    """The `error:` line and its `fix:` line, as the user read them."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for i, ln in enumerate(lines):
        if ln.startswith("error:"):
            fix = next((x for x in lines[i + 1:i + 4] if x.startswith("fix:")), "")
            return (ln + (" " + fix if fix else "")).removeprefix("error: ")
    return lines[-1] if lines else "(no output)"


def strip_paths(text: str, *roots: Path) -> str:
    for root in roots:
        text = text.replace(str(root) + "/", "").replace(str(root), ".")
    return text


def logs_of(state: Path) -> str:
    chunks = []
    for path in sorted(state.rglob("*.log")):
        with contextlib.suppress(OSError):
            chunks.append(path.read_text(errors="replace")[-20000:])
    return "\n".join(chunks)


def needs_in(text: str) -> str | None:
    for pattern, what in NEEDS:
        m = pattern.search(text)
        if m:
            groups = [g for g in m.groups() if g] if m.groups() else []
            return what.format(*(groups or [""]))
    return None


NOTE = re.compile(r"^\s*(?:[\d.]+s\s+)?note: (.*?)(?: \(differs from [^)]*\))?\s*$", re.M)


def notes_in(text: str) -> tuple[str, ...]:
    """The `note:` lines `kflab apply` printed (a deliberate difference each)."""
    return tuple(dict.fromkeys(m.group(1) for m in NOTE.finditer(text)))


def rules_of(objs: Iterable[Any]) -> tuple[str, ...]:
    """The rule ids recorded in the kflab.dev/local-differences annotation."""
    ids: list[str] = []
    for obj in objs:
        notes = ((obj or {}).get("metadata") or {}).get("annotations") or {}
        ids += [i for i in str(notes.get("kflab.dev/local-differences", "")).split(",") if i]
    return tuple(dict.fromkeys(ids))


def docs_of(path: Path) -> list[dict[str, Any]] | None:
    import yaml

    try:
        return [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    except yaml.YAMLError:
        return None


def images_in(node: Any) -> list[str]:
    """Every `image:` value of a manifest (containers, a TrainJob's trainer)."""
    out: list[str] = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "image" and isinstance(value, str):
                out.append(value)
            else:
                out += images_in(value)
    elif isinstance(node, list):
        for value in node:
            out += images_in(value)
    return out


def standins(docs: list[Any], env: dict[str, str]) -> str:
    """What stood in for the example's images: the `kflab.standin` label of an image built
    here (scripts/fidelity_images.py), one line per image."""
    found = []
    for image in dict.fromkeys(images_in(docs)):
        out = subprocess.run(["podman", "image", "inspect", "--format",
                              '{{ index .Labels "kflab.standin" }}', image],
                             capture_output=True, text=True, env=env, timeout=60)
        label = out.stdout.strip()
        if out.returncode == 0 and label and label != "<no value>":
            found.append(f"{image} {label}")
    return "; ".join(found)


def run_manifest(key: str, src: Path, column: str, timeout: float, scratch: Path) -> Outcome:
    work = scratch / re.sub(r"[^A-Za-z0-9._-]+", "_", key)
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(src.parent, work / "example", symlinks=True)
    cwd, state, log = work / "example", work / "state", work / "apply.log"
    env = environment(state, column)
    docs = docs_of(src)
    if docs is None:
        # kubectl and kflab both refuse a file that is not YAML; record kflab's words
        run_cmd([kflab(), "apply", "-f", src.name], cwd, env, timeout, log)
        msg = strip_paths(error_line(log.read_text(errors="replace")), cwd, state)
        return Outcome("exact", f"not valid YAML, refused as kubectl refuses it: {msg}")
    t0 = time.monotonic()
    rc = run_cmd([kflab(), "apply", "-f", src.name], cwd, env, timeout, log)
    secs = time.monotonic() - t0
    out = log.read_text(errors="replace")
    notes = notes_in(out)
    expect = EXPECT.get(key, {})
    try:
        objs = [(d, get_json(env, cwd, f"{str(d.get('kind', '')).lower()}/"
                             f"{(d.get('metadata') or {}).get('name')}", "-n",
                             (d.get("metadata") or {}).get("namespace") or "default"))
                for d in docs if isinstance(d, dict)]
        res = judge(key, objs, rc, out, logs_of(state), expect, cwd, state)
        res.rules = rules_of(o for _, o in objs)
    finally:  # servers (a model server, a notebook) and anything left: stopped
        if state.exists():
            subprocess.run([kflab(), "down"], cwd=cwd, env=env, capture_output=True,
                           timeout=300)
    if column == "engine" and shutil.which("podman") and "cannot pull image" not in res.reason:
        res.standin = standins(docs, env)  # (an Always pull fails whatever is here)
    res.seconds, res.notes = secs, notes if res.verdict in ("differs", "exact") else ()
    if res.verdict not in ("differs", "exact"):
        res.rules = ()
    if res.verdict == "exact" and (res.notes or res.rules):
        res.verdict = "differs"
    return res


def judge(key: str, objs: list[tuple[dict[str, Any], Any]], rc: int | None, out: str,
          logs: str, expect: dict[str, str], cwd: Path, state: Path) -> Outcome:
    stored = [(d, o) for d, o in objs if o]
    if rc is None:
        what = needs_in(logs)
        if what:
            return Outcome("needs", f"needs {what} (still retrying at the sweep's timeout)")
        return Outcome("wrong", "still running at the sweep's timeout: "
                       + summary(stored))
    if not stored:
        msg = strip_paths(error_line(out), cwd, state)
        if expect.get("outcome") == "refused" and expect.get("match", "") in msg:
            return Outcome("exact", f"refused as upstream refuses it ({expect['why']}): {msg}")
        if "KServe has no runtime for it" in msg:  # the controller finds none either
            return Outcome("exact", "refused as KServe v0.16 fails it (no ServingRuntime "
                           "supports that format and protocol: predictor_model.go "
                           f"GetSupportingRuntimes): {msg}")
        what = needs_in(msg)
        if what:
            return Outcome("needs", f"needs {what}: {msg}")
        return Outcome("refused", msg)
    failed = [(d, o) for d, o in stored if not succeeded(o)]
    if not failed:
        if expect.get("outcome") == "failed":
            return Outcome("wrong", f"ran to success; upstream: {expect['why']}")
        return Outcome("exact", summary(stored))
    text = logs + "\n" + out + "\n" + json.dumps([o for _, o in failed])
    if expect.get("outcome") == "failed" and expect.get("match", "") in text:
        return Outcome("exact", f"fails as upstream ({expect['why']}): " + summary(stored))
    what = needs_in(text)
    if what:
        return Outcome("needs", f"needs {what}: " + summary(stored))
    return Outcome("wrong", summary(stored))


def conditions(obj: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for c in ((obj.get("status") or {}).get("conditions") or [])
            if isinstance(c, dict)]


def succeeded(obj: dict[str, Any]) -> bool:
    kind = obj.get("kind")
    conds = {c.get("type"): c for c in conditions(obj) if c.get("status") == "True"}
    if kind in ("InferenceService", "Notebook"):
        if kind == "Notebook":
            return bool((obj.get("status") or {}).get("readyReplicas"))
        return "Ready" in conds
    return "Succeeded" in conds or "Complete" in conds


def summary(pairs: Iterable[tuple[dict[str, Any], Any]]) -> str:
    parts = []
    for _, obj in pairs:
        st = obj.get("status") or {}
        conds = [c for c in conditions(obj) if c.get("status") == "True"]
        last = conds[-1] if conds else {}
        text = f"{obj.get('kind')} {last.get('type', 'no condition')}"
        if last.get("reason"):
            text += f" ({last['reason']})"
        if obj.get("kind") == "Experiment":
            counts = {k: st.get(k) for k in ("trialsSucceeded", "trialsFailed",
                                             "trialsEarlyStopped", "trialsKilled") if st.get(k)}
            text += f", {st.get('trials', 0)} trials" + "".join(
                f", {v} {k.removeprefix('trials').lower()}" for k, v in counts.items())
        elif obj.get("kind") == "Notebook":
            text = f"Notebook ready ({st.get('readyReplicas', 0)} ready)"
        if last.get("message") and obj.get("kind") != "Experiment":
            text += f": {str(last['message'])[:160]}"
        parts.append(text)
    return "; ".join(parts)


def run_pipeline(key: str, src: Path, column: str, timeout: float, scratch: Path) -> Outcome:
    work = scratch / re.sub(r"[^A-Za-z0-9._-]+", "_", key)
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(src.parent, work / "example", symlinks=True)
    cwd, state, log = work / "example", work / "state", work / "run.log"
    env = environment(state, column)
    expect = EXPECT.get(key, {})
    text = src.read_text(errors="replace")
    if "@dsl.pipeline" not in text and "dsl.pipeline(" not in text:
        return Outcome("exact", "not a pipeline (a module the samples import); nothing to run")
    t0 = time.monotonic()
    rc = run_cmd([kflab(), "pipeline", "run", src.name, *PIPELINE_ARGS.get(key, [])], cwd,
                 env, timeout, log)
    secs = time.monotonic() - t0
    out = log.read_text(errors="replace")
    m = re.search(r"^pipelinerun/\S+ (\w+)", out, re.M)
    state_word = m.group(1) if m else None
    if rc is None:
        return Outcome("wrong", "still running at the sweep's timeout", secs)
    if state_word is None:
        msg = strip_paths(error_line(out), cwd, state)
        if expect.get("outcome") == "import":
            return Outcome("exact", f"{expect['why']}: {msg}", secs)
        what = needs_in(msg)
        if what:
            return Outcome("needs", f"needs {what}: {msg}", secs)
        return Outcome("refused", msg, secs)
    want = expect.get("outcome", "SUCCEEDED")
    if state_word in want.split("|"):
        why = f" ({expect['why']})" if expect else ""
        return Outcome("exact", f"{state_word}{why}", secs)
    what = needs_in(logs_of(state) + out)
    if what:
        return Outcome("needs", f"needs {what}: {state_word}", secs)
    return Outcome("wrong", f"{state_word}; upstream: {want}", secs)


def run_one(root: Path, key: str, column: str, timeout: float, scratch: Path) -> Outcome:
    tree, rel = key.split("/", 1)
    src = root / tree / rel
    if src.suffix == ".ipynb":
        return Outcome("refused", "a notebook calling the Kubeflow SDK (TrainerClient), "
                       "not a manifest: `kflab apply` takes YAML; run it in `kflab notebook` "
                       "with the SDK, not swept here")
    if tree == "pipelines":
        return run_pipeline(key, src, column, timeout, scratch)
    return run_manifest(key, src, column, timeout, scratch)


# --- results --------------------------------------------------------------------------------

def load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text()) if path.exists() else {}


def save(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    tmp.replace(path)


def kflab_version() -> str:
    from lab import __version__

    return __version__


def cmd_list(args: argparse.Namespace) -> int:
    data = listing(Path(args.trees))
    save(LISTING, data)
    print(f"{len(data['files'])} examples listed in {LISTING.relative_to(REPO)}")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    root = Path(args.trees)
    fresh = listing(root)
    stored = load(LISTING)
    if stored.get("files") != fresh["files"]:
        print("the trees differ from docs/fidelity/listing.json: run `list` first",
              file=sys.stderr)
        return 2
    out = Path(args.results) if args.results else RESULTS
    results = load(out) or {"examples": {}}
    keys = [k for k in fresh["files"] if not args.only or any(o in k for o in args.only)]
    if args.missing:  # resume: only what has no result yet in the columns asked for
        keys = [k for k in keys if any(c not in results["examples"].get(k, {})
                                       for c in args.column)]
    scratch = Path(tempfile.mkdtemp(prefix="kflab-sweep-"))
    try:
        for key in keys:
            for column in args.column:
                res = run_one(root, key, column, args.timeout, scratch)
                entry = results["examples"].setdefault(key, {})
                entry[column] = res.as_dict()
                results.setdefault("runs", {})[column] = {
                    "date": dt.date.today().isoformat(), "kflab": kflab_version()}
                save(out, results)
                print(f"{res.verdict:<8} {column:<6} {key} [{res.seconds:.0f} s]\n"
                      f"         {res.reason[:300]}", flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)
        else:
            print(f"kept {scratch}")
    return 0


def cmd_merge(args: argparse.Namespace) -> int:
    """Take one column of a part run written with --results into the stored results."""
    part, results = load(Path(args.part)), load(RESULTS) or {"examples": {}}
    n = 0
    for key, entry in part.get("examples", {}).items():
        if args.column in entry:
            results["examples"].setdefault(key, {})[args.column] = entry[args.column]
            n += 1
    if args.column in part.get("runs", {}):
        results.setdefault("runs", {})[args.column] = part["runs"][args.column]
    save(RESULTS, results)
    print(f"{n} results of column {args.column} merged into {RESULTS.relative_to(REPO)}")
    return 0


def cmd_render(args: argparse.Namespace) -> int:
    sys.path.insert(0, str(REPO))
    from lab.backends.local.fidelity import page

    PAGE.write_text(page.render(load(LISTING), load(RESULTS)))
    print(f"wrote {PAGE.relative_to(REPO)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("list", help="list every example of the trees (docs/fidelity/listing.json)")
    p.add_argument("--trees", required=True, help="folder with one checkout per tree")
    p = sub.add_parser("run", help="apply examples and store their verdicts")
    p.add_argument("--trees", required=True)
    p.add_argument("--column", action="append", choices=COLUMNS,
                   help="none (no container engine) and/or engine (default: both)")
    p.add_argument("--only", action="append", default=[],
                   help="examples whose NAME/path contains this (repeatable)")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds per example")
    p.add_argument("--keep", action="store_true", help="keep the scratch folders")
    p.add_argument("--results", help="write here instead of docs/fidelity/results.json "
                                     "(a part run beside another)")
    p.add_argument("--missing", action="store_true",
                   help="only examples without a result in the columns asked for (resume)")
    p = sub.add_parser("merge", help="take one column of a --results part into the results")
    p.add_argument("part")
    p.add_argument("--column", choices=COLUMNS, required=True)
    sub.add_parser("render", help="write docs/fidelity.md from the rules and the results")
    args = ap.parse_args(argv)
    if args.cmd == "list":
        return cmd_list(args)
    if args.cmd == "run":
        args.column = args.column or list(COLUMNS)
        return cmd_run(args)
    if args.cmd == "merge":
        return cmd_merge(args)
    return cmd_render(args)


if __name__ == "__main__":
    sys.exit(main())
