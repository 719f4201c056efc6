#!/usr/bin/env python3
"""Run the upstream TensorFlow examples unmodified through `kflab apply`, with the files their
container images hold in place. A maintainer's check for lab/fidelity_examples.py: Linux,
root, slow (TensorFlow trains); never part of the test suite.

    sudo .venv/bin/python scripts/upstream_tf_examples.py \\
        --katib PATH --training-operator PATH [--only NAME] [--out results.json]

PATH is a checkout or a bare git mirror of kubeflow/katib (tag v0.19.0) and of
kubeflow/training-operator (tag v1.9.0, the last tree with the v1 examples). Nothing is
copied from them into this repository: they are read at run time.

What "the image's files in place" means here:
- each example's image is built upstream from a Dockerfile in the same tree; its ADD/COPY
  lines are replayed (e.g. examples/tensorflow/mnist_with_summaries/ -> /var/tf_mnist), so
  the manifest's command finds its script at the path the image has;
- the examples load MNIST with Keras (`mnist.load_data()`: ~/.keras/datasets/mnist.npz,
  downloaded on first use). This machine reaches no dataset host, so a small synthetic
  mnist.npz in the real format (uint8 28x28 images, uint8 labels, the four arrays under
  their names; each digit drawn as a bright block at its own place, so a model learns it)
  is put at that path. Keras re-downloads a cached file whose sha256 differs from the real
  file's, so inside the throwaway root the digest Keras expects is set to the synthetic
  file's; the examples and kflab are not touched.

Where: a private mount namespace (`unshare --mount`) whose root is an overlay of / on a
tmpfs, entered with chroot. Image paths (/opt/..., /var/tf_mnist, /mnist-with-summaries-logs),
the dataset, kflab's state folder and everything the examples write live on that tmpfs and
vanish with the namespace; nothing is left on the host but --out.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

KATIB_REF, TO_REF = "v0.19.0", "v1.9.0"
KERAS_MNIST_SHA256 = "731c5ac602752760c8e48fbffcf8c3b850d9dc2a2aedcf2cc48468fc17b673d1"

# (name, tree, manifest, the Dockerfile of the image it runs, kind, seconds allowed)
EXAMPLES = (
    ("training-operator tensorflow/simple.yaml", "to", "examples/tensorflow/simple.yaml",
     "examples/tensorflow/mnist_with_summaries/Dockerfile", "tfjob", 900),
    ("training-operator tensorflow/mnist_with_summaries/tf_job_mnist.yaml", "to",
     "examples/tensorflow/mnist_with_summaries/tf_job_mnist.yaml",
     "examples/tensorflow/mnist_with_summaries/Dockerfile", "tfjob", 900),
    ("training-operator tensorflow/dist-mnist/tf_job_mnist.yaml", "to",
     "examples/tensorflow/dist-mnist/tf_job_mnist.yaml",
     "examples/tensorflow/dist-mnist/Dockerfile", "tfjob", 300),
    ("katib kubeflow-training-operator/tfjob-mnist-with-summaries.yaml", "katib",
     "examples/v1beta1/kubeflow-training-operator/tfjob-mnist-with-summaries.yaml",
     "examples/v1beta1/trial-images/tf-mnist-with-summaries/Dockerfile", "experiment", 1800),
)


# --- reading a tree (checkout or bare mirror) ------------------------------------------------

class Tree:
    def __init__(self, path: Path, ref: str) -> None:
        self.path, self.ref = path, ref
        self.bare = not (path / ".git").exists() and (path / "HEAD").is_file()
        if not self.bare and not path.is_dir():
            raise SystemExit(f"error: {path} is neither a checkout nor a bare git mirror")

    def _git(self, *args: str) -> bytes:
        return subprocess.run(["git", f"--git-dir={self.path}", *args], check=True,
                              capture_output=True).stdout

    def read(self, rel: str) -> bytes:
        if self.bare:
            return self._git("show", f"{self.ref}:{rel}")
        return (self.path / rel).read_bytes()

    def is_dir(self, rel: str) -> bool:
        if self.bare:
            kind = subprocess.run(["git", f"--git-dir={self.path}", "cat-file", "-t",
                                   f"{self.ref}:{rel.rstrip('/')}"], capture_output=True,
                                  text=True).stdout.strip()
            return kind == "tree"
        return (self.path / rel).is_dir()

    def files(self, rel: str) -> list[str]:
        """Files under the folder `rel`, relative to it."""
        rel = rel.rstrip("/")
        if self.bare:
            out = self._git("ls-tree", "-r", "--name-only", self.ref, f"{rel}/").decode()
            return [line[len(rel) + 1:] for line in out.splitlines() if line]
        base = self.path / rel
        return [str(p.relative_to(base)) for p in base.rglob("*") if p.is_file()]


def image_files(tree: Tree, dockerfile: str) -> list[tuple[str, bytes]]:
    """(absolute path in the image, content) for every ADD/COPY of the Dockerfile: a
    folder's contents go into the destination; a file into it when it is a folder."""
    out: list[tuple[str, bytes]] = []
    folders: set[str] = set()
    for line in tree.read(dockerfile).decode().splitlines():
        if line.split()[:1] not in (["ADD"], ["COPY"]):
            continue
        words = shlex.split(line, comments=True)
        if len(words) < 3 or words[0].upper() not in ("ADD", "COPY") or \
                any(w.startswith("--") for w in words[1:]):
            continue
        *sources, dest = words[1:]
        for src in sources:
            if tree.is_dir(src):
                folders.add(dest.rstrip("/"))
                out.extend((f"{dest.rstrip('/')}/{f}", tree.read(f"{src.rstrip('/')}/{f}"))
                           for f in tree.files(src))
            else:
                into = dest.endswith("/") or dest.rstrip("/") in folders
                target = f"{dest.rstrip('/')}/{Path(src).name}" if into else dest
                out.append((target, tree.read(src)))
    return out


