"""A pipeline run's timeline for `kflab describe run`: when each task ran, which ran side by
side, which came from the cache (read from the PipelineRun status only)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

WIDTH = 40


def _t(value: Any) -> float | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def render(obj: dict[str, Any]) -> list[str]:
    """Lines of the timeline, or [] when no task has times yet."""
    tasks = ((obj.get("status") or {}).get("run_details") or {}).get("task_details") or []
    rows = [(t, _t(t.get("start_time")), _t(t.get("end_time"))) for t in tasks]
    rows = [r for r in rows if r[1] is not None]
    if not rows:
        return []
    start = min(r[1] for r in rows)  # type: ignore[type-var]
    end = max((r[2] or r[1]) for r in rows)  # type: ignore[type-var]
    span = max(end - start, 1e-3)
    name_w = max(len(str(t.get("display_name"))) for t, _, _ in rows)
    out = [f"Timeline:  ({span:.1f}s; '#' running, 'c' reused from the cache)"]
    for task, s, e in sorted(rows, key=lambda r: (r[1], str(r[0].get("display_name")))):
        e = e if e is not None else end
        a = int((s - start) / span * WIDTH)
        b = max(a + 1, round((e - start) / span * WIDTH))
        mark = "c" if task.get("cached") else "#"
        bar = " " * a + mark * (b - a)
        label = "CACHED" if task.get("cached") else str(task.get("state", ""))
        out.append(f"  {str(task.get('display_name')).ljust(name_w)}  |{bar.ljust(WIDTH)}| "
                   f"{s - start:6.1f}s +{e - s:5.1f}s  {label}")
    # a cache hit (SKIPPED, cached) runs nothing, nor does a task skipped by its condition
    ran = [r for r in rows if not r[0].get("cached") and r[0].get("state") != "SKIPPED"]
    reused = sum(1 for t, _, _ in rows if t.get("cached"))
    if not ran:
        out.append("  no task ran" + (f": {reused} reused from the cache (SKIPPED, cached)"
                                      if reused else ""))
        return out
    peak = max(sum(1 for _, s2, e2 in ran if s2 <= s < (e2 or end))  # type: ignore[operator]
               for _, s, _ in ran)
    out.append(f"  at most {max(peak, 1)} task(s) at once; {reused} from the cache")
    return out
