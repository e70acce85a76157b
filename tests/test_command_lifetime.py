"""Every local server and temporary file a command starts ends with the command: killed at each step (Ctrl-C as
a terminal sends it, to the whole process group, and SIGTERM), ``run-local`` and ``demo`` leave no process and no
file behind, on every store.

What a command started is found by what it cannot hide: every child inherits the command's environment, so a
process whose environment holds this test's own ``TMPDIR`` was started by it; every temporary file goes under
that ``TMPDIR``.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from scheduler_dedup.local.servers.store_servers import SERVER_KINDS, EmulatorNotFoundError, store_server

CLI = str(Path(sys.executable).parent / "scheduler-dedup")
JOB = "def run(scheduled):\n    return {'ok': True}\n"

#: (step, the output line that says the step was reached, or "" to signal that many seconds after the start)
RUN_LOCAL_STEPS = [("store starting", 1.0), ("store up", "starting the handler"), ("handler up", "Handler on"),
                   ("firing", "Firing")]
DEMO_STEPS = [("store up", "starting 2 dedup and 2 baseline instances"), ("instances up", 4.0)]


def _installed(kind: str) -> bool:
    server = store_server(kind)
    try:
        server.start()
    except EmulatorNotFoundError:
        return False
    finally:
        server.stop()
    return True


def _started_by(tmpdir: Path) -> list[str]:
    """Processes whose environment holds ``TMPDIR=tmpdir`` (only the command under test and its children)."""
    needle = f"TMPDIR={tmpdir}".encode() + b"\0"
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if needle in (entry / "environ").read_bytes():
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                found.append(f"{entry.name}: {cmdline[:200]}")
        except OSError:
            continue
    return found


def _kill_at(argv: list[str], tmp_path: Path, marker: str | float, sig: signal.Signals) -> tuple[int, str]:
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("FIRESTORE_EMULATOR_HOST", "PYTHONPATH")}
    env.update(TMPDIR=str(tmpdir), COLUMNS="200")
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=tmp_path,
                            start_new_session=True)  # its own process group, as a terminal's foreground job
    assert proc.stdout is not None
    seen = b""
    deadline = time.monotonic() + (marker if isinstance(marker, float) else 180)
    while time.monotonic() < deadline and (isinstance(marker, float) or marker.encode() not in seen):
        if select.select([proc.stdout], [], [], 0.1)[0]:
            chunk = os.read(proc.stdout.fileno(), 65536)
            if not chunk:
                break
            seen += chunk
    assert proc.poll() is None, f"ended before the step: {seen.decode(errors='replace')}"
    assert isinstance(marker, float) or marker.encode() in seen, seen.decode(errors="replace")
    os.killpg(proc.pid, sig)
    rest, _ = proc.communicate(timeout=120)
    text = (seen + rest).decode(errors="replace")
    time.sleep(0.2)
    left = _started_by(tmpdir)
    files = sorted(str(p.relative_to(tmpdir)) for p in tmpdir.rglob("*"))
    assert not left, f"processes left after {sig.name}: {left}\n{text}"
    assert not files, f"files left after {sig.name}: {files}\n{text}"
    return proc.returncode, text


@pytest.fixture(scope="module", params=SERVER_KINDS)
def store(request: pytest.FixtureRequest) -> str:
    if not _installed(request.param):
        pytest.skip(f"no local server for {request.param}")
    return str(request.param)


@pytest.mark.processes  # tests/costs.py
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("step, marker", RUN_LOCAL_STEPS, ids=[s for s, _ in RUN_LOCAL_STEPS])
def test_run_local_killed_at_each_step_leaves_nothing(tmp_path: Path, store: str, step: str, marker: str | float,
                                                      sig: signal.Signals) -> None:
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "nightly.py").write_text(JOB)
    code, text = _kill_at([CLI, "run-local", "--store", store, "--source", str(tmp_path / "mine"), "--job",
                           "nightly:run", "--schedule", "* * * * *"], tmp_path, marker, sig)
    assert "Traceback" not in text, text
    assert code in ((0, 130) if sig == signal.SIGINT else (143,)), (code, text)


@pytest.mark.campaign  # tests/costs.py: the demo
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("step, marker", DEMO_STEPS, ids=[s for s, _ in DEMO_STEPS])
def test_demo_killed_at_each_step_leaves_nothing(tmp_path: Path, store: str, step: str, marker: str | float,
                                                 sig: signal.Signals) -> None:
    code, text = _kill_at([CLI, "demo", "--store", store], tmp_path, marker, sig)
    assert code == (130 if sig == signal.SIGINT else 143), (code, text)
