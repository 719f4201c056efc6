"""When a KFP recurring run triggers: the schedules of KFP 2.16's ScheduledWorkflow
controller, with the cron dialect it parses.

- Cron: github.com/robfig/cron v1.2.0 (KFP's go.mod), `cron.Parse`: six fields, seconds
  first (`Second | Minute | Hour | Dom | Month | DowOptional | Descriptor`, parser.go), so a
  five-field line means "sec min hour dom month" with any day of week; `*` or `?`, lists,
  ranges, steps, month and weekday names; `@yearly`, `@monthly`, `@weekly`, `@daily`,
  `@hourly`, `@every DURATION`. The next time is spec.go `SpecSchedule.Next` (day of month
  and day of week are OR-ed unless one is `*`, spec.go dayMatches; none within five years:
  never).
- The controller (backend/src/crd/controller/scheduledworkflow/util): periodic schedules
  (periodic_schedule.go), cron schedules (cron_schedule.go), with and without catch-up,
  start and end times, in the controller's time zone: $CRON_SCHEDULE_TIMEZONE, else the
  local one (util.GetLocation).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any

NEVER = 2**62  # math.MaxInt64 in the controller: no next trigger

_BOUNDS = {  # spec.go bounds
    "second": (0, 59, {}), "minute": (0, 59, {}), "hour": (0, 23, {}), "dom": (1, 31, {}),
    "month": (1, 12, {m: i + 1 for i, m in enumerate(
        ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"])}),
    "dow": (0, 6, {d: i for i, d in enumerate(["sun", "mon", "tue", "wed", "thu", "fri", "sat"])}),
}
_PLACES = ("second", "minute", "hour", "dom", "month", "dow")
_DEFAULTS = ("0", "0", "0", "*", "*", "*")  # parser.go defaults


class CronError(ValueError):
    """What robfig/cron's Parse refuses, in its words."""


@dataclass(frozen=True)
class Spec:
    """A parsed schedule: the allowed values per field, or a constant delay (@every)."""

    fields: dict[str, frozenset[int]]
    star: dict[str, bool]
    every: int = 0  # seconds, for @every

    def next(self, after: datetime) -> datetime | None:
        """The first matching time strictly after `after` (spec.go SpecSchedule.Next,
        ConstantDelaySchedule.Next), None when none comes within five years."""
        if self.every:
            return after.replace(microsecond=0) + timedelta(seconds=self.every)
        t = after.replace(microsecond=0) + timedelta(seconds=1)
        limit = t.year + 5
        f = self.fields
        while t.year <= limit:
            if t.month not in f["month"]:
                t = _month_start(t, 1)
                continue
            if not self._day(t):
                t = _day_start(t) + timedelta(days=1)
                continue
            if t.hour not in f["hour"]:
                t = t.replace(minute=0, second=0) + timedelta(hours=1)
                continue
            if t.minute not in f["minute"]:
                t = t.replace(second=0) + timedelta(minutes=1)
                continue
            if t.second not in f["second"]:
                t = t + timedelta(seconds=1)
                continue
            return t
        return None

    def _day(self, t: datetime) -> bool:
        dom = t.day in self.fields["dom"]
        dow = (t.isoweekday() % 7) in self.fields["dow"]
        if self.star["dom"] or self.star["dow"]:
            return dom and dow
        return dom or dow


def _month_start(t: datetime, months: int) -> datetime:
    year, month = divmod(t.month - 1 + months, 12)
    return t.replace(year=t.year + year, month=month + 1, day=1, hour=0, minute=0, second=0)


def _day_start(t: datetime) -> datetime:
    return t.replace(hour=0, minute=0, second=0)


def _number(text: str, names: dict[str, int]) -> int:
    if text.lower() in names:
        return names[text.lower()]
    if not re.fullmatch(r"[+-]?\d+", text):
        raise CronError(f"Failed to parse int from {text}: strconv.Atoi: parsing "
                        f'"{text}": invalid syntax')
    number = int(text)
    if number < 0:
        raise CronError(f"Negative number ({number}) not allowed: {text}")
    return number


def _range(expr: str, place: str) -> tuple[set[int], bool]:
    """parser.go getRange."""
    low, high, names = _BOUNDS[place]
    range_step = expr.split("/")
    low_high = range_step[0].split("-")
    star = low_high[0] in ("*", "?")
    if star:
        start, end = low, high
    else:
        start = _number(low_high[0], names)
        if len(low_high) == 1:
            end = start
        elif len(low_high) == 2:
            end = _number(low_high[1], names)
        else:
            raise CronError(f"Too many hyphens: {expr}")
    if len(range_step) == 1:
        step = 1
    elif len(range_step) == 2:
        step = _number(range_step[1], {})
        if len(low_high) == 1:
            end = high  # "N/step" means "N-max/step"
    else:
        raise CronError(f"Too many slashes: {expr}")
    if start < low:
        raise CronError(f"Beginning of range ({start}) below minimum ({low}): {expr}")
    if end > high:
        raise CronError(f"End of range ({end}) above maximum ({high}): {expr}")
    if start > end:
        raise CronError(f"Beginning of range ({start}) beyond end of range ({end}): {expr}")
    if step == 0:
        raise CronError(f"Step of range should be a positive number: {expr}")
    return set(range(start, end + 1, step)), star


_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_UNIT = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600}


