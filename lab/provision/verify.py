"""The verify role's results, as the role leaves them on this machine.

Contract (playbooks/roles/verify/README.md): `<lab folder>/verify.json`, written whole,
`{"schema": 1, "ok", "started", "finished", "rows": [{name, ok, seconds, message, hint}]}`.
`kflab up` and `kflab status` draw their table from it; a malformed file is an error that
names the field, never a traceback.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from lab.errors import InputError

FILE = "verify.json"
SCHEMA = 1


@dataclass(frozen=True)
class Row:
    name: str
    ok: bool
    seconds: float
    message: str
    hint: str = ""


@dataclass
class Result:
    ok: bool
    started: float
    finished: float
    rows: list[Row] = field(default_factory=list)
    path: str = ""

    @property
    def failed(self) -> list[Row]:
        return [r for r in self.rows if not r.ok]

    def when(self) -> str:
        """The finish time, local, to the second."""
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.finished))

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "when": self.when()}


def path_for(lab_dir: Path) -> Path:
    return lab_dir / FILE


def _field(row: dict[str, Any], key: str, kind: type | tuple[type, ...], file: str,
           where: str) -> Any:
    value = row.get(key)
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        raise InputError(file, f"{where}.{key}", f"unexpected value {value!r}",
                         hint="re-run the verify role: `kflab status --verify`")
    return value


def read(path: Path) -> Result | None:
    """The results in `path`, or None when the verify role has not written any yet."""
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise InputError(str(path), None, f"unreadable verify results: {exc}",
                         hint="re-run the verify role: `kflab status --verify`") from None
    file = str(path)
    if not isinstance(doc, dict) or not isinstance(doc.get("rows"), list):
        raise InputError(file, "rows", "expected an object with a list of rows")
    if doc.get("schema", SCHEMA) != SCHEMA:
        raise InputError(file, "schema", f"schema {doc.get('schema')!r}; this kflab reads "
                         f"{SCHEMA}", hint="use the kflab that matches the playbooks")
    rows = []
    for i, raw in enumerate(doc["rows"]):
        where = f"rows[{i}]"
        if not isinstance(raw, dict):
            raise InputError(file, where, "expected an object")
        rows.append(Row(name=_field(raw, "name", str, file, where),
                        ok=_field(raw, "ok", bool, file, where),
                        seconds=float(_field(raw, "seconds", (int, float), file, where)),
                        message=_field(raw, "message", str, file, where),
                        hint=str(raw.get("hint") or "")))
    finished = doc.get("finished")
    if not isinstance(finished, (int, float)) or isinstance(finished, bool):
        finished = path.stat().st_mtime
    started = doc.get("started") if isinstance(doc.get("started"), (int, float)) else finished
    ok = bool(rows) and all(r.ok for r in rows)
    return Result(ok=ok, started=float(started), finished=float(finished), rows=rows,
                  path=file)


def fresh(path: Path, since: float) -> Result | None:
    """The results only when written at or after `since` (this run), else None."""
    try:
        if path.stat().st_mtime + 1 < since:
            return None
    except OSError:
        return None
    return read(path)