# --- the dataset -----------------------------------------------------------------------------

def synthetic_mnist(path: Path, n_train: int = 3000, n_test: int = 500, seed: int = 0,
                    wrong: float = 0.0) -> str:
    """mnist.npz in Keras' format; each digit is a bright 7x7 block at its own place (4x3
    grid) over noise; a share `wrong` of the labels is then replaced at random (so accuracy
    stays below 1 - wrong: Katib's goal 0.99 is never reached). Returns its sha256."""
    import numpy as np

    rng = np.random.default_rng(seed)

    def split(n: int) -> tuple[Any, Any]:
        y = rng.integers(0, 10, n).astype(np.uint8)
        x = rng.integers(0, 60, (n, 28, 28)).astype(np.uint8)
        for i, label in enumerate(y):
            r, c = divmod(int(label), 4)
            x[i, 2 + r * 9:9 + r * 9, c * 7:c * 7 + 7] = 255
        flip = rng.random(n) < wrong
        y[flip] = rng.integers(0, 10, int(flip.sum())).astype(np.uint8)
        return x, y

    (x_train, y_train), (x_test, y_test) = split(n_train), split(n_test)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh:
        np.savez(fh, x_train=x_train, y_train=y_train, x_test=x_test, y_test=y_test)
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --- outer: stage, then the namespace --------------------------------------------------------

def outer(args: argparse.Namespace) -> int:
    if os.geteuid() != 0 or not sys.platform.startswith("linux"):
        print("error: needs root on Linux (a mount namespace and an overlay root)",
              file=sys.stderr)
        return 2
    trees = {"katib": Tree(args.katib, KATIB_REF), "to": Tree(args.training_operator, TO_REF)}
    chosen = [e for e in EXAMPLES if not args.only or any(o in e[0] for o in args.only)]
    out = args.out.resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="kflab-upstream-tf-") as tmp:
        stage = Path(tmp)
        plan = []
        for n, (name, tree, manifest, dockerfile, kind, limit) in enumerate(chosen):
            folder = stage / "examples" / str(n)
            folder.mkdir(parents=True)
            (folder / Path(manifest).name).write_bytes(trees[tree].read(manifest))
            files = []
            for i, (target, data) in enumerate(image_files(trees[tree], dockerfile)):
                (folder / f"image-{i}").write_bytes(data)
                files.append([target, str(folder / f"image-{i}")])
            plan.append({"name": name, "manifest": str(folder / Path(manifest).name),
                         "kind": kind, "limit": limit, "files": files})
        digest = synthetic_mnist(stage / "mnist.npz", wrong=args.wrong_labels)
        (stage / "plan.json").write_text(json.dumps({"examples": plan, "mnist": digest}))
        out.write_text("[]\n")
        cmd = ["unshare", "--mount", "--propagation", "private", sys.executable,
               str(Path(__file__).resolve()), "--inner", str(stage), "--out", str(out)]
        rc = subprocess.run(cmd).returncode
    results = json.loads(out.read_text())
    for r in results:
        conds = [f"{c['type']}={c.get('reason', '')}: {c.get('message', '')}"
                 for c in r.get("conditions", [])]
        print(f"\n== {r['name']} ({r['seconds']} s, apply exit {r['exit']})")
        print("\n".join(f"   {c}" for c in conds) or "   (no status)")
    return rc


# --- inner: in the private mount namespace ---------------------------------------------------

def _mount(*args: str) -> None:
    subprocess.run(["mount", *args], check=True)


def enter_root(stage: Path, out: Path) -> None:
    """An overlay of / on a tmpfs, with /proc, /sys and /dev, and --out bound through."""
    _mount("--make-rprivate", "/")
    ovl = stage / "ovl"
    ovl.mkdir()
    _mount("-t", "tmpfs", "-o", "size=8g,mode=0700", "kflab-upstream", str(ovl))
    for d in ("upper", "work", "root"):
        (ovl / d).mkdir()
    root = ovl / "root"
    _mount("-t", "overlay", "overlay", "-o",
           f"lowerdir=/,upperdir={ovl / 'upper'},workdir={ovl / 'work'}", str(root))
    for m in ("proc", "sys", "dev"):
        _mount("--rbind", f"/{m}", str(root / m))
    _mount("--bind", str(out), str(root / str(out).lstrip("/")))
    os.chroot(root)
    os.chdir("/")


