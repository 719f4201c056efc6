"""One field of a Katib Experiment read with its type checked: an error names the dotted
path of the field and the fix (InputError), as Katib's webhook names it. spec.py and
template.py read every field through it."""

from __future__ import annotations

from typing import Any

from lab import limits
from lab.errors import InputError


class Reader:
    """Field access that raises InputError with the dotted path of the field."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, path: str, problem: str, hint: str | None = None) -> InputError:
        return InputError(self.source, path, problem, hint=hint)

    def get(self, data: dict[str, Any], key: str, kind: type | tuple[type, ...], path: str,
            *, required: bool = False, default: Any = None) -> Any:
        where = f"{path}.{key}" if path else key
        if key not in data or data[key] is None:
            if required:
                raise self.fail(where, "missing", f"add '{key}:' under {path or 'the object'}")
            return default
        value = data[key]
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            names = " or ".join(k.__name__ for k in kinds)
            raise self.fail(where, f"expected {names}, got {type(value).__name__} "
                                   f"({short(value)})")
        return value

    def count(self, data: dict[str, Any], key: str, path: str, *, minimum: int,
              maximum: tuple[int, str] = (limits.INT32_MAX, "INT32_MAX")) -> int | None:
        """An integer field; `maximum` is (limit, its name in lab/limits.py)."""
        value = self.get(data, key, int, path)
        if value is not None and value < minimum:
            raise self.fail(f"{path}.{key}", f"must be >= {minimum}, got {value}")
        if value is not None and value > maximum[0]:
            raise self.fail(f"{path}.{key}", limits.limit(key, value, *maximum),
                            f"set {key} to at most {maximum[0]}")
        return value


def short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
