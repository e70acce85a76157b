"""``scheduler-dedup run-local``: a user's own job, run as in production, with delivery and Firestore faults."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
import pytest

pytestmark = pytest.mark.processes  # tests/costs.py

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
    # An 8 s lease for a 1.5 s job: on a loaded machine renewals (every third of the lease, each bounded by the
    # 2 s store timeout) can fail for a few seconds, and a retry then rightly takes a live run over: with a 2 s
    # or 4 s lease that made "2 repeated" under load, the crashed run and one more.
    # Fire times come 4 s apart (--speed 150): each is delivered on schedule whether or not the one before was
    # answered, and the crash fault SIGKILLs the instance serving every run in flight; 4 s lets the run before
    # finish first, so only the crashed run is taken over.
    out = _run_local(tmp_path, "--runs", "4", "--delivery-faults", "clean,crash,skipped,concurrent", "--lease", "8",
                     "--attempt-deadline", "5", "--env", "JOB_SECONDS=1.5", "--speed", "150")
    assert out.returncode == 1, out.stdout + out.stderr  # the skipped fire time is missed
    assert "warning" not in (out.stdout + out.stderr).lower()
    executions = _executions(tmp_path)
    assert len(executions) == 3, executions  # the skipped fire time never ran
    # The crashed run was taken over after its lease expired; it started twice if the kill landed mid-job,
    # once if it landed between the claim and the job's first line (timing decides which).
    assert sorted(executions.values()) in ([1, 1, 1], [1, 1, 2]), executions
    assert "Runs of nightly-run" in out.stdout and "1 missed" in out.stdout
    assert "left out on purpose" in " ".join(out.stdout.split()), out.stdout  # the FAIL is explained
    # The crashed run is taken over: "repeated". On a loaded machine a cold handler's first claim can also time
    # out with its read-back (500 store_error): that claim holds until its lease expires and the retry's takeover
    # is reported "repeated" too, as docs/monitoring.md says. No other run may be.
    repeated = re.search(r"(\d+) repeated", out.stdout)
    assert repeated is not None, out.stdout
    unconfirmed = len(re.findall(r"\b500\b[^\n]*store_error", out.stdout))
    assert 1 <= int(repeated.group(1)) <= 1 + unconfirmed, out.stdout


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


def test_every_bad_input_is_named_at_once_before_anything_starts(tmp_path: Path) -> None:
    out = _run_local(tmp_path, "--runs", "1", "--schedule", "0 25 * * *", "--time-zone", "Europe/Berlinn",
                     "--delivery-faults", "deadline", "--store-fault", "commit:explode", "--speed", "0.5")
    assert out.returncode == 2, out.stdout + out.stderr
    for option in ("--schedule", "--time-zone", "--delivery-faults", "--store-fault", "--speed"):
        assert option in out.stderr, (option, out.stderr)
    assert "emulator" not in out.stdout.lower(), out.stdout  # nothing was started


def test_a_job_the_handler_cannot_load_is_named_without_a_traceback(tmp_path: Path) -> None:
    out = _run_local(tmp_path, "--runs", "1", "--job", "nightly:nope")
    assert out.returncode == 2, out.stdout + out.stderr
    assert "nightly has no callable 'nope'" in out.stderr and "--job" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr, out.stderr


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


def _start_run_local(tmp_path: Path, tmpdir: Path, *args: str) -> subprocess.Popen[str]:
    (tmp_path / "mine").mkdir(exist_ok=True)
    (tmp_path / "mine" / "nightly.py").write_text(JOB)
    env = {k: v for k, v in os.environ.items() if k not in ("FIRESTORE_EMULATOR_HOST", "PYTHONPATH")}
    env.update(TMPDIR=str(tmpdir), COLUMNS="400")
    return subprocess.Popen([str(Path(sys.executable).parent / "scheduler-dedup"), "run-local",
                             "--source", str(tmp_path / "mine"), "--job", "nightly:run", "--env",
                             f"JOB_LOG={tmp_path / 'log'}", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)


def test_ctrl_c_leaves_no_files_behind(tmp_path: Path) -> None:
    """Interrupted while it waits for the next fire time (real time): the handler's and the emulator's log
    files go with it: nothing of the run stays in the temp folder."""
    import signal
    import time

    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    proc = _start_run_local(tmp_path, tmpdir, "--schedule", "0 0 1 1 *")  # next fire time: months away
    assert proc.stderr is not None and proc.stdout is not None
    deadline = time.monotonic() + 300
    seen = ""
    while "next fire time" not in seen:
        assert time.monotonic() < deadline and proc.poll() is None, seen
        seen += proc.stdout.readline()
    assert list(tmpdir.iterdir()), "the handler and emulator logs are there while it runs"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, seen + out + err  # an interrupted command, never a success
    assert "interrupted" in err, err
    assert list(tmpdir.iterdir()) == []


def test_keep_emulator_prints_a_runs_command_that_works_afterwards(tmp_path: Path) -> None:
    """The printed command is runnable as printed (no bare name that is not on PATH) and still answers after
    run-local exits, because --keep-emulator leaves the store server running; its PID is printed to stop it."""
    import shlex

    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    proc = _start_run_local(tmp_path, tmpdir, "--schedule", "*/10 * * * *", "--speed", "600", "--runs", "2",
                            "--keep-emulator")
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, out + err
    match = re.search(r"keeps running \(pid (\d+);", out)
    assert match, out
    pid = int(match.group(1))
    try:
        command = next(line.strip() for line in reversed(out.splitlines()) if " runs --job " in line)
        clean_env = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root")}  # no venv on PATH
        words = shlex.split(command)
        env = {**clean_env, **dict(w.split("=", 1) for w in words if "=" in w and not w.startswith("-"))}
        argv = [w for w in words if not ("=" in w and not w.startswith("-"))]
        answer = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120, check=False)
        assert answer.returncode == 0, command + "\n" + answer.stdout + answer.stderr
        assert "OK nightly-run: 2/2 expected runs recorded" in answer.stdout, answer.stdout
        # It checks the fire times run-local delivered, not the ones after it stopped: run later, it must not
        # report the next fire time late, then missed, when nothing was ever going to deliver it.
        last = max(re.findall(r"^  (\d\d:\d\d:\d\d)Z ", out, flags=re.M))
        as_json = subprocess.run([*argv, "--json"], capture_output=True, text=True, env=env, timeout=120, check=False)
        summary = json.loads(as_json.stdout.splitlines()[-1])
        assert summary["record"] == "summary" and summary["until"][11:19] == f"{last[:-2]}01", as_json.stdout
        assert summary["expected"] == 2 and summary["grace_seconds"] == 0, summary
    finally:
        stop = re.search(r"with `(kill \d+[^`]*)`", out)
        if stop:  # as printed: the server ends, and no file of it is left
            subprocess.run(stop.group(1), shell=True, check=False, timeout=60)
        else:
            os.kill(pid, 15)
    assert stop, out
    assert list(tmpdir.iterdir()) == [], "the printed stop command left files"


def test_the_real_job_example_runs_with_a_local_file_standing_in_for_secret_manager(tmp_path: Path) -> None:
    """examples/nightly_report reads REPORT_BUCKET (--env) and DB_PASSWORD (--secret-file, as its stack's
    secretEnv gives it from Secret Manager): one report per fire time, the password never printed."""
    root = Path(__file__).resolve().parents[1]
    (tmp_path / "db-password.txt").write_text("correct horse battery staple")
    (tmp_path / "reports").mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("FIRESTORE_EMULATOR_HOST", "PYTHONPATH")}
    command = [str(Path(sys.executable).parent / "scheduler-dedup"), "run-local",
               "--source", str(root / "examples" / "nightly_report"), "--job", "jobs:run", "--schedule", "0 3 * * *",
               "--speed", "86400", "--runs", "2", "--env", "REPORT_BUCKET=acme-reports",
               "--env", f"REPORT_DIR={tmp_path / 'reports'}"]
    out = subprocess.run([*command, "--secret-file", f"DB_PASSWORD={tmp_path / 'db-password.txt'}"],
                         capture_output=True, text=True, env=env, timeout=600, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    assert len(list((tmp_path / "reports").glob("*.csv"))) == 2, out.stdout
    assert "correct horse" not in out.stdout + out.stderr
    missing = subprocess.run([*command, "--secret-file", f"DB_PASSWORD={tmp_path / 'nope.txt'}"],
                             capture_output=True, text=True, env=env, timeout=120, check=False)
    assert missing.returncode == 2 and "--secret-file DB_PASSWORD: cannot read" in missing.stderr, missing.stderr


BAD_JOB = '''
def boom(scheduled):
    print("checking /data before the export")
    raise RuntimeError("disk full on /data")
'''


def test_a_job_that_always_fails_is_reported_failed_with_its_error_and_output_never_missed(tmp_path: Path) -> None:
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "bad.py").write_text(BAD_JOB)
    env = {k: v for k, v in os.environ.items() if k not in ("FIRESTORE_EMULATOR_HOST", "PYTHONPATH")}
    out = subprocess.run([str(Path(sys.executable).parent / "scheduler-dedup"), "run-local", "--source",
                          str(tmp_path / "mine"), "--job", "bad:boom", "--schedule", "*/10 * * * *", "--speed", "600",
                          "--runs", "1"], capture_output=True, text=True, env=env, timeout=600, check=False)
    text = out.stdout + out.stderr
    assert out.returncode == 1, text
    assert "RuntimeError: disk full on /data" in out.stdout, text
    assert "checking /data before the export" in out.stdout, text  # the job's own print, not only in a deleted log
    assert "missed" not in out.stdout and "1 failed" in out.stdout, text
    assert re.search(r"every attempt failed \([1-6] attempts? failed retryably", re.sub(r"\s+", " ", out.stdout)), text
    assert "released" in out.stdout and "1/1 expected runs recorded" in out.stdout, text  # the record says so
