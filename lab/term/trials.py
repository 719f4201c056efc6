"""Katib trials while an experiment runs: a live table on a terminal, one line per finished
trial elsewhere."""

from __future__ import annotations

from typing import Any

from lab.term.console import console, esc, hanging, printable, wrap
from lab.term.tables import short_numbers

STATE_COLOR = {"Succeeded": "green", "Running": "cyan", "Failed": "red",
               "MetricsUnavailable": "red", "Killed": "yellow", "EarlyStopped": "yellow"}


class TrialTable:
    """Katib trials while an experiment runs: a live table on a terminal, one line per
    finished trial elsewhere (CI logs stay readable)."""

    MAX_ROWS = 15  # the newest trials; a long experiment must not scroll the terminal away

    def __init__(self, ev: dict[str, Any], elapsed: Any) -> None:
        self.ev, self.elapsed = ev, elapsed
        self.rows: dict[str, dict[str, Any]] = {}
        self.live: Any = None
        out = console()
        cap = ev.get("max_trials") or "?"
        hanging(f"{elapsed()}     ", f"experiment [bold]{esc(ev['experiment'])}[/]: "
                  f"{esc(ev['algorithm'])}, up to {esc(cap)} trials, {esc(ev['parallel'])} at a "
                  f"time, objective {esc(ev['metric'])}")
        if out.is_terminal:
            from rich.live import Live

            self.live = Live(self.render(), console=out, refresh_per_second=4)
            self.live.start()

    def render(self) -> Any:
        """The table, fitted to the terminal: the trial name (what `kflab logs trial NAME`
        needs), the state, the value and the time are never split; parameters get a column
        each where they fit, else a line of `name=value` pairs under each trial, wrapped
        between pairs."""
        from rich.console import Group
        from rich.text import Text

        rows = list(self.rows.items())
        hidden = max(0, len(rows) - self.MAX_ROWS)
        shown = rows[hidden:]
        params = list(self.ev["params"])
        values = [[short_numbers(r["params"].get(p, "")) for p in params] for _, r in shown]
        objective = [short_numbers("" if r.get("objective") is None else r["objective"])
                     for _, r in shown]
        times = [f"{r['seconds']:.1f}s" if "seconds" in r else "" for _, r in shown]
        headers = ["TRIAL", "STATE", self.ev["metric"].upper(), "TIME"]
        widths = [max([len(headers[0]), *(len(n) for n, _ in shown)]),
                  max([len(headers[1]), *(len(str(r["state"])) for _, r in shown)]),
                  max([len(headers[2]), *map(len, objective)]),
                  max([len(headers[3]), *map(len, times)])]
        apart = [max([len(p), *(len(v[i]) for v in values)]) for i, p in enumerate(params)]
        width = console().width
        together = sum(widths) + sum(apart) + 2 * (len(widths) + len(apart) - 1) < width
        if together:
            headers += [p.upper() for p in params]
            widths += apart
        lines = [Text("  ".join(h.ljust(w) for h, w in zip(headers, widths,
                                                             strict=False)).rstrip(),
                      style="bold")]
        for (name, row), vals, obj, took in zip(shown, values, objective, times, strict=True):
            state = str(row["state"])
            line = Text(printable(name).ljust(widths[0]) + "  ")
            line.append(printable(state).ljust(widths[1]),
                        style=STATE_COLOR.get(state, "white"))
            rest = [obj, took, *(vals if together else [])]
            line.append("  " + "  ".join(v.ljust(w) for v, w in zip(rest, widths[2:],
                                                                     strict=False)))
            line.rstrip()
            lines.append(line)
            if not together and params:
                pairs = "   ".join(f"{p}={v}" for p, v in zip(params, vals, strict=True))
                lines.append(Text(wrap("    " + printable(pairs), width - 1, ""),
                                  style="dim"))
        if hidden:
            lines.append(Text(f"{hidden} earlier trials not shown (kflab get trials)",
                              style="dim"))
        return Group(*lines)

    def update(self, ev: dict[str, Any]) -> None:
        out = console()
        kind = ev["event"]
        if kind == "trial-started":
            self.rows[ev["trial"]] = {"state": "Running", "params": ev["params"]}
        elif kind == "trial-finished":
            row = self.rows.setdefault(ev["trial"], {"params": {}})
            row.update(state=ev["state"], objective=ev["objective"], seconds=ev["seconds"])
            if self.live is None:
                params = ", ".join(f"{k}={v}" for k, v in row["params"].items())
                color = STATE_COLOR.get(ev["state"], "white")
                extra = f" [dim]({esc(ev['detail'])})[/]" if ev["state"] != "Succeeded" else ""
                out.print(f"{self.elapsed()}       trial {esc(ev['trial'])} [{color}]"
                          f"{esc(ev['state'])}[/] {esc(self.ev['metric'])}="
                          f"{esc(ev['objective'])} [dim]{esc(params)} "
                          f"({ev['seconds']:.1f}s)[/]{extra}")
        if self.live is not None:
            self.live.update(self.render())
        if kind == "experiment-finished":
            if self.live is not None:
                self.live.stop()
            best = ", ".join(f"{a['name']}={a['value']}" for a in ev["assignments"])
            hanging(f"{self.elapsed()}     ", f"experiment {esc(ev['experiment'])} "
                      f"[bold]{esc(ev['condition'])}[/] ({esc(ev['reason'])}); best trial "
                      f"{esc(ev['best'] or '-')}" + (f": {esc(best)}" if best else ""))
            for plot in filter(None, (ev.get("plots") or "").split(",")):
                hanging("           plot: ", esc(plot))
