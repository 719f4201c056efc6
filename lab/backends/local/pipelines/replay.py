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
lists what its import read, however each module was loaded (Inputs below): the pipeline file
itself, every module found outside the Python installation -- from its source, from a
sourceless .pyc, as a namespace package's portion -- and any other file it opened (one that
was looked for and absent must stay absent), each with its sha256; the folders those were
found in and the import path's folders, by the names an import could find there (a module
added beside the pipeline can shadow another); the environment variables it read, with their
values. While it compiles, those modules are compiled from their source, never from
`__pycache__` (SourceOnly), so the code compiled is the code the memo keys on. The memo's key
holds the interpreter (path and version), $PYTHONPATH, kflab's version and pipeline code,
and kfp's version. A compiled YAML is its own bytes. When in doubt it runs: a compile that
started a process or used the network leaves no memo. A pipeline whose structure depends on
anything else (the clock, a random number) compiles differently each time on a cluster too;
such a file is recompiled only when one of the listed inputs changes.

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
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import threading
from pathlib import Path
from typing import Any

from lab import state
from lab.backends import pipeline_memo
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


class SourceOnly(importlib.machinery.SourceFileLoader):
    """A module compiled from its source file every time, never from `__pycache__`: Python
    trusts a .pyc while the source's mtime (whole seconds) and size match, so an edit made
    in the second the .pyc was written, or a file copied with its old mtime, would compile
    the old code. Used for the pipeline file and, while it compiles, for every module found
    outside the Python installation: the code compiled is the code the memo keys on."""

    def get_code(self, fullname: str) -> Any:
        return self.source_to_code(self.get_data(self.path), self.path)


class _FreshSource(importlib.abc.MetaPathFinder):
    """While a pipeline compiles, first on sys.meta_path: asks the finders after it (so
    what is found is what Python would find) and, for a module outside the installation,
    records where it was found and loads it with SourceOnly."""

    def __init__(self, inputs: Inputs) -> None:
        self.inputs = inputs

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        for finder in list(sys.meta_path):
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                self.inputs.found(spec)
                return spec
        return None  # not found here either: the folders' listings stand for its absence


# audit events a list of files cannot stand for: a compile that raised one leaves no memo
DOUBT = {"subprocess.Popen": "it started a process", "os.system": "it started a process",
         "os.posix_spawn": "it started a process", "os.exec": "it started a process",
         "os.fork": "it forked", "socket.connect": "it used the network",
         "socket.getaddrinfo": "it used the network", "urllib.Request": "it used the network"}


