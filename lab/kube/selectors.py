"""Label selectors as kubectl's `-l` takes them: `app=web,tier!=db,env in (a,b),!legacy`.

Parsed and validated as the API server does (keys and values checked by lab.kube.names),
then matched against metadata.labels on both backends alike.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from lab.errors import LabError
from lab.kube.names import check_label

_SET = re.compile(r"^\s*(!?)\s*([^\s!=,()]+)\s+(in|notin)\s*\(([^)]*)\)\s*$")
_EQ = re.compile(r"^\s*([^\s!=,()]+)\s*(==|=|!=)\s*([^\s!=,()]*)\s*$")
_EXISTS = re.compile(r"^\s*(!?)\s*([^\s!=,()]+)\s*$")


@dataclass(frozen=True)
class Requirement:
    key: str
    op: str  # =, !=, in, notin, exists, !exists
    values: tuple[str, ...] = ()

    def matches(self, labels: dict[str, Any]) -> bool:
        has = self.key in labels
        value = str(labels.get(self.key, ""))
        if self.op == "exists":
            return has
        if self.op == "!exists":
            return not has
        if self.op in ("=", "in"):
            return has and value in self.values
        return not has or value not in self.values  # != and notin, as Kubernetes


def _split(text: str) -> list[str]:
    """Split on commas outside parentheses."""
    parts, depth, cur = [], 0, ""
    for ch in text:
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    return [*parts, cur]


def _checked(key: str, value: str = "x") -> None:
    try:
        check_label(key, value or "x")  # an empty value is allowed
    except LabError as exc:
        raise LabError(f"invalid label selector: {exc.args[0]}", hint=exc.hint) from None


def parse(selector: str) -> list[Requirement]:
    """The requirements of a selector; LabError naming the bad part."""
    reqs = []
    for part in _split(selector):
        if not part.strip():
            raise LabError(f"invalid label selector {selector!r}: an empty requirement",
                           hint="e.g. -l app=web,tier!=db")
        if m := _SET.match(part):
            if m.group(1):
                raise LabError(f"invalid label selector part {part.strip()!r}",
                               hint="write `key notin (a,b)` rather than `!key in (...)`")
            values = tuple(v.strip() for v in m.group(4).split(","))
            for v in values:
                _checked(m.group(2), v)
            reqs.append(Requirement(m.group(2), m.group(3), values))
        elif m := _EQ.match(part):
            _checked(m.group(1), m.group(3))
            reqs.append(Requirement(m.group(1), "!=" if m.group(2) == "!=" else "=",
                                    (m.group(3),)))
        elif m := _EXISTS.match(part):
            _checked(m.group(2))
            reqs.append(Requirement(m.group(2), "!exists" if m.group(1) else "exists"))
        else:
            raise LabError(f"invalid label selector part {part.strip()!r}",
                           hint="use key=value, key!=value, key in (a,b), key notin (a), "
                                "key or !key, joined by commas")
    return reqs


def matches(reqs: list[Requirement], obj: dict[str, Any]) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return all(r.matches(labels if isinstance(labels, dict) else {}) for r in reqs)
