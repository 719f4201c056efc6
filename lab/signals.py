"""The signals that stop kflab: SIGINT (Ctrl-C), SIGTERM (`kill`, `kflab delete`/`down` from
another terminal) and SIGHUP (the terminal was closed).

`install()` makes all three raise `Interrupted`, a KeyboardInterrupt that names its signal,
so the clean-up written for Ctrl-C (stop every child process group, mark the resource
Failed) runs for the other two as well, and the status says which signal it was. While that
clean-up runs, a repeated signal is ignored (the clean-up is bounded, and `kflab delete`
follows up with SIGKILL); a third one exits at once. After SIGHUP the terminal is gone, so
stdout and stderr are pointed at /dev/null first: a status line printed during the clean-up
must not fail it half-way.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from typing import Any

HANDLED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_state = {"count": 0}


class Interrupted(KeyboardInterrupt):
    """Raised in the main thread when kflab receives SIGINT, SIGTERM or SIGHUP."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def install() -> None:
    """Handle SIGINT, SIGTERM and SIGHUP by raising Interrupted (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        return
    _state["count"] = 0
    for sig in HANDLED:
        signal.signal(sig, _handler)


def _handler(signum: int, frame: Any) -> None:
    _state["count"] += 1
    if signum == signal.SIGHUP:
        _detach_terminal()
    if _state["count"] == 1:
        raise Interrupted(signum)
    if _state["count"] >= 3:
        os._exit(128 + signum)


def _detach_terminal() -> None:
    with contextlib.suppress(OSError):
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        os.close(devnull)


def signum_of(exc: BaseException) -> int:
    """The signal behind an interruption (a plain KeyboardInterrupt is SIGINT)."""
    return int(getattr(exc, "signum", signal.SIGINT))


def exit_code(exc: BaseException) -> int:
    """The shell's convention: 128 + the signal number (130 for Ctrl-C)."""
    return 128 + signum_of(exc)


def reason(exc: BaseException, stop_request: dict[str, Any] | None = None) -> str:
    """Why the work stopped, for a status message: names the signal, and who sent it when
    another kflab command asked (`kflab delete`, `kflab down`)."""
    signum = signum_of(exc)
    name = signal.Signals(signum).name
    if stop_request and stop_request.get("by"):
        return f"{stop_request['by']} (pid {stop_request.get('pid', '?')}) stopped it ({name})"
    if signum == signal.SIGINT:
        return "it was interrupted (Ctrl-C, SIGINT)"
    if signum == signal.SIGHUP:
        return "the terminal running kflab was closed (SIGHUP)"
    return f"kflab received {name}"