class Inputs:
    """What importing a pipeline file read, however each module was loaded: the files
    (the pipeline, every module found outside the installation -- source, sourceless .pyc,
    namespace package portion --, any other file opened), the folders those were found in
    (their import names), the environment variables read. Something a file list cannot
    stand for -- a subprocess, the network -- leaves a reason in `doubt`: then no memo."""

    _active: Inputs | None = None
    _hooked = False
    _lock = threading.Lock()  # one compile at a time: os.environ is swapped meanwhile

    def __init__(self) -> None:
        self.files: set[str] = set()
        self.folders: set[str] = set()
        self.env: dict[str, str | None] = {}
        self.doubt: str | None = None
        self._before: set[str] = set()
        self._probe: EnvProbe | None = None
        self._finder = _FreshSource(self)

    @classmethod
    def _hook(cls, event: str, args: tuple) -> None:
        me = cls._active
        if me is None:
            return
        if event == "open" and args and isinstance(args[0], str):
            me.files.add(args[0])
        elif event in ("os.listdir", "os.scandir"):  # what it listed counts, whole
            where = args[0] if args else None
            me.folders.add(os.fsdecode(where) if isinstance(where, (str, bytes)) else ".")
        elif event in DOUBT and me.doubt is None:
            me.doubt = DOUBT[event]

    def found(self, spec: Any) -> None:
        """A module the compile imported: its file (the source behind a cached .pyc) and
        the folders it was found in; outside the installation, compiled from source."""
        places = list(spec.submodule_search_locations or [])
        if spec.origin and spec.has_location:
            if pipeline_memo.installed(spec.origin):
                return
            places.append(os.path.dirname(spec.origin))
            self.files.add(spec.origin)
            if type(spec.loader) is importlib.machinery.SourceFileLoader:
                spec.loader = SourceOnly(spec.name, spec.origin)
        for place in places:  # a package's folder, a namespace package's portions
            if not pipeline_memo.installed(place):
                self.folders.add(place)

    def __enter__(self) -> Inputs:
        Inputs._lock.acquire()
        if not Inputs._hooked:  # an audit hook cannot be removed: one, gated by _active
            sys.addaudithook(Inputs._hook)
            Inputs._hooked = True
        self._before = set(sys.modules)
        self.folders.update(p or os.curdir for p in sys.path)  # where an import may look
        self._probe = EnvProbe(os.environ)
        os.environ = self._probe  # type: ignore[assignment]  # noqa: B003 - a proxy
        sys.meta_path.insert(0, self._finder)
        Inputs._active = self
        return self

    def __exit__(self, *exc: Any) -> None:
        Inputs._active = None
        with contextlib.suppress(ValueError):
            sys.meta_path.remove(self._finder)
        if self._probe is not None:
            os.environ = self._probe.real  # noqa: B003 - the real one back
            self.env = dict(self._probe.read)
        Inputs._lock.release()
        for name in set(sys.modules) - self._before:
            module = sys.modules.get(name)
            file = getattr(module, "__file__", None)
            if isinstance(file, str):
                self.files.add(file)
            for place in getattr(module, "__path__", None) or []:
                if isinstance(place, str) and not pipeline_memo.installed(place):
                    self.folders.add(place)

    def digests(self, pipeline: Path) -> dict[str, Any] | None:
        """{"files": {path: sha256}, "dirs": {folder: listing}} of what was read outside
        the Python installation (kfp's own files are covered by its version), the pipeline
        file and its folder always; None when something read cannot be listed (a doubt, a
        file gone): then the run leaves no memo."""
        if self.doubt is not None:
            return None
        files: dict[str, str] = {}
        for f in sorted(self.files | {str(pipeline)}):
            real = os.path.realpath(f)
            if "__pycache__" in real.split(os.sep):  # a cached .pyc: its source counts
                with contextlib.suppress(ValueError):
                    real = os.path.realpath(importlib.util.source_from_cache(real))
            if pipeline_memo.installed(real) or os.path.isdir(real) or \
                    real.startswith(("/proc/", "/sys/", "/dev/")):
                continue
            digest = sha(real)
            if digest is None and os.path.lexists(real):
                return None  # read then, unreadable now: no memo
            files[real] = digest  # None: it was looked for and is absent; it must stay so
        dirs: dict[str, str] = {}
        for folder in sorted(self.folders | {str(pipeline.parent)}):
            real = os.path.realpath(folder)
            if pipeline_memo.installed(real):
                continue
            found = pipeline_memo.listing(real)
            if found is not None:
                dirs[real] = found
        return {"files": files, "dirs": dirs}


def save(memo_path: Path, *, files: dict[str, str], dirs: dict[str, str],
         env: dict[str, str | None], pipeline_name: str, dag: dict[str, list[str]],
         tasks: list[dict[str, Any]], graph: dict[str, Any] | None = None) -> None:
    with contextlib.suppress(Exception):
        state.write_json(memo_path, {"v": MEMO_VERSION, "files": files, "dirs": dirs,
                                     "env": env, "pipeline_name": pipeline_name, "dag": dag,
                                     "tasks": tasks, "graph": graph})


def forget(memo_path: Path) -> None:
    with contextlib.suppress(OSError):
        memo_path.unlink()
