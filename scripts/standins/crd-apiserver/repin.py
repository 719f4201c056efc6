"""Re-pin debs.lock: the newest Debian sid packages the CRD API server stand-in needs.

Run by `bash scripts/standins/40-crd-apiserver.sh --repin` (which then builds from the new lock,
so a lock that does not build is never kept). Standard library only; needs apt-get, apt-cache
and dpkg-deb (Debian or Ubuntu).

How the set is found, not guessed: every golang-* package in the dependency closure of ROOTS
(apt-cache depends --recurse, in a private apt state for sid) is downloaded and unpacked, then
the Go toolchain it brought lists what main.go imports (`go list -deps`, GOPATH mode: Debian's
Go sources live in /usr/share/gocode/src); each imported folder is mapped to the package that
ships its .go files. Those packages, the toolchain's two, etcd-server and kubectl are pinned.

Usage: python3 repin.py WORK_DIR LOCK_FILE MAIN_GO
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

MIRROR = os.environ.get("KFLAB_DEBIAN_MIRROR", "http://deb.debian.org/debian")
# What main.go builds on; the closure brings the rest (a superset, trimmed by go list below).
ROOTS = ["golang-k8s-apiextensions-apiserver-dev", "golang-k8s-apiserver-dev",
         "golang-k8s-component-base-dev", "golang-k8s-client-go-dev",
         "golang-github-spf13-cobra-dev", "golang-opentelemetry-otel-dev", "golang-go"]
TOOLS = ["etcd-server", "kubectl"]  # shipped as binaries, unpacked, never built


def apt_options(work: Path) -> list[str]:
    """A private apt state for sid: the system's own sources and dpkg status stay untouched
    (an empty status also keeps an installed package from hiding a download)."""
    (work / "apt" / "lists" / "partial").mkdir(parents=True, exist_ok=True)
    (work / "apt" / "cache" / "archives" / "partial").mkdir(parents=True, exist_ok=True)
    (work / "apt" / "sources.list").write_text(f"deb {MIRROR} sid main\n")
    (work / "apt" / "status").write_text("")
    return ["-o", f"Dir::Etc::SourceList={work}/apt/sources.list",
            "-o", "Dir::Etc::SourceParts=/dev/null", "-o", f"Dir::State::Lists={work}/apt/lists",
            "-o", f"Dir::Cache={work}/apt/cache", "-o", f"Dir::State::status={work}/apt/status"]


def run(argv: list[str], **kw) -> str:
    return subprocess.run(argv, check=True, capture_output=True, text=True, **kw).stdout


def main(work: Path, lock: Path, main_go: Path) -> int:
    opts = apt_options(work)
    run(["apt-get", *opts, "update", "-qq"])
    closure = run(["apt-cache", *opts, "depends", "--recurse", "--no-recommends",
                   "--no-suggests", "--no-conflicts", "--no-breaks", "--no-replaces",
                   "--no-enhances", *ROOTS, *TOOLS]).splitlines()
    names = sorted({n for n in closure if re.fullmatch(r"[a-z0-9][a-z0-9.+-]+", n)
                    and (n.startswith("golang-") or n in TOOLS)})
    debs = work / "debs"
    debs.mkdir(exist_ok=True)
    print(f"repin: downloading the closure ({len(names)} packages)", flush=True)
    run(["apt-get", *opts, "download", "-q", *names], cwd=debs)
    root = work / "root"
    owner: dict[str, str] = {}  # gocode folder -> package
    files: dict[str, Path] = {}
    for deb in sorted(debs.glob("*.deb")):
        name = run(["dpkg-deb", "-f", str(deb), "Package"]).strip()
        files[name] = deb
        run(["dpkg-deb", "-x", str(deb), str(root)])
        for line in run(["dpkg-deb", "-c", str(deb)]).splitlines():
            path = line.split()[-1]
            if path.startswith("./usr/share/gocode/src/") and path.endswith(".go"):
                owner[path[1:].rsplit("/", 1)[0]] = name
    goroot = sorted(root.glob("usr/lib/go-1.*"), key=lambda p: [int(x) for x in
                                                                  p.name[3:].split(".")])[-1]
    toolchain = [f"golang-{goroot.name[3:]}-go", f"golang-{goroot.name[3:]}-src"]
    gopath = work / "gopath"
    src = gopath / "src" / "kflab.test" / "crd-apiserver"
    src.mkdir(parents=True, exist_ok=True)
    (src / "main.go").write_bytes(main_go.read_bytes())
    env = {"PATH": os.environ["PATH"], "HOME": str(work), "GOROOT": str(goroot),
           "GOPATH": f"{gopath}:{root}/usr/share/gocode", "GOCACHE": str(work / "gocache"),
           "GO111MODULE": "off", "GOPROXY": "off", "GOTOOLCHAIN": "local", "CGO_ENABLED": "0",
           "GOFLAGS": ""}
    dirs = run([str(goroot / "bin" / "go"), "list", "-deps", "-f",
                "{{if not .Standard}}{{.Dir}}{{end}}", "kflab.test/crd-apiserver"], env=env,
               cwd=work).split()
    keep = set(toolchain) | set(TOOLS)
    for d in dirs:
        if d.startswith(str(gopath)):
            continue
        rel = d[len(str(root)):]
        if rel not in owner:
            print(f"repin: no package ships {rel}", file=sys.stderr)
            return 1
        keep.add(owner[rel])
    header = [line for line in lock.read_text().splitlines()
              if line.startswith("#") and not line.startswith("# pinned:")]
    rows = []
    for name in sorted(keep):
        deb = files[name]
        version = run(["dpkg-deb", "-f", str(deb), "Version"]).strip()
        rows.append(f"{name} {version} {hashlib.sha256(deb.read_bytes()).hexdigest()}")
    stamp = datetime.now(UTC).strftime("%Y-%m-%d")
    lock.write_text("\n".join([*header, f"# pinned: {stamp} from {MIRROR} sid", *rows]) + "\n")
    print(f"repin: {lock}: {len(rows)} packages ({len(dirs)} Go packages imported)")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])))
