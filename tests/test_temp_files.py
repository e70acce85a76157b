"""Nothing is left in the temp folder: each command runs with ``TMPDIR`` set to a fresh folder, which must be empty
afterwards, on success and on failure (Ctrl-C: tests/test_run_local.py); a handler server whose owner never removes
its log leaves none either. A failing job's traceback is in run-local's report, not only in a deleted log."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.paths import ROOT

pytestmark = pytest.mark.processes  # tests/costs.py: store servers, handlers and the commands

JOB = '''
def ok(scheduled):
    print("exported")
    return {"ok": True}

def boom(scheduled):
    print("checking /data before the export")
    return export()

def export():
    raise RuntimeError("disk full on /data")
'''


def _env(tmpdir: Path) -> dict[str, str]:
    tmpdir.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("FIRESTORE_EMULATOR_HOST", "PYTHONPATH", "DEDUP_STORE")}
    return {**env, "TMPDIR": str(tmpdir)}


def _run_local(tmp_path: Path, job: str, store: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "jobs.py").write_text(JOB)
    tmpdir = tmp_path / "tmp"
    out = subprocess.run([str(Path(sys.executable).parent / "scheduler-dedup"), "run-local", "--source",
                          str(tmp_path / "mine"), "--job", f"jobs:{job}", "--schedule", "*/10 * * * *", "--speed",
                          "600", "--runs", "2", "--store", store, "--attempt-deadline", "3"],
                         capture_output=True, text=True, env=_env(tmpdir), timeout=600, check=False)
    return out, tmpdir


@pytest.mark.parametrize("store", ["firestore", "redis"])
def test_run_local_of_a_job_that_succeeds_leaves_nothing(tmp_path: Path, store: str) -> None:
    out, tmpdir = _run_local(tmp_path, "ok", store)
    assert out.returncode == 0, out.stdout + out.stderr
    assert list(tmpdir.iterdir()) == []


def test_run_local_of_a_failing_job_leaves_nothing_and_reports_its_traceback(tmp_path: Path) -> None:
    out, tmpdir = _run_local(tmp_path, "boom", "firestore")
    assert out.returncode == 1, out.stdout + out.stderr
    assert list(tmpdir.iterdir()) == []
    text = " ".join(out.stdout.split())
    job = tmp_path / "mine" / "jobs.py"
    assert f'File "{job}", line 8, in boom return export()' in text, out.stdout
    assert f'File "{job}", line 11, in export raise RuntimeError("disk full on /data")' in text, out.stdout
    assert "checking /data before the export" in text, out.stdout
    # Scheduler's retries of the failing run take 20 s and more: the run says it is still being delivered
    assert "still delivering" in text, out.stdout


def test_a_handler_server_nobody_removes_the_log_of_leaves_none(tmp_path: Path) -> None:
    """The kind of leak the tests had (21 handler logs after a run): a server started and stopped, its log never
    removed by its owner; the log goes when the program exits."""
    code = ("from scheduler_dedup.local.servers.handlers import HandlerServer\n"
            "server = HandlerServer({'DEDUP_JOB': 'nothing:here', 'GOOGLE_CLOUD_PROJECT': 'demo-x'})\n"
            "try:\n    server.start()\nexcept RuntimeError:\n    pass\n"
            "import os; assert os.path.exists(server.log_path)\n"
            "server.stop()\n")
    tmpdir = tmp_path / "tmp"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=_env(tmpdir), capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert list(tmpdir.iterdir()) == []


@pytest.mark.campaign  # tests/costs.py: the demo
@pytest.mark.parametrize("args", [["--overlap"], ["--runs", "6"]])
def test_the_demo_leaves_nothing(tmp_path: Path, args: list[str]) -> None:
    tmpdir = tmp_path / "tmp"
    out = subprocess.run([str(Path(sys.executable).parent / "scheduler-dedup"), "demo", *args], capture_output=True,
                         text=True, env=_env(tmpdir), timeout=600, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    assert list(tmpdir.iterdir()) == []
