"""Metrics collection as Katib's pull-based collectors do it: StdOut and File (TEXT, JSON).

A trial's output is read as it grows (so median stopping can act on a running trial); each
line that mentions a declared metric is matched against the filter expressions (Katib's
default: `name=value`), and the observation keeps min, max and latest per metric, with
Katib's literal "unavailable" for a metric that never appeared.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lab.kube.katib import UNAVAILABLE, metric_value

__all__ = ["UNAVAILABLE", "FilterError", "MetricLog", "Tail", "compile_filter",
           "objective_value"]


class FilterError(ValueError):
    """A metricsFormat expression that Katib's collector could not compile."""


def compile_filter(pattern: str) -> Any:
    """Compile a metricsFormat expression with RE2, the engine of Katib's collector (Go's
    regexp: pkg/metricscollector/v1beta1/common, `regexp.MustCompile` of each filter).

    So an expression is accepted exactly when a cluster would accept it (no backreferences
    or lookarounds), and matching takes linear time: a manifest's pattern such as `(a+)+b`
    cannot hang a trial's collector on a long line, as it would with Python's `re`."""
    import re2

    options = re2.Options()
    options.log_errors = False  # the error is raised (and reported once), not logged to stderr
    try:
        return re2.compile(pattern, options=options)
    except re2.error as exc:
        detail = exc.args[0].decode(errors="replace") if exc.args and isinstance(
            exc.args[0], bytes) else str(exc)
        raise FilterError(detail) from None


def _is_float(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


@dataclass
class MetricLog:
    """Every reported value per metric, in the order they appeared."""

    names: tuple[str, ...]
    filters: tuple[str, ...]
    values: dict[str, list[str]] = field(default_factory=dict)
    # JSON format only: reports Katib would not read (metric -> count of non-string
    # values), and the first line that is not a JSON object (number, text).
    unread: dict[str, int] = field(default_factory=dict)
    bad_line: tuple[int, str] | None = None
    lines: int = 0
    # names reported that the Experiment does not collect (for "did you mean"), bounded
    others: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._compiled = [compile_filter(f) for f in self.filters]
        for name in self.names:
            self.values.setdefault(name, [])

    def feed_text(self, line: str) -> None:
        if "=" not in line and ":" not in line and not any(n in line for n in self.names):
            return
        for rx in self._compiled:
            for m in rx.finditer(line):
                name, value = m.group(1).strip(), (m.group(2) or "").strip()
                if name in self.values and value:
                    self.values[name].append(value)
                elif value:
                    self._other(name)

    def _other(self, name: str) -> None:
        if name in self.others or len(self.others) < 50:
            self.others[name] = self.others.get(name, 0) + 1

    def near(self, metric: str) -> str | None:
        """A name the trial did report that looks like `metric` (another case, a typo)."""
        import difflib

        seen = list(self.others)
        same = [n for n in seen if n.lower() == metric.lower()]
        close = same or difflib.get_close_matches(metric, seen, n=1, cutoff=0.75)
        return close[0] if close else None

    def feed_json(self, line: str) -> None:
        """One line of a JSON metrics file, read as Katib's File collector reads it
        (pkg/metricscollector/v1beta1/file-metricscollector/file-metricscollector.go,
        `parseLogsInJsonFormat`): empty lines are skipped, any other line must be a JSON
        object (else the collector fails), and only *string* values count: `{"loss": "0.3"}`
        is a report, `{"loss": 0.3}` is not."""
        self.lines += 1
        if not line.strip():
            return
        try:
            data = json.loads(line)
        except (ValueError, RecursionError):  # not JSON, or nested beyond the parser
            data = None
        if not isinstance(data, dict):
            if self.bad_line is None:
                self.bad_line = (self.lines, line[:80])
            return
        for name in self.names:
            if isinstance(data.get(name), str):
                self.values[name].append(data[name])
            elif name in data:
                self.unread[name] = self.unread.get(name, 0) + 1
        for key in list(data)[:50]:
            if key not in self.values and isinstance(key, str):
                self._other(key)

    def feed(self, line: str, fmt: str = "TEXT") -> None:
        (self.feed_json if fmt == "JSON" else self.feed_text)(line)

    def steps(self, name: str) -> int:
        return len(self.values.get(name, []))

    def observation(self) -> dict[str, list[dict[str, str]]] | None:
        """Katib's `status.observation`: min/max over numeric values, latest as reported."""
        if not any(self.values.values()):
            return None
        metrics = []
        for name in self.names:
            vals = self.values[name]
            nums = [v for v in vals if _is_float(v)]
            lo = min(nums, key=float) if nums else UNAVAILABLE
            hi = max(nums, key=float) if nums else UNAVAILABLE
            metrics.append({"name": name, "min": lo, "max": hi,
                            "latest": vals[-1] if vals else UNAVAILABLE})
        return {"metrics": metrics}


READ_BYTES = 16 * 1024 * 1024  # of a metrics file per read; more waits for the next read
MAX_LINE_BYTES = 1024 * 1024  # a metrics line longer than this is dropped


class Tail:
    """Reads the lines appended to a file since the last call (whole lines only).

    With `fresh`, what the file already holds is skipped, as a new pod starts without it
    (for a metrics file kflab may not delete); a file replaced (another inode) or truncated
    since is read from its start."""

    def __init__(self, path: Path, fresh: bool = False) -> None:
        self.path = path
        self.offset = 0
        self.partial = b""
        self.skipping = False
        self.inode: int | None = None
        if fresh:
            try:
                st = path.stat()
                self.offset, self.inode = st.st_size, st.st_ino
            except OSError:
                pass

    def read(self, final: bool = False) -> list[str]:
        """The whole lines appended since the last call, at most READ_BYTES of them per
        call (the rest comes next time). The file is the trial's (a path the Experiment
        names): it is opened without blocking and read only when it is a regular file, so
        a FIFO or a device there never stalls the trial's supervisor."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:  # not there (yet), or not readable: nothing to collect
            return []
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                return []
            if (self.inode is not None and st.st_ino != self.inode) or \
                    st.st_size < self.offset:
                self.offset, self.partial, self.skipping = 0, b"", False
            self.inode = st.st_ino
            chunk = os.pread(fd, READ_BYTES, self.offset)
        except OSError:
            return []
        finally:
            os.close(fd)
        self.offset += len(chunk)
        data = self.partial + chunk
        if self.skipping:  # the rest of a line too long to be a metric
            cut = data.find(b"\n")
            if cut < 0:
                return []
            data, self.skipping = data[cut + 1:], False
        lines = data.split(b"\n")
        self.partial = b"" if final else lines.pop()
        if len(self.partial) > MAX_LINE_BYTES:  # a "line" that never ends is not a metric
            self.partial, self.skipping = b"", True
        return [ln.decode(errors="replace").rstrip("\r") for ln in lines if ln or not final]


def objective_value(observation: dict | None, metric: str, strategy: str) -> str:
    """The trial's objective as Katib reads it: min, max or latest, per the strategy."""
    return metric_value(observation, metric, strategy)
