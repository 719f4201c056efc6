"""A private network namespace for one PyTorchJob's replicas: only loopback exists there.

Why: the rendezvous of a PyTorchJob -- the TCPStore that rank 0's `init_process_group`
(env://) or torchrun's c10d rendezvous starts -- listens on every interface in torch 2.13.
Its server binds the IPv6 wildcard (then the IPv4 one), whatever MASTER_ADDR says. torch
offers one way to choose the address: a caller that builds `TCPStore` itself may pass an
already bound socket (`master_listen_fd`); the env:// and c10d rendezvous that replicas use
build the store themselves and read no setting or environment variable for it. So kflab
starts each job's replicas in a network namespace of their own, where the only interface is
`lo`: whatever they listen on is reachable from this machine's other namespaces not at all,
and from other machines never.

How: a small holder process unshares a user namespace (unless kflab runs as root) and a
network namespace, brings `lo` up and waits; each replica is started through
`join HOLDER_PID -- argv...`, which enters the holder's namespaces and execs the command.
Files, PIDs, GPUs and the user's identity are unchanged. The cost: replicas have no network
beyond loopback (a job that downloads data must be given it beforehand, or run with the
annotation kflab.dev/network: host, which says plainly what it exposes).

This file uses the standard library only: it is run as a script (`python -I -S`) so that
joining adds no import time to a replica's start.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import signal
import socket
import struct
import sys

CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _check(ret: int, what: str) -> None:
    if ret != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")


def _own_user_namespace() -> bool:
    """Root can make a network namespace directly; anyone else needs a user namespace."""
    return os.geteuid() != 0


def _write(path: str, text: str) -> None:
    with open(path, "w") as fh:
        fh.write(text)


def _loopback_up() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        req = struct.pack("16sH22x", b"lo", 0)
        flags = struct.unpack("16sH22x", fcntl.ioctl(s, SIOCGIFFLAGS, req))[1]
        fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sH22x", b"lo", flags | IFF_UP))


def hold() -> int:
    """Create the namespaces, bring loopback up, say `ready`, then wait to be killed."""
    if not sys.platform.startswith("linux"):  # e.g. macOS: the replicas use the host network
        print(f"unavailable: network namespaces are Linux-only (this is {sys.platform})",
              flush=True)
        return 1
    libc = _libc()
    uid, gid = os.geteuid(), os.getegid()
    try:
        if _own_user_namespace():
            _check(libc.unshare(CLONE_NEWUSER | CLONE_NEWNET), "unshare")
            _write("/proc/self/setgroups", "deny")
            _write("/proc/self/uid_map", f"{uid} {uid} 1")
            _write("/proc/self/gid_map", f"{gid} {gid} 1")
        else:
            _check(libc.unshare(CLONE_NEWNET), "unshare")
        _loopback_up()
    except OSError as exc:
        print(f"unavailable: {exc.strerror or exc}", flush=True)
        return 1
    print("ready", flush=True)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    while True:
        signal.pause()


def join(holder: int, argv: list[str]) -> int:
    """Enter the holder's namespaces and become `argv` (exit 127 if that fails)."""
    libc = _libc()
    try:
        kinds = [("user", CLONE_NEWUSER)] if _own_user_namespace() else []
        for kind, flag in [*kinds, ("net", CLONE_NEWNET)]:
            fd = os.open(f"/proc/{holder}/ns/{kind}", os.O_RDONLY | os.O_CLOEXEC)
            try:
                _check(libc.setns(fd, flag), f"setns({kind})")
            finally:
                os.close(fd)
        os.execvp(argv[0], argv)  # noqa: S606 - the replica's argv, never a shell
    except OSError as exc:
        print(f"kflab: cannot start {argv[0]!r} in the job's network namespace: "
              f"{exc.strerror or exc}", file=sys.stderr, flush=True)
        return 126 if exc.errno == errno.EACCES else 127
    return 127  # not reached: exec replaced this process


def main(args: list[str]) -> int:
    if args[:1] == ["hold"]:
        return hold()
    if len(args) >= 4 and args[0] == "join" and args[2] == "--":
        return join(int(args[1]), args[3:])
    print("usage: netns.py hold | join PID -- ARGV...", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
