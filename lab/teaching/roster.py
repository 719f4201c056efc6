"""A class roster (CSV) read as hostile input: every student becomes a DNS-1123 label.

The file comes from a spreadsheet or a learning platform's export, so it is checked as the
API server would check the names made from it, before anything touches the cluster: size,
encoding, a `student` column, one label per student (accents folded, other characters become
'-'), no two students on the same label, and a namespace `CLASS-STUDENT` short enough. Every
error names the file, the line and the field, and says how to fix it.
"""

from __future__ import annotations

import csv
import io
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

from lab import limits
from lab.errors import InputError
from lab.kube.names import namespace_problem
from lab.yamlio import read_bytes

MAX_BYTES = limits.MAX_ROSTER_BYTES
MAX_STUDENTS = 1000
COLUMNS = ("student", "name", "email")  # `student` is required; the others are kept as shown
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


@dataclass(frozen=True)
class Student:
    id: str          # the DNS-1123 label made from the `student` column
    name: str        # the display name (the `name` column, else the `student` column)
    email: str
    line: int        # where the student is in the roster

    def namespace(self, class_name: str) -> str:
        return f"{class_name}-{self.id}"


@dataclass
class Roster:
    path: Path
    students: list[Student]
    ignored_columns: list[str] = field(default_factory=list)


def check_class_name(name: str) -> str:
    """A class name: a DNS-1123 label of at most 20 characters (it prefixes namespaces)."""
    if not isinstance(name, str) or not _LABEL.match(name) or len(name) > 20:
        raise InputError(None, "class", f"{name!r} is not a usable class name",
                         hint="use 1-20 lower-case letters, digits and '-', starting and "
                              "ending with a letter or digit (e.g. ml-101)")
    if name == "kube" or name.startswith("kube-"):  # kube-system, kube-public, ...
        raise InputError(None, "class", f"{name!r}: namespaces starting with 'kube-' are "
                         "Kubernetes' own", hint="choose another class name (e.g. ml-101)")
    return name


def label(text: str) -> str:
    """A DNS-1123 label from free text: accents folded to ASCII, lower-case, every run of
    other characters becomes '-', trimmed. May be empty (nothing ASCII in it)."""
    folded = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    return re.sub(r"[^a-z0-9]+", "-", folded.lower()).strip("-")


def load(path: Path, class_name: str) -> Roster:
    """Read and validate the roster at `path` for class `class_name`; nothing is half-read:
    the first problem raises InputError naming file, line and field."""
    check_class_name(class_name)
    where = str(path)
    # capped before it is read: /dev/zero or a FIFO is refused, not read without end
    raw = read_bytes(Path(path), limit=MAX_BYTES, limit_name="MAX_ROSTER_BYTES",
                     hint="give the path of a CSV file with one row per student")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise InputError(where, None, "not UTF-8 text", line=line,
                         hint="export the roster as CSV UTF-8") from None
    if "\x00" in text:
        raise InputError(where, None, "contains NUL bytes: not a CSV file",
                         hint="export the roster as CSV UTF-8")
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    try:
        rows = list(reader)
    except csv.Error as exc:
        raise InputError(where, None, f"not valid CSV: {exc}", line=reader.line_num,
                         hint="check the quotes on that line") from None
    if not rows or not any(c.strip() for c in rows[0]):
        raise InputError(where, None, "empty: no header row", line=1,
                         hint="the first row names the columns: student[,name,email]")
    header = [c.strip().lower() for c in rows[0]]
    if "student" not in header:
        raise InputError(where, "student", "no 'student' column in the header row", line=1,
                         hint="name one column 'student' (an id or name per student); "
                              "'name' and 'email' are optional")
    dup = sorted({c for c in header if c and header.count(c) > 1})
    if dup:
        raise InputError(where, dup[0], "column named twice in the header row", line=1,
                         hint="give each column one name")
    col = {c: header.index(c) for c in COLUMNS if c in header}
    ignored = [c for c in header if c and c not in COLUMNS]
    room = 63 - len(class_name) - 1
    students: list[Student] = []
    seen: dict[str, int] = {}
    # csv's line_num counts physical lines; keep each record's first line for messages.
    lines = _record_lines(text)
    for index, row in enumerate(rows[1:], start=1):
        line = lines[index] if index < len(lines) else index + 1
        if not any(c.strip() for c in row):
            continue  # blank rows from spreadsheets
        values = {c: (row[i].strip() if i < len(row) else "") for c, i in col.items()}
        for c, v in values.items():
            if _CONTROL.search(v):
                raise InputError(where, c, "contains a control character or line break",
                                 line=line, hint="keep each field on one line, plain text")
            if len(v) > 256:
                raise InputError(where, c, f"{len(v)} characters: at most 256", line=line,
                                 hint="shorten it")
        given = values["student"]
        if not given:
            raise InputError(where, "student", "empty", line=line,
                             hint="give every row a student id or name")
        sid = label(given)
        if not sid:
            raise InputError(where, "student", f"{given!r} has no letter or digit in a-z, 0-9",
                             line=line, hint="give an ASCII id for this student "
                                             "(e.g. a student number)")
        if len(sid) > room:
            raise InputError(where, "student", f"{given!r} makes a {len(sid)}-character id; "
                             f"with class {class_name!r} at most {room} fit in a namespace",
                             line=line, hint="give a shorter id, or a shorter class name")
        problem = namespace_problem(f"{class_name}-{sid}")
        if problem:  # cannot happen after the rules above; the API server's rule decides
            raise InputError(where, "student", problem, line=line, hint="give a plain id")
        if sid in seen:
            raise InputError(where, "student", f"{given!r} is the same student id {sid!r} as "
                             f"line {seen[sid]}", line=line,
                             hint="make the two ids differ (e.g. add a number)")
        seen[sid] = line
        students.append(Student(sid, values.get("name") or given, values.get("email", ""),
                                line))
        if len(students) > MAX_STUDENTS:
            raise InputError(where, None, f"more than {MAX_STUDENTS} students", line=line,
                             hint="split the class")
    if not students:
        raise InputError(where, "student", "no students: only a header row",
                         hint="add one row per student")
    return Roster(Path(path), students, ignored)


def _record_lines(text: str) -> list[int]:
    """The physical line on which each CSV record starts (quoted fields may span lines)."""
    starts, reader = [], csv.reader(io.StringIO(text, newline=""))
    line = 1
    for _ in reader:
        starts.append(line)
        line = reader.line_num + 1
    return starts