def _every(text: str) -> int:
    """time.ParseDuration, rounded down to whole seconds, at least one (constantdelay.go)."""
    if text in ("0",):
        return 1
    pos, total = 0, 0.0
    while pos < len(text):
        m = _DURATION.match(text, pos)
        if not m:
            raise CronError(f"Failed to parse duration @every {text}: time: invalid "
                            f'duration "{text}"')
        total += float(m.group(1)) * _UNIT[m.group(2)]
        pos = m.end()
    if not text:
        raise CronError(f'Failed to parse duration @every {text}: time: invalid duration ""')
    return max(1, int(total))


def parse(spec: str) -> Spec:
    """robfig/cron v1.2.0 cron.Parse."""
    if not spec:
        raise CronError("Empty spec string")
    if spec[0] == "@":
        return _descriptor(spec)
    fields = spec.split()
    if not 5 <= len(fields) <= 6:
        raise CronError(f"Expected 5 to 6 fields, found {len(fields)}: {spec}")
    fields = fields + list(_DEFAULTS[len(fields):])
    allowed: dict[str, frozenset[int]] = {}
    star: dict[str, bool] = {}
    for place, text in zip(_PLACES, fields, strict=True):
        values: set[int] = set()
        any_star = False
        for expr in [e for e in text.split(",") if e]:
            got, was_star = _range(expr, place)
            values |= got
            any_star = any_star or was_star
        allowed[place], star[place] = frozenset(values), any_star
    return Spec(allowed, star)


def _descriptor(spec: str) -> Spec:
    """parser.go parseDescriptor."""
    every = "@every "
    if spec.startswith(every):
        return Spec({}, {}, every=_every(spec[len(every):]))
    table = {"@yearly": "0 0 0 1 1 *", "@annually": "0 0 0 1 1 *", "@monthly": "0 0 0 1 * *",
             "@weekly": "0 0 0 * * 0", "@daily": "0 0 0 * * *", "@midnight": "0 0 0 * * *",
             "@hourly": "0 0 * * * *"}
    if spec not in table:
        raise CronError(f"Unrecognized descriptor: {spec}")
    return parse(table[spec])


def location() -> tzinfo:
    """util.GetLocation: $CRON_SCHEDULE_TIMEZONE, else the machine's own zone."""
    name = os.environ.get("CRON_SCHEDULE_TIMEZONE", "")
    if name:
        from zoneinfo import ZoneInfo

        return ZoneInfo(name)
    return datetime.now().astimezone().tzinfo or UTC


@dataclass
class Schedule:
    """A recurring run's trigger as the controller reads it: cron or periodic, start and
    end (Unix seconds or None), catch-up or not."""

    cron: str | None
    interval: int | None
    start: int | None
    end: int | None
    catchup: bool
    zone: Callable[[], tzinfo] = location

    def next_epoch(self, last: int | None, created: int, now: int) -> int:
        """ScheduledWorkflow.getNextScheduledEpoch: when the next run is due (NEVER: no
        more). `last` is the last trigger time, `created` the recurring run's creation."""
        if self.interval is not None:
            return self._periodic(last, created, now)
        if self.cron is not None:
            return self._cron(last, created, now)
        return NEVER if last is not None else created  # a one-off run

    def _periodic(self, last: int | None, created: int, now: int) -> int:
        """periodic_schedule.go GetNextScheduledEpoch / ...NoCatchup."""
        interval = self.interval or 1
        effective = last if last is not None else (self.start if self.start is not None
                                                   else created)
        if self.start is not None and self.start > effective:
            nxt = self.start
        else:
            nxt = effective + interval
            if self.end is not None and self.end < nxt:
                return NEVER
        if self.catchup:
            return nxt
        if now >= nxt + interval:
            return self.end if self.end is not None and self.end < now else now
        return nxt

    def _cron(self, last: int | None, created: int, now: int) -> int:
        """cron_schedule.go GetNextScheduledTime / ...NoCatchup."""
        try:
            spec = parse(self.cron or "")
        except CronError:  # refused when created; an empty or damaged record: never
            return NEVER
        zone = self.zone()
        effective = last if last is not None else (self.start if self.start is not None
                                                   else created)
        start = max(effective, self.start) if self.start is not None else effective
        first = spec.next(datetime.fromtimestamp(start, zone))
        end = self.end if self.end is not None else NEVER
        if first is None or end < int(first.timestamp()):
            return NEVER
        if self.catchup:
            return int(first.timestamp())
        nxt = first
        while True:
            after = spec.next(nxt)
            if after is None:
                break
            stamp = int(after.timestamp())
            if stamp <= now and stamp <= end:
                nxt = after
            else:
                break
        return int(nxt.timestamp())


def schedule_of(recurring: dict[str, Any]) -> Schedule:
    """The Schedule of a V2beta1RecurringRun record (times already Unix seconds)."""
    trigger = recurring.get("trigger") or {}
    cron = trigger.get("cron_schedule")
    periodic = trigger.get("periodic_schedule")
    part = cron if cron is not None else periodic or {}
    from lab.webui.kfp_list import epoch

    return Schedule(cron=cron.get("cron") if cron is not None else None,
                    interval=int(periodic.get("interval_second") or 0) or None
                    if periodic is not None else None,
                    start=epoch(part.get("start_time")) if part.get("start_time") else None,
                    end=epoch(part.get("end_time")) if part.get("end_time") else None,
                    catchup=not recurring.get("no_catchup"))


def now_epoch() -> int:
    return int(time.time())
