"""``run-local`` reads a job's settings as ``check`` and ``pulumi preview`` do (the same refusals and advisories, in
the same words), takes the store's names as the docs say them, and lets one's own slow job overlap the next fire
time under each overlap policy."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from scheduler_dedup.handler.config.settings import Settings
from scheduler_dedup.handler.schedule.overlap_policy import OVERLAP_POLICIES, replace_problem
from scheduler_dedup.infra.errors import DedupConfigError
from scheduler_dedup.infra.job.schedule_inputs import validate_time_zone
from tests.policies.conftest import job, run

pytestmark = pytest.mark.processes  # tests/costs.py: run-local starts a store server and a handler

SLOW_JOB = '''
import os, time

def run(scheduled):
    start = time.time()
    with open(os.environ["JOB_LOG"], "a") as fh:
        fh.write(scheduled.schedule_time.isoformat() + "\\n")
    time.sleep(float(os.environ["JOB_SECONDS"]))
    with open(os.environ["JOB_LOG"] + ".spans", "a") as fh:  # when the job itself executed, by its own clock
        fh.write(f"{start} {time.time()}\\n")
    return {"ok": True}

def unstorable(scheduled):
    return {"rows": {1, 2, 3}}  # a set: no JSON
'''


def _run_local(tmp_path: Path, *args: str, seconds: float = 0.0) -> subprocess.CompletedProcess[str]:
    (tmp_path / "mine").mkdir(exist_ok=True)
    (tmp_path / "mine" / "slow.py").write_text(SLOW_JOB)
    env = {k: v for k, v in os.environ.items() if k not in ("FIRESTORE_EMULATOR_HOST", "PYTHONPATH", "DEDUP_STORE")}
    return subprocess.run([str(Path(sys.executable).parent / "scheduler-dedup"), "run-local", "--source",
                           str(tmp_path / "mine"), "--job", "slow:run", "--speed", "600",
                           "--env", f"JOB_LOG={tmp_path / 'log'}", "--env", f"JOB_SECONDS={seconds}", *args],
                          capture_output=True, text=True, env=env, timeout=600, check=False)


def _words(text: str) -> str:
    return " ".join(text.split())


def test_a_fixed_offset_time_zone_is_refused_with_the_message_check_and_preview_give(tmp_path: Path) -> None:
    out = _run_local(tmp_path, "--schedule", "0 9 * * *", "--time-zone", "EST", "--runs", "1")
    assert out.returncode == 2, out.stdout + out.stderr
    [finding] = run("scheduler-time-zone-fixed-offset", [job(timeZone="EST")])  # what `check` reports
    with pytest.raises(DedupConfigError) as preview:  # what the component raises at preview
        validate_time_zone("EST")
    message = finding.message.removeprefix("timeZone ")
    assert message in str(preview.value)
    assert f"--time-zone {message}" in _words(out.stderr), out.stderr
    assert not (tmp_path / "log").exists()  # refused before anything started


def test_an_oversized_step_prints_the_advisory_check_prints(tmp_path: Path) -> None:
    out = _run_local(tmp_path, "--schedule", "*/90 * * * *", "--runs", "1")
    assert out.returncode == 0, out.stdout + out.stderr
    [finding] = run("scheduler-schedule-step", [job(schedule="*/90 * * * *")])
    assert finding.message.startswith("schedule ")
    assert f"advisory: --schedule {finding.message.removeprefix('schedule ')}" in _words(out.stdout), out.stdout


def test_an_overlap_policy_the_handler_refuses_is_refused_with_its_message(tmp_path: Path) -> None:
    out = _run_local(tmp_path, "--schedule", "*/10 * * * *", "--overlap", "queue", "--runs", "1")
    assert out.returncode == 2, out.stdout + out.stderr
    assert "--overlap 'queue' is not an overlap policy" in _words(out.stderr), out.stderr
    out = _run_local(tmp_path, "--schedule", "*/10 * * * *", "--env", "DEDUP_OVERLAP=skip", "--runs", "1")
    assert out.returncode == 2 and "run-local sets it from --overlap" in _words(out.stderr), out.stderr
    out = _run_local(tmp_path, "--schedule", "*/10 * * * *", "--overlap", "replace", "--runs", "1")
    assert out.returncode == 2, out.stdout + out.stderr
    assert replace_problem("replace", "python", "--overlap", "--job (run-local's target type)") in _words(out.stderr)
    assert "emulator" not in out.stdout, out.stdout  # refused before any server started, as preview refuses it


def test_memorystore_is_the_redis_store_and_a_wrong_name_gets_the_right_one(tmp_path: Path) -> None:
    assert Settings.from_env({"GOOGLE_CLOUD_PROJECT": "demo-x", "DEDUP_STORE": "memorystore", "DEDUP_REDIS_URL":
                              "redis://127.0.0.1:6379/0"}).store == "redis"
    out = _run_local(tmp_path, "--schedule", "*/10 * * * *", "--store", "memorystor", "--runs", "1")
    assert out.returncode == 2 and "did you mean 'memorystore'?" in out.stderr, out.stderr
    out = _run_local(tmp_path, "--schedule", "*/10 * * * *", "--store", "memorystore", "--runs", "2")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "redis-server on 127.0.0.1:" in out.stdout and "OK slow-run: 2/2" in out.stdout, out.stdout


def _executed_together(log: Path) -> int:
    """How many of the job's executions ran while another one ran, from the job's own start and end times."""
    spans = [tuple(map(float, line.split())) for line in log.read_text().splitlines()]
    return sum(any(a < end and start < b for j, (a, b) in enumerate(spans) if j != i)
               for i, (start, end) in enumerate(spans))


@pytest.mark.parametrize("policy", ["skip", "allow", "buffer_one"])
def test_a_slow_job_overlaps_the_next_fire_time_and_the_policy_shows(tmp_path: Path, policy: str) -> None:
    """Fire times 10 minutes apart replayed 600 times faster come every second; the job takes 2.5 s, so each
    delivery arrives while the run before still executes, as Scheduler's would. What the report says executed
    together is what the job itself saw: a ``buffer_one`` run that waited for the one before it did not."""
    assert policy in OVERLAP_POLICIES
    out = _run_local(tmp_path, "--schedule", "*/10 * * * *", "--runs", "3", "--overlap", policy, seconds=2.5)
    text = out.stdout + out.stderr
    assert out.returncode == 0, text
    executed = (tmp_path / "log").read_text().splitlines()
    line = re.search(rf"Overlap policy {policy}: (\d+) of 3 run\(s\) skipped .*?, (\d+) executed while another",
                     _words(out.stdout))
    assert line is not None, out.stdout
    skipped, together = int(line.group(1)), int(line.group(2))
    assert together == _executed_together(tmp_path / "log.spans"), text
    if policy == "skip":
        assert skipped >= 1 and len(executed) == 3 - skipped and together == 0, text
        assert "skipped_overlap" in out.stdout
    elif policy == "buffer_one":
        waited = re.search(r"(\d+) waited for the run before it", _words(out.stdout))
        assert waited is not None and int(waited.group(1)) >= 1, out.stdout
        assert skipped + len(executed) == 3 and together == 0, text
    else:
        assert skipped == 0 and len(executed) == 3 and together >= 2, text
    for run_id in re.findall(r"Z\s+([0-9a-f]{12})\s+(?:completed|skipped)", out.stdout):  # the short run ids
        assert len(run_id) == 12
    assert len(re.findall(r"Z\s+([0-9a-f]{12})\s+(?:completed|skipped)", out.stdout)) == 3, out.stdout


@pytest.mark.parametrize("command", [pytest.param(["demo"], marks=pytest.mark.campaign), ["backfill", "--job", "nightly", "--since", "1d", "--dry-run"]])
def test_the_demo_and_backfill_refuse_what_check_refuses_with_its_message(command: list[str]) -> None:
    [finding] = run("scheduler-time-zone-fixed-offset", [job(timeZone="EST")])
    out = subprocess.run([str(Path(sys.executable).parent / "scheduler-dedup"), *command, "--time-zone", "EST"],
                         capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 2, out.stdout + out.stderr
    assert f"--time-zone {finding.message.removeprefix('timeZone ')}" in _words(out.stderr), out.stderr


def test_a_dropped_result_is_a_finding_in_the_report_not_a_failure(tmp_path: Path) -> None:
    out = _run_local(tmp_path, "--schedule", "*/10 * * * *", "--runs", "1", "--job", "slow:unstorable")
    assert out.returncode == 0, out.stdout + out.stderr
    assert re.search(r"result dropped: the run of \S+ \S+Z \([0-9a-f]{12}\) completed, but its result was not stored: ",
                     _words(out.stdout)), out.stdout


def test_a_misspelt_time_zone_is_refused_with_the_message_check_gives(tmp_path: Path) -> None:
    [finding] = run("scheduler-job-unix-cron", [job(timeZone="Europe/Berlinn")])
    assert finding.message == "timeZone 'Europe/Berlinn' is not an IANA time zone name; did you mean 'Europe/Berlin'?"
    out = _run_local(tmp_path, "--schedule", "0 9 * * *", "--time-zone", "Europe/Berlinn", "--runs", "1")
    assert out.returncode == 2 and f"--time-zone {finding.message.removeprefix('timeZone ')}" in _words(out.stderr)


def test_the_component_takes_every_name_of_a_store_and_suggests_one() -> None:
    from scheduler_dedup.infra.stores.store import store_kind

    assert store_kind({"kind": "redis"}) == store_kind({"kind": "memorystore"}) == "memorystore"
    with pytest.raises(DedupConfigError, match=r"'spaner' is not a store kind: did you mean 'spanner'\?"):
        store_kind({"kind": "spaner"})
