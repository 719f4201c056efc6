#!/usr/bin/env python3
"""Build stand-ins for the upstream examples' images, from the examples' own Dockerfiles.

No registry is reachable from the machine the fidelity sweep runs on (scripts/fidelity_sweep.py),
so an example whose image is named with a pinned tag (pulled IfNotPresent) cannot get it. This
builds that image here, from the Dockerfile upstream builds it with, and tags it with the name
the example uses, so `kflab apply` runs the example unchanged in a container of it. What
differs from the real image is said in the image's `kflab.standin` label, which the sweep
copies into the example's row:

- FROM python:* (or another base) -> localhost/kflab-python:bookworm: Debian 12's python3
  (3.11) on the debootstrap base (scripts/standins/25-workload-images.sh), plus `python` as a
  name for python3, as the python images have it;
- RUN pip install ... -> the same requirements installed on this machine with Debian's pip
  from PyPI (`--target`, for the image's Python), copied into the image's dist-packages; an
  `--index-url` no one can reach here is dropped and said;
- ADD/COPY (from the tree, or the Dockerfile's folder), WORKDIR, ENV, ARG, ENTRYPOINT, CMD and
  the other RUN lines (mkdir, chmod...) are kept as they are.

Usage (as root, rootful Podman's store; CONTAINERS_CONF as for the sweep):
    python scripts/fidelity_images.py --trees DIR [--only pytorch-mnist]
Images a Dockerfile pins by :latest are pulled Always by default, so no stand-in can serve them;
they are not built.
"""

from __future__ import annotations

import argparse
import os
import posixpath
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

BASE = "localhost/kflab-python:bookworm"
LABEL = "kflab.standin"
SITE = "/usr/local/lib/python3.11/dist-packages"
PIP = ["/usr/bin/python3", "-m", "pip", "install", "-q", "--isolated", "--no-compile",
       "--disable-pip-version-check", "--root-user-action=ignore", "--prefer-binary"]

CONTAINERS_CONF = (Path(__file__).resolve().parents[1]
                   / "tests/integration/systemd_target/containers.conf")


@dataclass(frozen=True)
class Standin:
    name: str
    images: tuple[str, ...]  # the names the examples use
    tree: str  # folder under --trees
    dockerfile: str  # in the tree
    context: str = ""  # build context in the tree ("" = the tree's root, as upstream builds)
    note: str = ""
    # requirements the CPU torch wheel stands in for, where the one named cannot work on the
    # base's Python (said in the label)
    cpu_torch_for: tuple[str, ...] = ()


STANDINS = (
    Standin("pytorch-mnist", ("ghcr.io/kubeflow/katib/pytorch-mnist-cpu:v0.19.0",
                              "docker.io/kubeflowkatib/pytorch-mnist:v1beta1-45c5727"),
            "katib", "examples/v1beta1/trial-images/pytorch-mnist/Dockerfile.cpu",
            note="kubeflowkatib/pytorch-mnist:v1beta1-45c5727 is an older build of the same "
                 "trial image; Katib v0.19.0's Dockerfile stands in for it too"),
    Standin("tf-mnist-with-summaries", ("ghcr.io/kubeflow/katib/tf-mnist-with-summaries:v0.19.0",),
            "katib", "examples/v1beta1/trial-images/tf-mnist-with-summaries/Dockerfile"),
    Standin("pytorch-cpu-demo", ("docker.io/library/pytorch-cpu:py3.8",), "training-operator",
            "examples/pytorch/cpu-demo/Dockerfile", context="examples/pytorch/cpu-demo",
            note="the example's own image name, built by its user from this Dockerfile"),
    Standin("pytorch-elastic-echo",
            ("ghcr.io/kubeflow/training-v1/pytorch-elastic-example-echo:latest",),
            "training-operator", "examples/pytorch/elastic/echo/Dockerfile",
            note="the example pulls it IfNotPresent",
            cpu_torch_for=("torch==1.13.1",)),
)