def keras_expects(digest: str) -> None:
    """Point Keras' sha256 check for mnist.npz at the synthetic file (in the overlay only)."""
    spec = importlib.util.find_spec("keras")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("error: keras is not installed (pip install 'kflab[tf]')")
    path = Path(next(iter(spec.submodule_search_locations))) / "src" / "datasets" / "mnist.py"
    text = path.read_text()
    if KERAS_MNIST_SHA256 not in text:
        raise SystemExit(f"error: {path} does not name the digest of mnist.npz")
    path.write_text(text.replace(KERAS_MNIST_SHA256, digest))


def kflab(state: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name("kflab")
    return subprocess.run([str(exe), "--state", str(state), *args], capture_output=True,
                          text=True, timeout=timeout, env=_env())


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KFLAB_")}
    # the image's files are copied in place, so the command runs as a local process
    env.update(HOME="/root", KFLAB_BACKEND="local", KFLAB_RUNTIME="process",
               PATH=f"{Path(sys.executable).parent}:{env.get('PATH', '/usr/bin:/bin')}")
    return env


def run_example(ex: dict[str, Any], state: Path) -> dict[str, Any]:
    for target, source in ex["files"]:
        Path(target).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
    manifest = Path(ex["manifest"])
    started = time.monotonic()
    proc = subprocess.Popen([str(Path(sys.executable).with_name("kflab")), "--state",
                             str(state), "apply", "-f", str(manifest)], cwd=manifest.parent,
                            env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    timed_out = False
    try:
        output, _ = proc.communicate(timeout=ex["limit"])
    except subprocess.TimeoutExpired:
        timed_out = True
        os.killpg(proc.pid, signal.SIGINT)  # as Ctrl-C: kflab stops what it started
        try:
            output, _ = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            output, _ = proc.communicate()
    result: dict[str, Any] = {
        "name": ex["name"], "exit": proc.returncode, "timed_out": timed_out,
        "seconds": round(time.monotonic() - started, 1),
        "apply_output": output.splitlines()[-60:]}
    import yaml

    doc = yaml.safe_load(manifest.read_text())
    ns = (doc.get("metadata") or {}).get("namespace") or "default"
    name = doc["metadata"]["name"]
    got = kflab(state, "get", f"{ex['kind']}/{name}", "-n", ns, "-o", "json")
    if got.returncode == 0:
        obj = json.loads(got.stdout)
        status = obj.get("status") or {}
        result["conditions"] = [{k: c.get(k) for k in ("type", "status", "reason", "message")}
                                for c in status.get("conditions") or []]
        result["status"] = {k: v for k, v in status.items() if k != "conditions"}
        result["annotations"] = (obj.get("metadata") or {}).get("annotations") or {}
    else:
        result["get_error"] = (got.stdout + got.stderr).strip()[-2000:]
    if ex["kind"] == "experiment" and got.returncode == 0:
        trials = kflab(state, "get", "trials", "-n", ns, "-o", "json")
        items = json.loads(trials.stdout).get("items", []) if trials.returncode == 0 else []
        result["trials"] = [{
            "name": t["metadata"]["name"],
            "params": {a["name"]: a["value"] for a in t["spec"]["parameterAssignments"]},
            "condition": ((t.get("status") or {}).get("conditions") or [{}])[-1],
            "observation": (t.get("status") or {}).get("observation")} for t in items]
    return result


def inner(stage: Path, out: Path) -> int:
    plan = json.loads((stage / "plan.json").read_text())
    enter_root(stage, out)
    datasets = Path("/root/.keras/datasets")  # Keras' cache for mnist.load_data()
    datasets.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(stage / "mnist.npz", datasets / "mnist.npz")
    keras_expects(plan["mnist"])
    results = []
    for n, ex in enumerate(plan["examples"]):
        state = Path(tempfile.mkdtemp(prefix=f"kflab-upstream-state-{n}-"))
        print(f"-- {ex['name']}", flush=True)
        results.append(run_example(ex, state))
        out.write_text(json.dumps(results, indent=1) + "\n")
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--katib", type=Path, help="kubeflow/katib checkout or bare mirror")
    p.add_argument("--training-operator", type=Path,
                   help="kubeflow/training-operator checkout or bare mirror")
    p.add_argument("--only", action="append", help="run the examples whose name has this")
    p.add_argument("--out", type=Path, default=Path("upstream-tf-results.json"))
    p.add_argument("--wrong-labels", type=float, default=0.0,
                   help="share of random labels in the synthetic MNIST (e.g. 0.1: goals of "
                        "0.99 are never reached, every trial runs)")
    p.add_argument("--inner", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.inner:
        return inner(args.inner, args.out)
    if not args.katib or not args.training_operator:
        p.error("--katib and --training-operator are required")
    return outer(args)


if __name__ == "__main__":
    sys.exit(main())
