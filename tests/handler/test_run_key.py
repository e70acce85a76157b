"""Run key parsing and run ids, without Firestore."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from scheduler_dedup.handler import ConfigError, RequestHeaderError, Settings
from scheduler_dedup.handler.schedule.run_key import parse_schedule_time, run_key_from_headers

NOW = datetime(2026, 10, 16, 12, 0, 30, tzinfo=timezone.utc)


def key(time: str, **headers: str):  # type: ignore[no-untyped-def]
    return run_key_from_headers({"X-CloudScheduler-JobName": "j", "X-CloudScheduler-ScheduleTime": time, **headers},
                                default_project="p1", server_now=NOW, manual_tolerance_seconds=5)


@pytest.mark.parametrize("stamp", ["2026-10-16T12:00:00Z", "2026-10-16T05:00:00-07:00", "2026-10-16T12:00:00.000Z",
                                   "2026-10-16t12:00:00z", "2026-10-16T17:30:00+05:30",
                                   "2026-10-16T12:00:00.000000000Z"])
def test_offset_equivalent_times_give_one_run_id(stamp: str) -> None:
    assert key(stamp).run_id == key("2026-10-16T12:00:00Z").run_id


def test_run_id_is_fixed_length_and_distinguishes_every_part() -> None:
    base = key("2026-10-16T12:00:00Z")
    assert len(base.run_id) == 64 and int(base.run_id, 16) >= 0
    others = [key("2026-10-16T12:00:01Z"), key("2026-10-16T12:00:00Z", **{"X-Dedup-Project": "p2"}),
              key("2026-10-16T12:00:00Z", **{"X-Dedup-Location": "us-east1"}),
              run_key_from_headers({"X-CloudScheduler-JobName": "k", "X-CloudScheduler-ScheduleTime": "2026-10-16T12:00:00Z"},
                                   default_project="p1", server_now=NOW, manual_tolerance_seconds=5)]
    assert len({base.run_id, *(o.run_id for o in others)}) == 5


def test_future_schedule_time_beyond_tolerance_is_a_manual_run() -> None:
    assert not key("2026-10-16T12:00:35Z").manual  # 5 s ahead: clock skew
    forced = key("2026-10-16T12:01:00Z")  # the next minute's run, forced now
    assert forced.manual
    later = run_key_from_headers({"X-CloudScheduler-JobName": "j", "X-CloudScheduler-ScheduleTime": "2026-10-16T12:01:00Z"},
                                 default_project="p1", server_now=NOW + timedelta(seconds=40),
                                 manual_tolerance_seconds=5)
    assert not later.manual and later.run_id != forced.run_id


@pytest.mark.parametrize("bad", ["", "2026-10-16", "2026-10-16T12:00:00", "12:00", "2026-10-16T25:00:00Z", "now",
                                 "0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00", "1969-12-31T23:59:59Z"])
def test_malformed_schedule_times_are_refused(bad: str) -> None:
    with pytest.raises(RequestHeaderError) as info:
        parse_schedule_time(bad)
    assert info.value.header == "X-CloudScheduler-ScheduleTime"


def test_settings_from_env_defaults_and_errors() -> None:
    settings = Settings.from_env({"GOOGLE_CLOUD_PROJECT": "p"})
    assert (settings.collection, settings.store_config.database, settings.lease_seconds, settings.retention_seconds,
            settings.manual_tolerance_seconds) == ("scheduler_runs", "(default)", 300.0, 604800.0, 5.0)
    with pytest.raises(ConfigError, match="GOOGLE_CLOUD_PROJECT"):
        Settings.from_env({})
    with pytest.raises(ConfigError, match="DEDUP_LEASE_SECONDS='nan'"):
        Settings.from_env({"GOOGLE_CLOUD_PROJECT": "p", "DEDUP_LEASE_SECONDS": "nan"})


def test_settings_refuse_an_invalid_project_and_an_overflowing_retention() -> None:
    with pytest.raises(ConfigError, match="GOOGLE_CLOUD_PROJECT='Bad Project!'"):
        Settings.from_env({"GOOGLE_CLOUD_PROJECT": "Bad Project!"})
    with pytest.raises(ConfigError, match="DEDUP_RETENTION_SECONDS=1e\\+14 is over"):
        Settings.from_env({"GOOGLE_CLOUD_PROJECT": "p", "DEDUP_RETENTION_SECONDS": "1e14"})
    assert Settings.from_env({"GOOGLE_CLOUD_PROJECT": "example.com:my-project"}).project == "example.com:my-project"


def test_a_full_job_name_is_split_into_project_location_and_job_id() -> None:
    full = key("2026-10-16T12:00:00Z", **{"X-CloudScheduler-JobName": "projects/p2/locations/us-east1/jobs/j"})
    short = key("2026-10-16T12:00:00Z", **{"X-Dedup-Project": "p2", "X-Dedup-Location": "us-east1"})
    assert (full.project, full.location, full.job_name) == ("p2", "us-east1", "j")
    assert full.run_id == short.run_id


@pytest.mark.parametrize("name", ["projects/Bad Project/locations/us-east1/jobs/j",
                                  "projects/p2/locations/us-east1/jobs/bad name", "projects/p2/jobs/j"])
def test_a_malformed_full_job_name_is_refused(name: str) -> None:
    with pytest.raises(RequestHeaderError) as info:
        key("2026-10-16T12:00:00Z", **{"X-CloudScheduler-JobName": name})
    assert info.value.header == "X-CloudScheduler-JobName"