def instructions(text: str) -> list[str]:
    """The Dockerfile's instructions, continuation lines joined, comments dropped."""
    out, cur = [], ""
    for raw in text.splitlines():
        line = raw.strip()
        if not cur and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            cur += line[:-1] + " "
            continue
        out.append(cur + line)
        cur = ""
    if cur:
        out.append(cur)
    return out


def pip_requirements(args: list[str], image_file: Callable[[str], Path]
                     ) -> tuple[list[str], list[str]]:
    """(requirement specs, what was dropped) of a `pip install` command line; `image_file`
    finds a file the image holds (a -r file) among what the Dockerfile copied in."""
    reqs, dropped = [], []
    it = iter(args)
    for a in it:
        if a in ("-r", "--requirement"):
            reqs += [ln.split("#")[0].strip() for ln in image_file(next(it)).read_text()
                     .splitlines() if ln.split("#")[0].strip()]
        elif a in ("--index-url", "-i", "--extra-index-url"):
            dropped.append(f"{a} {next(it)}")
        elif a.startswith("-"):
            continue
        else:
            reqs.append(a)
    return reqs, dropped


def cpu_wheel() -> str:
    """torch's CPU wheel on this machine (the one kflab pins; $KFLAB_TORCH_WHEEL)."""
    return os.environ.get("KFLAB_TORCH_WHEEL") or next(
        (str(w) for w in sorted(Path("/opt/wheels").glob("torch-*+cpu-cp311-*.whl"))), "")


