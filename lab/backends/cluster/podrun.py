"""kflab's pod runner: the first process of a workload container on the cluster backend.

This file is shipped to the pod in the work-folder ConfigMap (key `kflab-run.py`) and runs
with the image's own Python, so it uses the standard library only. It:
1. copies the work folder from the read-only ConfigMap mount into the writable working
   directory (an emptyDir), atomically per file, so replicas of one pod never see half a file;
2. installs `requirements.txt` when the work folder has one and a named package is missing
   (pip, online from the package index, offline from the wheelhouse kflab mounted: see
   docs/cluster.md);
3. runs the container's own command there (exit code passed through);
4. when asked (KFLAB_OUTPUTS=1), prints the files the command created or changed, base64 in
   marker lines, so kflab can write them back into the learner's work folder from the log.

Usage: python3 run.py --files DIR --work DIR -- COMMAND [ARG...]
"""

import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile

MARKER = "##kflab-output## "
CHUNK = 48 * 1024  # bytes of file per marker line (64 KiB of base64)
MAX_OUTPUT = 4 * 1024 * 1024  # files larger than this are not sent back
DEPS = ".kflab-deps"


def _digest(path):
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(65536), b""):
            h.update(block)
    return h.hexdigest()


def _walk(root):
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "__pycache__")
        for name in sorted(files):
            path = os.path.join(folder, name)
            if not os.path.islink(path):
                yield os.path.relpath(path, root)


def copy_in(files, work):
    """Copy the work folder into `work`; returns {relative path: sha256} of what was copied."""
    seen = {}
    for rel in _walk(files):
        if rel.startswith(".kflab"):
            continue
        src, dest = os.path.join(files, rel), os.path.join(work, rel)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        digest = _digest(src)
        seen[rel] = digest
        if os.path.exists(dest) and _digest(dest) == digest:
            continue
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(dest), prefix=".kflab-")
        os.close(fd)
        shutil.copyfile(src, tmp)
        os.replace(tmp, dest)
    return seen


def _missing(requirements):
    """Requirement names with no installed distribution (versions are not compared)."""
    from importlib import metadata

    out = []
    with open(requirements) as fh:
        for line in fh:
            line = line.split("#", 1)[0].strip()
            if not line or line.startswith("-"):
                continue
            name = line
            for sep in "=<>!~;[ ":
                name = name.split(sep, 1)[0]
            try:
                metadata.version(name)
            except metadata.PackageNotFoundError:
                out.append(name)
    return out


def install(work, env):
    requirements = os.path.join(work, "requirements.txt")
    if not os.path.isfile(requirements):
        return
    missing = _missing(requirements)
    if not missing:
        return
    target = os.path.join(work, DEPS)
    print(f"kflab: installing {', '.join(missing)} from requirements.txt", flush=True)
    code = subprocess.call([sys.executable, "-m", "pip", "install", "--quiet",
                            "--disable-pip-version-check", "--no-warn-script-location",
                            "--target", target, "-r", requirements], env=env)
    if code != 0:
        print(f"kflab: pip install failed ({code}); see above", file=sys.stderr, flush=True)
        sys.exit(code)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (target, env.get("PYTHONPATH")) if p)


def send_outputs(work, inputs):
    """Print every new or changed file of `work` as marker lines (JSON, base64 chunks)."""
    total = 0
    for rel in _walk(work):
        if rel.startswith(DEPS) or rel.startswith(".kflab"):
            continue
        path = os.path.join(work, rel)
        size = os.path.getsize(path)
        if inputs.get(rel) == _digest(path):
            continue
        if total + size > MAX_OUTPUT:
            print(f"kflab: not sending {rel} back ({size} bytes; {MAX_OUTPUT} in all)",
                  flush=True)
            continue
        total += size
        with open(path, "rb") as fh:
            data = fh.read()
        parts = max(1, -(-len(data) // CHUNK))
        for i in range(parts):
            chunk = base64.b64encode(data[i * CHUNK:(i + 1) * CHUNK]).decode()
            print(MARKER + json.dumps({"path": rel, "part": i, "parts": parts,
                                       "sha256": hashlib.sha256(data).hexdigest(),
                                       "data": chunk}), flush=True)


def main(argv):
    if "--" not in argv:
        print("usage: run.py --files DIR --work DIR -- COMMAND...", file=sys.stderr)
        return 2
    split = argv.index("--")
    opts, command = argv[:split], argv[split + 1:]
    files = opts[opts.index("--files") + 1]
    work = opts[opts.index("--work") + 1]
    os.makedirs(work, exist_ok=True)
    inputs = copy_in(files, work)
    env = dict(os.environ)
    env.setdefault("PYTHONUNBUFFERED", "1")
    install(work, env)
    if not command:
        print("kflab: the container has no command to run", file=sys.stderr)
        return 2
    try:
        code = subprocess.call(command, cwd=work, env=env)
    except FileNotFoundError:
        print(f"kflab: command not found: {command[0]}", file=sys.stderr, flush=True)
        code = 127
    sys.stdout.flush()
    if os.environ.get("KFLAB_OUTPUTS") == "1":
        send_outputs(work, inputs)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
