"""``scheduler-dedup runs``: the installed command against the real emulator, on records the handler wrote."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from scheduler_dedup.handler.config.settings import Settings
from scheduler_dedup.handler.core.errors import NonRetryableJobError
from scheduler_dedup.handler.protocol.idempotency import Idempotency
from scheduler_dedup.handler.protocol.job import ScheduledRun
from scheduler_dedup.handler.monitoring.run_view import rfc3339
from scheduler_dedup.handler.service.delivery import SchedulerHandler
from scheduler_dedup.handler.stores.firestore.store import FirestoreRunStore
from scheduler_dedup.local.servers.firestore_emulator import FirestoreEmulator

pytestmark = pytest.mark.processes  # tests/costs.py

UTC = timezone.utc
SCHEDULE = "*/15 * * * *"
ZONE = "Europe/Berlin"


def _job(run: ScheduledRun) -> dict[str, object]:
    if run.schedule_time.minute == 30 and run.schedule_time.hour == 1:
        raise NonRetryableJobError("report source unreachable")
    if run.schedule_time.minute == 45 and run.schedule_time.hour == 1:
        return {"tags": {"a", "b"}}  # a set is not JSON: completed, result dropped
    return {"rows": "42"}


def _fill(emulator: FirestoreEmulator, start: datetime, count: int, skip: set[int],
          schedule: str | None = SCHEDULE) -> list[datetime]:
    settings = Settings(project=emulator.project, schedule=schedule, time_zone=ZONE)
    store = FirestoreRunStore.connect(settings.project, settings.store_config.database, settings.collection)
    handler = SchedulerHandler(settings, Idempotency(store), _job)
    times = [start + timedelta(minutes=15 * i) for i in range(count)]
    for i, t in enumerate(times):
        if i not in skip:
            handler.handle({"X-CloudScheduler-JobName": "nightly", "X-CloudScheduler-ScheduleTime": rfc3339(t) or ""})
    return times


def _cli(emulator: FirestoreEmulator, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return _cli_env({"FIRESTORE_EMULATOR_HOST": emulator.host, "GOOGLE_CLOUD_PROJECT": emulator.project, **(env or {})},
                    *args)


@pytest.fixture()
def filled(emulator: FirestoreEmulator) -> list[datetime]:
    # 01:00 .. 02:45 UTC on 2 Nov 2026: 8 fire times, the one at 02:15 never delivered.
    return _fill(emulator, datetime(2026, 11, 2, 1, 0, tzinfo=UTC), 8, skip={5})


def test_table_lists_runs_newest_first_then_the_report_and_exits_1(emulator: FirestoreEmulator,
                                                                    filled: list[datetime]) -> None:
    out = _cli(emulator, "--job", "nightly", "--since", "2026-11-02T01:00:00Z", "--until", "2026-11-02T03:00:00Z")
    assert out.returncode == 1, out.stderr
    assert out.stderr == ""  # no warnings, no progress when stderr is not a terminal
    lines = out.stdout.splitlines()
    rows = [line for line in lines if line.startswith("2026-11-02 ")]
    assert [r[:19] for r in rows] == ["2026-11-02 03:45:00", "2026-11-02 03:30:00", "2026-11-02 03:00:00",
                                      "2026-11-02 02:45:00", "2026-11-02 02:30:00", "2026-11-02 02:15:00",
                                      "2026-11-02 02:00:00"]  # Berlin (CET) times; 03:15 CET = 02:15Z missed
    assert "2026-11-02 02:30:00Z" in rows[1] and "CET" in rows[1]
    assert "report source unreachable" in out.stdout and "dropped: result is" in out.stdout
    assert max(len(line) for line in lines) > 100  # not squeezed to 80 columns when piped
    assert "missed" in out.stdout and "1 missed, 1 failed" in out.stdout and "FAIL" in out.stdout


def test_json_lines_have_stable_fields_and_status_filters(emulator: FirestoreEmulator, filled: list[datetime]) -> None:
    out = _cli(emulator, "--job", "nightly", "--since", "2026-11-02T01:00:00Z", "--until", "2026-11-02T03:00:00Z",
               "--json")
    objects = [json.loads(line) for line in out.stdout.splitlines()]
    runs = [o for o in objects if o["record"] == "run"]
    assert len(runs) == 7 and runs[0]["schedule_time"] == "2026-11-02T02:45:00Z"
    assert set(runs[0]) == {"record", "run_id", "job_name", "schedule_time", "schedule_time_local", "time_zone",
                            "state", "status", "attempts", "took_over", "attempt_id", "previous_attempt_id", "manual",
                            "claimed_at", "finished_at", "duration_seconds", "result_bytes", "result_dropped",
                            "error", "output", "releases", "execution", "schedule", "schedule_since", "project",
                            "location"}
    assert runs[0]["schedule_time_local"] == "2026-11-02T03:45:00+01:00" and runs[0]["schedule"] == SCHEDULE
    findings = [o for o in objects if o["record"] == "finding"]
    assert {(f["kind"], f["schedule_time"]) for f in findings} == {("missed", "2026-11-02T02:15:00Z"),
                                                                   ("failed", "2026-11-02T01:30:00Z")}
    (summary,) = [o for o in objects if o["record"] == "summary"]
    assert summary["ok"] is False and summary["expected"] == 8 and summary["recorded"] == 7
    assert out.returncode == 1

    # "Which runs were missed?" is one command; the failed run alone is a filter on states.
    missed = _cli(emulator, "--job", "nightly", "--since", "2026-11-02T01:00:00Z", "--until", "2026-11-02T03:00:00Z",
                  "--status", "missed", "--json")
    assert [json.loads(line)["record"] for line in missed.stdout.splitlines()] == ["finding", "summary"]
    failed = _cli(emulator, "--job", "nightly", "--since", "2026-11-02T01:00:00Z", "--until", "2026-11-02T03:00:00Z",
                  "--status", "failed", "--no-report", "--json")
    assert [json.loads(line)["state"] for line in failed.stdout.splitlines()] == ["failed"]
    assert failed.returncode == 0


def test_a_complete_window_exits_0_and_show_prints_one_run_in_full(emulator: FirestoreEmulator,
                                                                   filled: list[datetime]) -> None:
    out = _cli(emulator, "--job", "nightly", "--since", "2026-11-02T01:45:00Z", "--until", "2026-11-02T02:15:00Z")
    assert out.returncode == 0 and "OK nightly: 2/2 expected runs recorded" in out.stdout, out.stdout
    # --schedule overrides the stored one: on an hourly schedule the quarter-hour runs are unexpected.
    out = _cli(emulator, "--job", "nightly", "--since", "2026-11-02T01:45:00Z", "--until", "2026-11-02T02:15:00Z",
               "--schedule", "0 * * * *", "--json")
    kinds = [json.loads(line).get("kind") for line in out.stdout.splitlines()
             if json.loads(line)["record"] == "finding"]
    assert kinds == ["unexpected"] and out.returncode == 0

    shown = _cli(emulator, "show", "2026-11-02T01:00:00Z", "--job", "nightly", "--json")
    (run,) = [json.loads(line) for line in shown.stdout.splitlines()]
    assert run["result"] == {"rows": "42"} and run["state"] == "completed"
    by_id = _cli(emulator, "show", run["run_id"])
    assert by_id.returncode == 0 and run["run_id"] in by_id.stdout and '"rows": "42"' in by_id.stdout
    assert _cli(emulator, "show", "0" * 64).returncode == 1


def test_bad_input_names_the_option(emulator: FirestoreEmulator) -> None:
    out = _cli(emulator, "--job", "nightly", "--since", "last tuesday")
    assert out.returncode == 2 and "7d, 36h, 90m" in out.stderr
    out = _cli(emulator, "--job", "nightly", "--schedule", "every 5 minutes")
    assert out.returncode == 2 and "--schedule" in out.stderr and "*/5 * * * *" in out.stderr
    out = _cli(emulator, "--job", "nightly", "--time-zone", "CEST")
    assert out.returncode == 2 and "--time-zone" in out.stderr
    assert _cli(emulator).returncode == 2
    out = _cli(emulator, "--job", "nightly", env={"GOOGLE_CLOUD_PROJECT": ""})
    assert out.returncode == 2 and "give --project" in out.stderr
    out = _cli(emulator, "--job", "nightly", env={"GOOGLE_CLOUD_PROJECT": "", "FIRESTORE_EMULATOR_HOST": "",
                                                   "GOOGLE_APPLICATION_CREDENTIALS": "/nonexistent.json",
                                                   "CLOUDSDK_CONFIG": "/nonexistent"})
    assert out.returncode == 2 and "roles/datastore.viewer" in out.stderr, out.stderr


def test_without_a_schedule_a_failed_run_still_fails_the_check_and_json_ends_with_the_summary(
        emulator: FirestoreEmulator) -> None:
    # A handler without DEDUP_SCHEDULE: the records carry no schedule, so nothing can be missed, but the
    # failed run at 01:30 is a fact of its record.
    _fill(emulator, datetime(2026, 11, 2, 1, 0, tzinfo=UTC), 4, skip={3}, schedule=None)
    window = ("--job", "nightly", "--since", "2026-11-02T01:00:00Z", "--until", "2026-11-02T02:00:00Z")
    out = _cli(emulator, *window)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "FAIL nightly: 3 runs recorded; 1 failed" in out.stdout and "missed runs not checked" in out.stdout
    objects = [json.loads(line) for line in _cli(emulator, *window, "--json").stdout.splitlines()]
    assert objects[-1]["record"] == "summary" and objects[-1]["ok"] is False
    assert objects[-1]["missed_checked"] is False and objects[-1]["counts"]["failed"] == 1
    assert [o["kind"] for o in objects if o["record"] == "finding"] == ["failed"]
    ok = _cli(emulator, "--job", "nightly", "--since", "2026-11-02T01:00:00Z", "--until", "2026-11-02T01:30:00Z")
    assert ok.returncode == 0 and "OK nightly: 2 runs recorded; nothing failed or stuck" in ok.stdout, ok.stdout


def test_show_takes_the_run_id_prefix_the_report_prints(emulator: FirestoreEmulator, filled: list[datetime]) -> None:
    report = _cli(emulator, "--job", "nightly", "--since", "2026-11-02T01:00:00Z", "--until", "2026-11-02T03:00:00Z",
                  "--json")
    (failed,) = [json.loads(line) for line in report.stdout.splitlines() if '"kind": "failed"' in line]
    prefix = failed["run_id"][:12]  # what the report table's "run id" column shows
    shown = _cli(emulator, "show", prefix, "--json")
    assert shown.returncode == 0, shown.stderr
    (run,) = [json.loads(line) for line in shown.stdout.splitlines()]
    assert run["run_id"] == failed["run_id"] and "report source unreachable" in run["error"]

    missing = _cli(emulator, "show", "deadbeef", "--job", "nightly")
    assert missing.returncode == 1 and "No run with run id prefix 'deadbeef'" in missing.stderr, missing.stderr
    neither = _cli(emulator, "show", "yesterday-ish", "--job", "nightly")
    assert neither.returncode == 2 and "neither a run id" in neither.stderr, neither.stderr
    no_job = _cli(emulator, "show", "2026-11-02T01:00:00Z")
    assert no_job.returncode == 2 and "not a run id" in no_job.stderr and "--job" in no_job.stderr

    # Two records whose run ids share a prefix: the prefix is ambiguous, a longer one is not.
    from google.cloud import firestore

    records = firestore.Client(project=emulator.project).collection(Settings(project=emulator.project).collection)
    for tail in ("0" * 52, "1" * 52):
        records.document("abcdef012345" + tail).set(
            {"job_name": "other", "schedule_time": datetime(2026, 11, 2, tzinfo=UTC), "status": "completed",
             "attempt_id": "a"})
    ambiguous = _cli(emulator, "show", "abcdef012345")
    assert ambiguous.returncode == 2 and "matches more than one run" in ambiguous.stderr, ambiguous.stderr
    assert _cli(emulator, "show", "abcdef0123451").returncode == 0


def test_an_unreachable_firestore_fails_fast_naming_the_endpoint(emulator: FirestoreEmulator) -> None:
    import socket

    with socket.socket() as s:  # a port nothing listens on: connections are refused
        s.bind(("127.0.0.1", 0))
        host = f"127.0.0.1:{s.getsockname()[1]}"
    # Bounded by the reader's first-call timeout (10 s), not its 60 s page timeout; the subprocess
    # timeout below leaves room for a loaded machine and still fails the unbounded behaviour.
    scripts = Path(sys.executable).parent
    env = {**os.environ, "FIRESTORE_EMULATOR_HOST": host, "GOOGLE_CLOUD_PROJECT": emulator.project}
    for args in (["--job", "nightly"], ["show", "abcdef012345"]):
        out = subprocess.run([str(scripts / "scheduler-dedup"), "runs", *args], capture_output=True, text=True,
                             env=env, timeout=45, check=False)
        assert out.returncode == 2 and f"FIRESTORE_EMULATOR_HOST={host}" in out.stderr, out.stderr


def test_runs_reads_a_spanner_store_as_it_reads_firestore() -> None:
    """The same handler records on the Spanner emulator: ``runs --store spanner`` (instance and database from
    DEDUP_SPANNER_INSTANCE / DEDUP_SPANNER_DATABASE, as the demo prints them) lists them and finds the missed run."""
    from scheduler_dedup.local.servers.spanner_emulator import SpannerEmulator

    with SpannerEmulator() as server:
        server.prepare("scheduler_runs")
        settings = Settings.from_env({**server.endpoint_env(), "DEDUP_SCHEDULE": SCHEDULE, "DEDUP_TIME_ZONE": ZONE})
        store = server.connect("scheduler_runs")
        handler = SchedulerHandler(settings, Idempotency(store), _job)
        start = datetime(2026, 11, 2, 1, 0, tzinfo=UTC)
        for i in range(8):
            if i != 5:
                t = start + timedelta(minutes=15 * i)
                handler.handle({"X-CloudScheduler-JobName": "nightly", "X-CloudScheduler-ScheduleTime": rfc3339(t) or ""})
        store.close()
        env = {**server.endpoint_env(), "FIRESTORE_EMULATOR_HOST": "", "DEDUP_STORE": ""}
        window = ("--since", "2026-11-02T01:00:00Z", "--until", "2026-11-02T03:00:00Z")
        out = _cli_env(env, "--store", "spanner", "--job", "nightly", *window, "--json")
        objects = [json.loads(line) for line in out.stdout.splitlines()]
        runs = [o for o in objects if o["record"] == "run"]
        assert len(runs) == 7 and runs[0]["schedule_time"] == "2026-11-02T02:45:00Z", out.stdout + out.stderr
        findings = {(f["kind"], f["schedule_time"]) for f in objects if f["record"] == "finding"}
        assert findings == {("missed", "2026-11-02T02:15:00Z"), ("failed", "2026-11-02T01:30:00Z")}
        assert out.returncode == 1
        shown = _cli_env(env, "show", runs[0]["run_id"][:12], "--store", "spanner", "--json")
        assert shown.returncode == 0, shown.stdout + shown.stderr
        assert runs[0]["run_id"] in shown.stdout
        no_instance = _cli_env({**env, "DEDUP_SPANNER_INSTANCE": ""}, "--store", "spanner", "--job", "nightly")
        assert no_instance.returncode == 2 and "DEDUP_SPANNER_INSTANCE" in no_instance.stderr


def _cli_env(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    scripts = Path(sys.executable).parent
    full_env = {**os.environ, **env}
    full_env.pop("COLUMNS", None)
    for key in [k for k, v in full_env.items() if v == ""]:
        full_env.pop(key)  # an empty override removes the variable
    return subprocess.run([str(scripts / "scheduler-dedup"), "runs", *args], capture_output=True, text=True,
                          env=full_env, timeout=120, check=False)


def test_a_missing_spanner_instance_or_database_names_the_options_that_set_them() -> None:
    """The settings name DEDUP_SPANNER_INSTANCE / DEDUP_SPANNER_DATABASE; on the command line the fix is an option."""
    env = {"SPANNER_EMULATOR_HOST": "127.0.0.1:1", "GOOGLE_CLOUD_PROJECT": "demo-scheduler-dedup",
           "DEDUP_SPANNER_INSTANCE": "", "DEDUP_SPANNER_DATABASE": "", "DEDUP_STORE": ""}
    out = _cli_env(env, "--store", "spanner", "--job", "nightly")
    text = " ".join(out.stderr.split())
    assert out.returncode == 2 and "--instance" in text and "--database" in text, out.stderr


def test_a_full_job_name_reads_only_that_projects_and_regions_runs_on_a_shared_store(
        emulator: FirestoreEmulator) -> None:
    # Two jobs with the id "nightly", in two regions, on one store: the EU one ran four times (its 01:30 run
    # failed), the US one only at 01:00. By its short id the US job would count the EU runs as its own, hiding
    # its three missed runs and reporting the EU job's failure.
    settings = Settings(project=emulator.project, schedule=SCHEDULE, time_zone=ZONE)
    store = FirestoreRunStore.connect(settings.project, settings.store_config.database, settings.collection)
    handler = SchedulerHandler(settings, Idempotency(store), _job)
    start = datetime(2026, 11, 2, 1, 0, tzinfo=UTC)
    for i in range(4):
        t = rfc3339(start + timedelta(minutes=15 * i)) or ""
        for location in ("europe-west1", "us-central1")[: 2 if i == 0 else 1]:
            handler.handle({"X-CloudScheduler-JobName": "nightly", "X-CloudScheduler-ScheduleTime": t,
                            "X-Dedup-Location": location})
    window = ("--since", "2026-11-02T01:00:00Z", "--until", "2026-11-02T02:00:00Z", "--json")

    def summary_and_kinds(job: str) -> tuple[dict[str, object], list[tuple[str, str]]]:
        out = _cli(emulator, "--job", job, *window)
        objects = [json.loads(line) for line in out.stdout.splitlines()]
        return objects[-1], sorted((o["kind"], o["schedule_time"]) for o in objects if o["record"] == "finding")

    us, us_findings = summary_and_kinds(f"projects/{emulator.project}/locations/us-central1/jobs/nightly")
    assert us["recorded"] == 1 and us_findings == [("missed", "2026-11-02T01:15:00Z"),
                                                    ("missed", "2026-11-02T01:30:00Z"),
                                                    ("missed", "2026-11-02T01:45:00Z")], us_findings
    eu, eu_findings = summary_and_kinds(f"projects/{emulator.project}/locations/europe-west1/jobs/nightly")
    assert eu["recorded"] == 4 and eu_findings == [("failed", "2026-11-02T01:30:00Z")], eu_findings
    other_project, _ = summary_and_kinds("projects/someone-else/locations/europe-west1/jobs/nightly")
    assert other_project["recorded"] == 0


def test_runs_reads_a_backwards_range_wrapped_and_reports_its_missed_hour(emulator: FirestoreEmulator) -> None:
    """'0 22-2 * * *': its wrapped hours were accepted but never required (an empty reading that refuses the range
    counted too), so a lost 23:00 run passed unnoticed; a job Scheduler accepted fires wrapped, and 23:00 is missed."""
    schedule = "0 22-2 * * *"
    settings = Settings(project=emulator.project, schedule=schedule, time_zone="Etc/UTC")
    store = FirestoreRunStore.connect(settings.project, settings.store_config.database, settings.collection)
    handler = SchedulerHandler(settings, Idempotency(store), _job)
    for hour, day in ((22, 3), (0, 4), (1, 4), (2, 4)):  # 23:00 on 3 Nov never delivered
        handler.handle({"X-CloudScheduler-JobName": "wrapped",
                        "X-CloudScheduler-ScheduleTime": f"2026-11-0{day}T{hour:02d}:00:00Z"})
    out = _cli(emulator, "--job", "wrapped", "--since", "2026-11-03T12:00:00Z", "--until", "2026-11-04T12:00:00Z",
               "--json")
    objects = [json.loads(line) for line in out.stdout.splitlines()]
    assert [(f["kind"], f["schedule_time"]) for f in objects if f["record"] == "finding"] == [
        ("missed", "2026-11-03T23:00:00Z")], out.stdout
    (summary,) = [o for o in objects if o["record"] == "summary"]
    assert (summary["expected"], summary["recorded"]) == (5, 4) and out.returncode == 1


def test_runs_reports_a_paused_span_as_paused_not_missed(emulator: FirestoreEmulator) -> None:
    """Runs of 01:00 to 01:45, then the job paused at 01:50: without --paused-since the next fire times are missed."""
    _fill(emulator, datetime(2026, 11, 2, 1, 0, tzinfo=UTC), 8, skip={4, 5, 6, 7})
    window = ("--job", "nightly", "--since", "2026-11-02T01:00:00Z", "--until", "2026-11-02T03:00:00Z", "--json")
    missed = _cli(emulator, *window)
    assert missed.returncode == 1 and '"missed"' in missed.stdout
    out = _cli(emulator, *window, "--paused-since", "2026-11-02T01:50:00Z")
    objects = [json.loads(line) for line in out.stdout.splitlines()]
    findings = [(f["kind"], f["schedule_time"]) for f in objects if f["record"] == "finding"]
    assert ("paused", "2026-11-02T01:50:00Z") in findings and not [k for k, _ in findings if k == "missed"], findings
    (summary,) = [o for o in objects if o["record"] == "summary"]
    assert summary["counts"]["paused"] == 1 and summary["expected"] == 4
    assert out.returncode == 1  # the failed run of 01:30 still fails the check; the pause does not
    # resumed at 02:20: 02:00 and 02:15 were paused, 02:30 and 02:45 are missed
    over = _cli(emulator, *window, "--paused-since", "2026-11-02T01:50:00Z", "--resumed-at", "2026-11-02T02:20:00Z")
    findings = [(f["kind"], f["schedule_time"]) for f in map(json.loads, over.stdout.splitlines())
                if f["record"] == "finding"]
    assert [t for k, t in findings if k == "missed"] == ["2026-11-02T02:45:00Z", "2026-11-02T02:30:00Z"], findings
    assert ("paused", "2026-11-02T01:50:00Z") in findings
    alone = _cli(emulator, *window, "--resumed-at", "2026-11-02T02:20:00Z")
    assert alone.returncode == 2 and "--paused-since" in alone.stderr, alone.stderr
