"""An unchanged, all-cached pipeline run, answered without importing kfp.

A cached re-run is a pure function of its inputs: each task's cache key (cache.py) is built
from the compiled pipeline, the run's arguments and the outputs of the tasks upstream of it,
and a cache hit hands those outputs on unchanged. So when the compiled pipeline and the
arguments are those of an earlier run whose every task was cacheable, and every cache entry
that run used still names the same execution, a new run would look up the same keys, hit
the same entries and report the same tasks: this module writes that record directly. What
it reports is what engine.Run reports for a cache hit (state SKIPPED, `cached: true`, the
cached execution's outputs); anything else -- a task with caching off, an importer, an exit
task given a `PipelineTaskFinalStatus` (its input names the run, so its key never repeats),
a failed run -- leaves no memo and the run goes through the engine.

"The compiled pipeline is unchanged" is checked without compiling it: a .py pipeline's memo
lists the files its import read (the file, the modules it imported from outside the Python
installation, any other file it opened) with their sha256, and the environment variables it
read, with their values; kfp's and kflab's versions are part of the memo's key. A compiled
YAML is its own bytes. A pipeline whose structure depends on anything else (the clock, a
random number, the network) compiles differently each time on a cluster too; such a file is
recompiled only when one of the listed inputs changes.

Memos live in `<state>/pipeline-replay/<namespace>/<key>.json`; a memo is only ever a
shortcut to the cache entries it names, so deleting runs or the cache leaves it harmless
(the check finds an entry gone and the run goes through the engine).

This module records what a compile read and saves the memo; reading and checking a memo,
the cache entries it names and writing the replayed record are in
lab/backends/pipeline_memo.py (standard library only), which kflab's start-up fast path
(lab/fastpath.py) uses too.
"""

from __future__ import annotations

import collections.abc
import contextlib
import os
import sys
import threading
from pathlib import Path
from typing import Any

from lab import state
from lab.backends.pipeline_memo import (  # noqa: F401 - the memo's checks, shared
    MEMO_VERSION,
    details,
    load,
    memo_file,
    sha,
    unchanged,
)


class EnvProbe(collections.abc.MutableMapping):
    """os.environ while a pipeline file is imported: reads are recorded (name -> value or
    None), everything goes through to the real environment."""

    def __init__(self, real: Any) -> None:
        self.real, self.read = real, {}

    def __getitem__(self, key: str) -> str:
        self.read[key] = self.real.get(key)
        return self.real[key]

    def __contains__(self, key: object) -> bool:
        if isinstance(key, str):
            self.read[key] = self.real.get(key)
        return key in self.real

    def __setitem__(self, key: str, value: str) -> None:
        self.real[key] = value

    def __delitem__(self, key: str) -> None:
        del self.real[key]

    def __iter__(self) -> Any:
        return iter(self.real)

    def __len__(self) -> int:
        return len(self.real)

    def copy(self) -> dict[str, str]:
        return dict(self.real)


class Inputs:
    """What importing a pipeline file read: files (audit hook, new modules) and env vars."""

    _active: Inputs | None = None
    _hooked = False
    _lock = threading.Lock()  # one compile at a time: os.environ is swapped meanwhile

    def __init__(self) -> None:
        self.files: set[str] = set()
        self.env: dict[str, str | None] = {}
        self._before: set[str] = set()
        self._probe: EnvProbe | None = None

    @classmethod
    def _hook(cls, event: str, args: tuple) -> None:
        if event == "open" and cls._active is not None and args and \
                isinstance(args[0], str):
            cls._active.files.add(args[0])

    def __enter__(self) -> Inputs:
        Inputs._lock.acquire()
        if not Inputs._hooked:  # an audit hook cannot be removed: one, gated by _active
            sys.addaudithook(Inputs._hook)
            Inputs._hooked = True
        self._before = set(sys.modules)
        self._probe = EnvProbe(os.environ)
        os.environ = self._probe  # type: ignore[assignment]  # noqa: B003 - a proxy
        Inputs._active = self
        return self

    def __exit__(self, *exc: Any) -> None:
        Inputs._active = None
        if self._probe is not None:
            os.environ = self._probe.real  # noqa: B003 - the real one back
            self.env = dict(self._probe.read)
        Inputs._lock.release()
        for name in set(sys.modules) - self._before:
            file = getattr(sys.modules.get(name), "__file__", None)
            if isinstance(file, str):
                self.files.add(file)

    def digests(self) -> dict[str, str]:
        """{path: sha256} of what was read outside the Python installation (kfp's own
        files are covered by its version)."""
        skip = [os.path.realpath(p) + os.sep for p in {sys.prefix, sys.base_prefix}]
        out: dict[str, str] = {}
        for f in sorted(self.files):
            real = os.path.realpath(f)
            if any(map(real.startswith, skip)) or "__pycache__" in real or \
                    "site-packages" in real or not os.path.isfile(real):
                continue
            digest = sha(real)
            if digest is not None:
                out[real] = digest
        return out


def save(memo_path: Path, *, files: dict[str, str], env: dict[str, str | None],
         pipeline_name: str, dag: dict[str, list[str]], tasks: list[dict[str, Any]],
         graph: dict[str, Any] | None = None) -> None:
    with contextlib.suppress(Exception):
        state.write_json(memo_path, {"v": MEMO_VERSION, "files": files, "env": env,
                                     "pipeline_name": pipeline_name, "dag": dag,
                                     "tasks": tasks, "graph": graph})


def forget(memo_path: Path) -> None:
    with contextlib.suppress(OSError):
        memo_path.unlink()
