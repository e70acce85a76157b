"""``scheduler-dedup run-local``: a user's own job, run as in production, with delivery and Firestore faults."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

JOB = '''
import os, time

def run(scheduled):
    with open(os.environ["JOB_LOG"], "a") as fh:  # one line per execution that started
        fh.write(scheduled.schedule_time.isoformat() + "\\n")
    time.sleep(float(os.environ.get("JOB_SECONDS", "0")))
    return {"ok": True}
'''


def _run_local(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "mine").mkdir(exist_ok=True)
    (tmp_path / "mine" / "nightly.py").write_text(JOB)
    env = {k: v for k, v in os.environ.items() if k not in ("FIRESTORE_EMULATOR_HOST", "PYTHONPATH")}
    return subprocess.run([str(Path(sys.executable).parent / "scheduler-dedup"), "run-local",
                           "--source", str(tmp_path / "mine"), "--job", "nightly:run", "--schedule", "*/10 * * * *",
                           "--time-zone", "Europe/Berlin", "--speed", "600", "--env", f"JOB_LOG={tmp_path / 'log'}",
                           *args], capture_output=True, text=True, env=env, timeout=600, check=False)


def _executions(tmp_path: Path) -> Counter[str]:
    return Counter((tmp_path / "log").read_text().splitlines())


def test_own_job_with_delivery_faults_runs_once_per_fire_time_and_the_skipped_one_is_missed(tmp_path: Path) -> None:
    out = _run_local(tmp_path, "--runs", "4", "--delivery-faults", "clean,crash,skipped,concurrent", "--lease", "2",
                     "--attempt-deadline", "5", "--env", "JOB_SECONDS=1.5")
    assert out.returncode == 1, out.stdout + out.stderr  # the skipped fire time is missed
    assert "warning" not in (out.stdout + out.stderr).lower()
    executions = _executions(tmp_path)
    assert len(executions) == 3, executions  # the skipped fire time never ran
    # The crashed run was taken over after its lease expired; it started twice if the kill landed mid-job,
    # once if it landed between the claim and the job's first line (timing decides which).
    assert sorted(executions.values()) in ([1, 1, 1], [1, 1, 2]), executions
    assert "Runs of nightly-run" in out.stdout and "1 missed" in out.stdout and "1 repeated" in out.stdout


def test_own_job_under_a_lost_completion_answer_still_runs_once(tmp_path: Path) -> None:
    out = _run_local(tmp_path, "--runs", "2", "--store-fault", "completion:lose_answer")
    assert out.returncode == 0, out.stdout + out.stderr
    assert sorted(_executions(tmp_path).values()) == [1, 1]
    assert "1× completion lose_answer" in out.stdout and "OK nightly-run: 2/2" in out.stdout


def test_bad_input_is_refused_before_anything_starts(tmp_path: Path) -> None:
    out = _run_local(tmp_path, "--runs", "1", "--delivery-faults", "deadline")
    assert out.returncode == 2 and "--delivery-faults deadline" in out.stderr
    out = _run_local(tmp_path, "--runs", "1", "--store-fault", "commit:explode")
    assert out.returncode == 2 and "step:kind" in out.stderr


def test_the_crash_line_says_whether_the_kill_landed_mid_job(tmp_path: Path) -> None:
    # A job that returns at once: the kill, timed by the claim, often lands after it finished. Each crash
    # line must match the record: "mid-job" only where a retry took the run over.
    out = _run_local(tmp_path, "--runs", "3", "--delivery-faults", "crash", "--lease", "2", "--attempt-deadline", "5")
    assert out.returncode == 0, out.stdout + out.stderr
    executions = _executions(tmp_path)
    lines = [line for line in out.stdout.splitlines() if "SIGKILLed" in line]
    assert len(lines) == 3, out.stdout
    mid_job = [line for line in lines if "mid-job" in line]
    assert all("taken over" in line for line in mid_job), lines
    repeated = re.search(r"(\d+) repeated", out.stdout)
    assert len(mid_job) == (int(repeated.group(1)) if repeated else 0), out.stdout
    after = [line for line in lines if "after the job had finished" in line]
    assert len(after) + len(mid_job) == 3 and sum(executions.values()) >= 3, lines
