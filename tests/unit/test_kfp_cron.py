"""When recurring runs trigger: robfig/cron v1.2.0's parser and SpecSchedule.Next (the cron
dialect KFP 2.16's ScheduledWorkflow controller uses), and the controller's periodic and
cron schedules with and without catch-up. Expected values are upstream's own test cases:
robfig/cron v1.2.0 spec_test.go TestNext and parser_test.go, and KFP 2.16.0
backend/src/crd/controller/scheduledworkflow/util/{periodic,cron}_schedule_test.go."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from lab.webui import kfp_cron
from lab.webui.kfp_cron import NEVER, CronError, Schedule, parse

SECOND, MINUTE, HOUR = 1, 60, 3600


def at(text: str) -> datetime:
    """robfig's test times ("Mon Jul 9 14:45 2012", seconds optional), in UTC."""
    for fmt in ("%a %b %d %H:%M:%S %Y", "%a %b %d %H:%M %Y"):
        try:
            return datetime.strptime(text, fmt).replace(tzinfo=UTC)
        except ValueError:
            continue
    raise ValueError(text)


@pytest.mark.parametrize(("now", "spec", "expected"), [
    # spec_test.go TestNext (the cases without daylight saving)
    ("Mon Jul 9 14:45 2012", "0 0/15 * * *", "Mon Jul 9 15:00 2012"),
    ("Mon Jul 9 14:59 2012", "0 0/15 * * *", "Mon Jul 9 15:00 2012"),
    ("Mon Jul 9 14:59:59 2012", "0 0/15 * * *", "Mon Jul 9 15:00 2012"),
    ("Mon Jul 9 15:45 2012", "0 20-35/15 * * *", "Mon Jul 9 16:20 2012"),
    ("Mon Jul 9 23:46 2012", "0 */15 * * *", "Tue Jul 10 00:00 2012"),
    ("Mon Jul 9 23:45 2012", "0 20-35/15 * * *", "Tue Jul 10 00:20 2012"),
    ("Mon Jul 9 23:35:51 2012", "15/35 20-35/15 * * *", "Tue Jul 10 00:20:15 2012"),
    ("Mon Jul 9 23:35:51 2012", "15/35 20-35/15 1/2 * *", "Tue Jul 10 01:20:15 2012"),
    ("Mon Jul 9 23:35:51 2012", "15/35 20-35/15 10-12 * *", "Tue Jul 10 10:20:15 2012"),
    ("Mon Jul 9 23:35:51 2012", "15/35 20-35/15 1/2 */2 * *", "Thu Jul 11 01:20:15 2012"),
    ("Mon Jul 9 23:35:51 2012", "15/35 20-35/15 * 9-20 * *", "Wed Jul 10 00:20:15 2012"),
    ("Mon Jul 9 23:35:51 2012", "15/35 20-35/15 * 9-20 Jul *", "Wed Jul 10 00:20:15 2012"),
    ("Mon Jul 9 23:35 2012", "0 0 0 9 Apr-Oct ?", "Thu Aug 9 00:00 2012"),
    ("Mon Jul 9 23:35 2012", "0 0 0 */5 Apr,Aug,Oct Mon", "Mon Aug 6 00:00 2012"),
    ("Mon Jul 9 23:35 2012", "0 0 0 */5 Oct Mon", "Mon Oct 1 00:00 2012"),
    ("Mon Jul 9 23:35 2012", "0 0 0 * Feb Mon", "Mon Feb 4 00:00 2013"),
    ("Mon Jul 9 23:35 2012", "0 0 0 * Feb Mon/2", "Fri Feb 1 00:00 2013"),
    ("Mon Dec 31 23:59:45 2012", "0 * * * * *", "Tue Jan 1 00:00:00 2013"),
    ("Mon Jul 9 23:35 2012", "0 0 0 29 Feb ?", "Mon Feb 29 00:00 2016"),
    ("Mon Jul 9 23:35 2012", "0 0 0 30 Feb ?", ""),
    ("Mon Jul 9 23:35 2012", "0 0 0 31 Apr ?", ""),
    # descriptors (parser.go parseDescriptor)
    ("Mon Jul 9 23:35 2012", "@hourly", "Tue Jul 10 00:00 2012"),
    ("Mon Jul 9 23:35 2012", "@daily", "Tue Jul 10 00:00 2012"),
    ("Mon Jul 9 23:35 2012", "@weekly", "Sun Jul 15 00:00 2012"),
    ("Mon Jul 9 23:35 2012", "@monthly", "Wed Aug 1 00:00 2012"),
    ("Mon Jul 9 23:35 2012", "@yearly", "Tue Jan 1 00:00 2013"),
    ("Mon Jul 9 23:35 2012", "@every 1h30m", "Tue Jul 10 01:05 2012"),
])
def test_next_as_robfig_cron_computes_it(now: str, spec: str, expected: str) -> None:
    got = parse(spec).next(at(now))
    assert got == (at(expected) if expected else None)


