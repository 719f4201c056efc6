"""The guided labs' progress, as the UI shows it: read-only, from the records `kflab scenario
start`, `kflab check`, `kflab hint`, `kflab solve` and `kflab skip` keep in the state folder
(`progress/<id>.json` and its event journal), so the page says what `kflab scenario status`
says without running a check itself."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lab.errors import LabError
from lab.scenarios import guided, journal, loader


class Unknown(Exception):
    pass


def _started(root: Path) -> list[str]:
    folder = Path(root) / "progress"
    if not folder.is_dir():
        return []
    return sorted(p.stem for p in folder.glob("*.json") if p.is_file())


def listing(root: Path) -> list[dict[str, Any]]:
    """Every lab started in this state folder: its step, of how many, and whether it is the
    one `kflab check` works on."""
    active = guided.active_id(root)
    rows = []
    for sid in _started(root):
        progress = guided.progress_of(root, sid)
        if progress is None:
            continue
        try:
            scenario = loader.find(sid)
            title, total = scenario.title, len(scenario.steps)
        except LabError:  # started from a folder no longer on the search path
            title, total = "", None
        current = int(progress.get("current", 0))
        rows.append({"id": sid, "title": title, "step": min(current + 1, total or current + 1),
                     "steps": total, "finished": total is not None and current >= total,
                     "active": sid == active, "started_at": progress.get("started_at")})
    return rows


def page(root: Path, sid: str) -> dict[str, Any]:
    """One lab: each step's state (passed, solved, skipped, current, todo), the checks it
    runs, how many `kflab check` attempts failed and how the last one went, hints used."""
    if sid not in _started(root):
        raise Unknown(f"no guided lab '{sid}' started in this state folder")
    progress = guided.progress_of(root, sid)
    if progress is None:
        raise Unknown(f"the progress of '{sid}' is unreadable: "
                      f"`kflab scenario start {sid} --restart` begins again")
    try:
        scenario = loader.find(sid)
    except LabError as exc:
        raise Unknown(str(exc)) from None
    session = guided.Session(scenario, progress, root)
    checks: dict[str, list[dict[str, Any]]] = {}
    events, _bad = journal.read(journal.journal_file(root, sid))
    for e in events:
        if e["event"] == "check" and isinstance(e.get("step"), str):
            checks.setdefault(e["step"], []).append({"t": e["t"], "ok": bool(e.get("ok"))})
    steps = []
    for i, step in enumerate(scenario.steps):
        record = progress.get("steps", {}).get(step.id) or {}
        tried = checks.get(step.id, [])
        steps.append({
            "n": i + 1, "id": step.id, "title": step.title,
            "status": guided.step_status(session, i),
            "checks": [c.label for c in step.needs + step.checks],
            "attempts": int(record.get("attempts", len(tried))),
            "failed": sum(1 for c in tried if not c["ok"]),
            "last": tried[-1] if tried else None,
            "hints": int(record.get("hints", 0)), "hints_total": len(step.hints),
            "passed_at": record.get("passed_at"), "skipped": record.get("skipped") or ""})
    return {"id": sid, "title": scenario.title, "active": sid == guided.active_id(root),
            "finished": session.finished, "started_at": progress.get("started_at"),
            "workdir": progress.get("workdir", ""), "steps": steps}
