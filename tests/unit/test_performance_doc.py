"""docs/performance.md: every figure says the load it was measured at (issue 33 Why 9) --
each table names the load average in its header or in the lines just above it -- and where
the local pipelines are compared with kfp.local, the quiet figures come first."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "performance.md"


def _tables(lines: list[str]) -> list[tuple[int, int]]:
    out, i = [], 0
    while i < len(lines):
        if lines[i].startswith("|"):
            j = i
            while j < len(lines) and lines[j].startswith("|"):
                j += 1
            out.append((i, j))
            i = j
        else:
            i += 1
    return out


def test_every_table_names_the_load_it_was_measured_at() -> None:
    lines = DOC.read_text().splitlines()
    missing = []
    for start, _ in _tables(lines):
        header = lines[start].lower()
        above = " ".join(lines[max(0, start - 4):start]).lower()
        if "load average" not in header and "load average" not in above:
            missing.append(f"line {start + 1}: {lines[start][:60]}")
    assert not missing, "tables without their load average:\n" + "\n".join(missing)


def test_quiet_figures_come_first_for_the_kfp_local_comparison() -> None:
    text = DOC.read_text()
    section = text[text.index("## Local pipelines against bare kfp.local"):]
    section = section[:section.index("\n## ", 1)]
    lines = section.splitlines()
    tables = []
    first = _tables(lines)[0][0]
    assert "load average" in lines[first].lower(), "the section's first table names no load"
    for start, end in _tables(lines):
        header = [c.strip().lower() for c in lines[start].strip("|").split("|")]
        if "load average" not in header:
            continue
        col = header.index("load average")
        loads = []
        for row in lines[start + 2:end]:
            found = re.findall(r"\d+(?:\.\d+)?", row.strip("|").split("|")[col])
            if found:
                loads.append(max(float(x) for x in found))
        tables.append(loads)
        # within a table, quiet rows (load average below 2) before loaded ones
        assert loads == sorted(loads, key=lambda x: x >= 2), loads
    assert tables and tables[0] and tables[0][0] < 2, tables  # the section opens quiet