def test_a_five_field_line_starts_with_seconds_as_in_kfp() -> None:
    """KFP's cron has six fields, seconds first (the SDK's docs: '0 0 9 ? * 2-6'); a
    five-field crontab line is read as robfig reads it: 'sec min hour dom month'."""
    every_minute_at_5s = parse("5 * * * *")
    assert every_minute_at_5s.next(at("Mon Jul 9 14:45 2012")) == at("Mon Jul 9 14:45:05 2012")
    # the kfp.Client docstring's example: robfig counts days from 0 = Sunday, so 2-6 is
    # Tuesday to Saturday (on a cluster too)
    tue_to_sat_9am = parse("0 0 9 ? * 2-6")
    assert tue_to_sat_9am.next(at("Fri Jul 13 10:00 2012")) == at("Sat Jul 14 09:00 2012")
    assert tue_to_sat_9am.next(at("Sat Jul 14 10:00 2012")) == at("Tue Jul 17 09:00 2012")


@pytest.mark.parametrize(("spec", "message"), [
    ("", "Empty spec string"),
    ("* * * *", "Expected 5 to 6 fields, found 4: * * * *"),
    ("0 0 0 0 * *", "Beginning of range (0) below minimum (1): 0"),
    ("60 * * * * *", "End of range (60) above maximum (59): 60"),
    ("0 5-1 * * * *", "Beginning of range (5) beyond end of range (1): 5-1"),
    ("0 */0 * * * *", "Step of range should be a positive number: */0"),
    ("0 1-2-3 * * * *", "Too many hyphens: 1-2-3"),
    ("0 1/2/3 * * * *", "Too many slashes: 1/2/3"),
    ("0 0 0 * foo *", "Failed to parse int from foo"),
    ("@fortnightly", "Unrecognized descriptor: @fortnightly"),
    ("@every x", "Failed to parse duration @every x"),
])
def test_bad_cron_lines_get_robfigs_message(spec: str, message: str) -> None:
    with pytest.raises(CronError) as err:
        parse(spec)
    assert message in str(err.value)


def utc() -> datetime.tzinfo:  # type: ignore[name-defined]
    return UTC


def test_periodic_schedule_as_the_controller_computes_it() -> None:
    """periodic_schedule_test.go."""
    s = Schedule(None, MINUTE, 10 * HOUR, 11 * HOUR, catchup=True)
    assert s.next_epoch(0, 0, 0) == 10 * HOUR  # first job: the start
    assert s.next_epoch(10 * HOUR + 5 * MINUTE, 0, 0) == 10 * HOUR + 6 * MINUTE
    assert s.next_epoch(13 * HOUR, 0, 0) == NEVER  # after the end
    assert Schedule(None, MINUTE, None, None, True).next_epoch(10 * HOUR, 0, 0) == \
        10 * HOUR + MINUTE
    s = Schedule(None, 60, 10 * HOUR + 10 * MINUTE, 11 * HOUR, catchup=True)
    created = 10 * HOUR + 15 * MINUTE
    assert s.next_epoch(10 * HOUR + 20 * MINUTE, created, 0) == 10 * HOUR + 21 * MINUTE
    assert s.next_epoch(None, created, 0) == 10 * HOUR + 11 * MINUTE  # from the start time
    s = Schedule(None, 60, None, 11 * HOUR, catchup=True)
    assert s.next_epoch(None, created, 0) == 10 * HOUR + 16 * MINUTE  # from the creation


