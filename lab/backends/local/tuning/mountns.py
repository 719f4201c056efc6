"""A trial's own metrics folder, mounted where its File collector's path points.

Why: Katib's pod webhook mounts an empty volume at the folder of the File collector's path
in each trial pod (pkg/webhook/v1beta1/pod/inject_webhook.go, the metrics volume at
`filepath.Dir(path)`), so trials that run side by side each write their own /katib/mnist.log
and never see a file from before. Locally one path is one file, so without this kflab runs
such trials one at a time (fidelity row katib.collector.file-parallel).

How: the trial is started through `run SRC DST -- argv...`, which unshares a mount namespace
(inside a user namespace unless kflab runs as root), makes every mount private to it, binds
the trial's own folder SRC over DST and execs the command. Only the trial's processes see
it; the host's DST is untouched (kflab creates it empty when it is missing, as the mount
point). `probe DST` answers "ready" when this works here, else "unavailable: why".

Standard library only: run as a script (`python -I -S`), like training/netns.py.
"""

from __future__ import annotations

import ctypes
import errno
import os
import sys
import tempfile

CLONE_NEWUSER = 0x10000000
CLONE_NEWNS = 0x00020000
MS_BIND, MS_REC, MS_PRIVATE = 0x1000, 0x4000, 0x40000


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _check(ret: int, what: str) -> None:
    if ret != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")


def _write(path: str, text: str) -> None:
    with open(path, "w") as fh:
        fh.write(text)


def _enter(src: str, dst: str) -> None:
    """This process in its own mount namespace, with SRC bound over DST."""
    if not sys.platform.startswith("linux"):
        raise OSError(errno.ENOSYS, f"mount namespaces are Linux-only (this is {sys.platform})")
    libc = _libc()
    uid, gid = os.geteuid(), os.getegid()
    if uid != 0:
        _check(libc.unshare(CLONE_NEWUSER | CLONE_NEWNS), "unshare")
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"{uid} {uid} 1")
        _write("/proc/self/gid_map", f"{gid} {gid} 1")
    else:
        _check(libc.unshare(CLONE_NEWNS), "unshare")
    _check(libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "mount --make-rprivate /")
    _check(libc.mount(src.encode(), dst.encode(), None, MS_BIND, None), f"bind {dst}")


def probe(dst: str) -> int:
    try:
        with tempfile.TemporaryDirectory() as src:
            pid = os.fork()
            if pid == 0:  # the namespace is the child's; this process stays as it was
                try:
                    _enter(src, dst)
                    os._exit(0)
                except OSError as exc:
                    sys.stdout.write(f"unavailable: {exc.strerror or exc}\n")
                    sys.stdout.flush()
                    os._exit(1)
            _, status = os.waitpid(pid, 0)
    except OSError as exc:
        print(f"unavailable: {exc.strerror or exc}", flush=True)
        return 1
    if os.waitstatus_to_exitcode(status) == 0:
        print("ready", flush=True)
        return 0
    return 1


def run(src: str, dst: str, argv: list[str]) -> int:
    try:
        _enter(src, dst)
        os.execvp(argv[0], argv)  # noqa: S606 - the trial's argv, never a shell
    except OSError as exc:
        print(f"kflab: cannot give the trial its own {dst}: {exc.strerror or exc}",
              file=sys.stderr, flush=True)
        return 126 if exc.errno == errno.EACCES else 127
    return 127  # not reached: exec replaced this process


def main(args: list[str]) -> int:
    if len(args) == 2 and args[0] == "probe":
        return probe(args[1])
    if len(args) >= 5 and args[0] == "run" and args[3] == "--":
        return run(args[1], args[2], args[4:])
    print("usage: mountns.py probe DST | run SRC DST -- ARGV...", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