def translate(sd: Standin, root: Path, work: Path) -> tuple[str, list[str]]:
    """(the Containerfile, what differs from upstream's build), pip-installing into work/.
    The Dockerfile's `pip install` lines are resolved together, once (a later line keeps
    what an earlier one pinned, as in the image), and copied in where the first one was."""
    tree = root / sd.tree
    context = tree / sd.context if sd.context else tree
    lines, notes, reqs, dropped = [], [], [], []
    pip_at = None
    workdir, copied = "/", []  # (path in the image, source on this machine)

    def image_file(name: str) -> Path:
        where = posixpath.normpath(posixpath.join(workdir, name))
        for dst, src in reversed(copied):
            if where == dst or where.startswith(dst.rstrip("/") + "/"):
                return src / posixpath.relpath(where, dst) if src.is_dir() else src
        raise SystemExit(f"{sd.dockerfile}: {name} is not among the files it copies")
    for ins in instructions((tree / sd.dockerfile).read_text()):
        op, _, rest = ins.partition(" ")
        if op.upper() == "FROM":
            lines += [f"FROM {BASE}", "RUN ln -sf /usr/bin/python3 /usr/local/bin/python"]
            notes.append(f"FROM {rest.split()[0]} -> Debian 12's python3 3.11")
            continue
        words = shlex.split(rest) if op.upper() == "RUN" else []
        if words[:2] in (["pip", "install"], ["pip3", "install"]) and "&&" not in words:
            more, gone = pip_requirements(words[2:], image_file)
            reqs += more
            dropped += gone
            if pip_at is None:
                pip_at = len(lines)
                lines.append("")  # the COPY lines go here
            continue
        if op.upper() in ("ADD", "COPY"):
            parts = rest.split()
            src, dst = parts[:-1], parts[-1]
            for s in src:
                dest, path = work / "ctx" / s, context / s
                if path.is_dir():
                    shutil.copytree(path, dest, dirs_exist_ok=True)
                else:
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(path, dest)
            lines.append(f"{op.upper()} {' '.join('ctx/' + s for s in src)} {dst}")
            target = posixpath.normpath(posixpath.join(workdir, dst))
            for one in src:  # a folder's contents land in dst; a file in (or as) dst
                path = context / one
                into = path.is_dir() or not (dst.endswith("/") or dst in (".", "./"))
                copied.append((target if into else
                               posixpath.join(target, posixpath.basename(one)), path))
            continue
        if op.upper() == "WORKDIR":
            workdir = posixpath.normpath(posixpath.join(workdir, rest.strip()))
        lines.append(ins)
    extra: list[str] = []
    for req in sd.cpu_torch_for:
        if req in reqs:
            wheel = cpu_wheel()
            reqs = [wheel if r == req else r for r in reqs]
            extra.append(f"{req} -> the CPU wheel {Path(wheel).name}: torch 1.13's elastic "
                         "launcher fails on Python 3.11 (Debian 12's), the image's is 3.8")
    if any("download.pytorch.org/whl/cpu" in d for d in dropped):
        # The CPU index is not reachable; its torch is the CPU wheel on this machine
        # (the one kflab pins, $KFLAB_TORCH_WHEEL). Its torchvision/torchaudio CPU
        # builds are not here, and PyPI's are built against CUDA torch: left out.
        wheel = cpu_wheel()
        left = [r for r in reqs if r in ("torchvision", "torchaudio")]
        reqs = [wheel if r == "torch" else r for r in reqs if r not in left]
        extra = [f"torch is the CPU wheel {Path(wheel).name}; left out: {', '.join(left)}"]
    if pip_at is not None:
        site = work / "site"
        subprocess.run([*PIP, "--target", str(site), *reqs], check=True)
        # What no program of these images reads: C headers, CMake files, static libraries
        # and torch's bundled tests (as 25-workload-images.sh trims kflab's torch image).
        for junk in [*site.glob("torch/include"), *site.glob("torch/share"),
                     *site.glob("torch/test"), *site.glob("nvidia/*/include"),
                     *site.glob("nvidia/**/*.a")]:
            if junk.is_dir():
                shutil.rmtree(junk)
            else:
                junk.unlink()
        copy = []
        if (site / "bin").is_dir():  # console scripts (torchrun...) go on PATH
            copy.append("COPY site/bin/ /usr/local/bin/")
            shutil.move(str(site / "bin"), str(work / "bin"))
            copy[-1] = "COPY bin/ /usr/local/bin/"
        copy.append(f"COPY site/ {SITE}/")
        lines[pip_at:pip_at + 1] = copy
        notes.append("pip install " + " ".join(reqs) + " (Debian's pip, from PyPI here, "
                     "headers and static libraries left out"
                     + (f"; dropped {', '.join(dropped)}" if dropped else "") + ")")
        notes += extra
    return "\n".join(lines) + "\n", notes


def build(sd: Standin, root: Path) -> str:
    work = Path(tempfile.mkdtemp(prefix=f"kflab-standin-{sd.name}-", dir="/var/tmp"))
    try:
        text, notes = translate(sd, root, work)
        tree_tag = sd.tree
        label = (f"built here from {tree_tag}'s {sd.dockerfile}: " + "; ".join(notes)
                 + (f"; {sd.note}" if sd.note else ""))
        text += f"LABEL {LABEL}={shlex.quote(label)}\n"
        (work / "Containerfile").write_text(text)
        argv = ["podman", "build", "-q", "-f", str(work / "Containerfile")]
        for image in sd.images:
            argv += ["-t", image]
        subprocess.run([*argv, str(work)], check=True, stdout=subprocess.DEVNULL)
        return label
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trees", required=True)
    ap.add_argument("--only", action="append", default=[])
    args = ap.parse_args(argv)
    # the open-files cap this project's machines need (the stand-ins' copy)
    os.environ.setdefault("CONTAINERS_CONF", str(CONTAINERS_CONF))
    if subprocess.run(["podman", "image", "exists", BASE]).returncode != 0:
        print(f"{BASE} is missing: run scripts/standins/25-workload-images.sh", file=sys.stderr)
        return 2
    for sd in STANDINS:
        if args.only and not any(o in sd.name for o in args.only):
            continue
        print(f"{sd.name}: {build(sd, Path(args.trees))}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