def test_periodic_schedule_without_catchup() -> None:
    """periodic_schedule_test.go TestPeriodicSchedule_GetNextScheduledEpochNoCatchup."""
    s = Schedule(None, 60, 10 * HOUR + 10 * MINUTE, 11 * HOUR, catchup=False)
    last, created = 10 * HOUR + 20 * MINUTE, 10 * HOUR + 15 * MINUTE
    assert s.next_epoch(last, created, last + 30 * SECOND) == last + MINUTE
    assert s.next_epoch(last, created, last + MINUTE) == last + MINUTE
    assert s.next_epoch(last, created, 10 * HOUR + 21 * MINUTE + 30) == 10 * HOUR + 21 * MINUTE
    assert s.next_epoch(last, created, 10 * HOUR + 30 * MINUTE) == 10 * HOUR + 30 * MINUTE
    assert s.next_epoch(last, created, 12 * HOUR) == 11 * HOUR  # behind, past the end
    assert s.next_epoch(None, created, 0) == 10 * HOUR + 11 * MINUTE


def test_cron_schedule_as_the_controller_computes_it() -> None:
    """cron_schedule_test.go, in UTC."""
    every_minute = "0 * * * * * "
    s = Schedule(every_minute, None, 10 * HOUR, 11 * HOUR, catchup=True, zone=utc)
    assert s.next_epoch(0, 0, 0) == 10 * HOUR + MINUTE
    assert s.next_epoch(10 * HOUR + 5 * MINUTE, 0, 0) == 10 * HOUR + 6 * MINUTE
    assert s.next_epoch(13 * HOUR, 0, 0) == NEVER
    assert Schedule("", None, 10 * HOUR, 11 * HOUR, True, zone=utc).next_epoch(0, 0, 0) == NEVER
    assert Schedule("*$&%*(W&", None, None, None, True, zone=utc).next_epoch(0, 0, 0) == NEVER
    s = Schedule(every_minute, None, 10 * HOUR + 10 * MINUTE, 11 * HOUR, True, zone=utc)
    created = 10 * HOUR + 15 * MINUTE
    assert s.next_epoch(10 * HOUR + 20 * MINUTE, created, 0) == 10 * HOUR + 21 * MINUTE
    assert s.next_epoch(None, created, 0) == 10 * HOUR + 11 * MINUTE
    s = Schedule(every_minute, None, None, 11 * HOUR, True, zone=utc)
    assert s.next_epoch(None, created, 0) == created + MINUTE


def test_cron_schedule_without_catchup() -> None:
    """cron_schedule_test.go TestCronSchedule_GetNextScheduledTimeNoCatchup."""
    s = Schedule("0 * * * * * ", None, 10 * HOUR + 10 * MINUTE, 11 * HOUR, catchup=False,
                 zone=utc)
    last, created = 10 * HOUR + 20 * MINUTE, 10 * HOUR + 15 * MINUTE
    assert s.next_epoch(last, created, last + 30) == last + MINUTE
    assert s.next_epoch(last, created, last + MINUTE) == last + MINUTE
    assert s.next_epoch(last, created, 10 * HOUR + 21 * MINUTE + 30) == 10 * HOUR + 21 * MINUTE
    assert s.next_epoch(last, created, 10 * HOUR + 30 * MINUTE) == 10 * HOUR + 30 * MINUTE


def test_the_zone_is_cron_schedule_timezone_else_the_local_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """util.GetLocation; cron_schedule_test.go ..._LocationsEnvSet: 09:00 in Shanghai."""
    monkeypatch.setenv("CRON_SCHEDULE_TIMEZONE", "Asia/Shanghai")
    s = Schedule("0 0 9 * * *", None, None, None, catchup=True)
    due = s.next_epoch(None, int(datetime(2010, 1, 11, 0, 0, tzinfo=UTC).timestamp()), 0)
    assert datetime.fromtimestamp(due, UTC) == datetime(2010, 1, 11, 1, 0, tzinfo=UTC)
    monkeypatch.delenv("CRON_SCHEDULE_TIMEZONE")
    assert kfp_cron.location() is not None
