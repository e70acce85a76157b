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

#: (step, the output line that says the step was reached, or the seconds after the start to signal at)
RUN_LOCAL_STEPS = [("store starting", 1.0), ("store up", "starting the handler"), ("handler up", "Handler on"),
                   ("firing", "Firing"), ("a run delivered", "no fault: 200"), ("waiting", "next fire time")]
#: run-local's options at each step: real time, except to catch it between runs it delivered
RUN_LOCAL_ARGS = {"a run delivered": ["--schedule", "* * * * *", "--speed", "30", "--runs", "50"],
                  "waiting": ["--schedule", "0 0 1 1 *"]}
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
    args = RUN_LOCAL_ARGS.get(step, ["--schedule", "* * * * *"])
    code, text = _kill_at([CLI, "run-local", "--store", store, "--source", str(tmp_path / "mine"), "--job",
                           "nightly:run", *args], tmp_path, marker, sig)
    assert "Traceback" not in text, text
    assert code == (130 if sig == signal.SIGINT else 143), (code, text)  # interrupted, never a success
    if step == "a run delivered" and sig == signal.SIGINT:  # the report of what was delivered, then 130
        assert "Ctrl-C: the report of the" in text and "expected runs recorded" in text, text


#: Sends the signal named by argv[1] to this process as the module named by argv[2] starts importing, then runs
#: the command line with the rest of argv: a signal at an exact step of start-up, with no timing.
SIGNAL_AT_IMPORT = """
import importlib.abc, os, signal, sys
sig, module = getattr(signal, sys.argv[1]), sys.argv[2]
class SignalAt(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == module:
            sys.meta_path.remove(self)
            os.kill(os.getpid(), sig)
        return None
sys.meta_path.insert(0, SignalAt())
sys.argv = ["scheduler-dedup", *sys.argv[3:]]
from scheduler_dedup.local.commands.cli import main
main()
"""


@pytest.mark.processes  # tests/costs.py: CLI runs
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("module", ["scheduler_dedup.handler.schedule.cron", "scheduler_dedup.local.commands.run_local"],
                         ids=["importing the command line", "importing run-local"])
def test_run_local_signalled_while_it_imports_ends_with_the_shell_status_and_no_traceback(
        tmp_path: Path, module: str, sig: signal.Signals) -> None:
    """The reported input: Ctrl-C in the first second (the imports, on a busy machine) printed a traceback, and
    SIGTERM ended the process by the signal itself."""
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "nightly.py").write_text(JOB)
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    env = {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, "TMPDIR": str(tmpdir)}
    done = subprocess.run([sys.executable, "-c", SIGNAL_AT_IMPORT, sig.name, module, "run-local", "--source",
                           str(tmp_path / "mine"), "--job", "nightly:run", "--schedule", "* * * * *"],
                          capture_output=True, text=True, env=env, timeout=120, check=False)
    assert done.returncode == 128 + sig, (done.returncode, done.stdout + done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    assert not _started_by(tmpdir) and not list(tmpdir.iterdir())


#: Sends the signal named by argv[1] to this process inside ``subprocess.Popen``, once the child named by argv[2]
#: ("store": the first process started; else a word of its command line) runs, then runs the command line with the
#: rest of argv: the moment a signal would leave that child with no owner to stop it.
SIGNAL_IN_POPEN = """
import os, signal, subprocess, sys
sig, child = getattr(signal, sys.argv[1]), sys.argv[2]
execute = subprocess.Popen._execute_child
def signalled(self, args, *rest, **kwargs):
    execute(self, args, *rest, **kwargs)
    global child
    if child == "store" or child in " ".join(map(str, args)):
        child = "(sent)"
        os.kill(os.getpid(), sig)
subprocess.Popen._execute_child = signalled
sys.argv = ["scheduler-dedup", *sys.argv[3:]]
from scheduler_dedup.local.commands.cli import main
main()
"""


@pytest.mark.processes  # tests/costs.py: CLI runs
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("child", ["store", "serve_socket"], ids=["starting the store server", "starting the handler"])
def test_run_local_signalled_while_it_starts_a_process_leaves_none(tmp_path: Path, store: str, child: str,
                                                                   sig: signal.Signals) -> None:
    """The reported input: Ctrl-C as the handler's process was being started left it running, in a session of its
    own, with no Popen object to stop it."""
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "nightly.py").write_text(JOB)
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    env = {**{k: v for k, v in os.environ.items() if k not in ("FIRESTORE_EMULATOR_HOST", "PYTHONPATH")},
           "TMPDIR": str(tmpdir)}
    done = subprocess.run([sys.executable, "-c", SIGNAL_IN_POPEN, sig.name, child, "run-local", "--store", store,
                           "--source", str(tmp_path / "mine"), "--job", "nightly:run", "--schedule", "* * * * *"],
                          capture_output=True, text=True, env=env, timeout=300, check=False)
    time.sleep(0.2)
    assert done.returncode == 128 + sig, (done.returncode, done.stdout + done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    left = _started_by(tmpdir)
    assert not left, f"processes left: {left}\n{done.stdout}{done.stderr}"
    assert not list(tmpdir.rglob("*")), sorted(map(str, tmpdir.rglob("*")))


@pytest.mark.campaign  # tests/costs.py: the demo
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("step, marker", DEMO_STEPS, ids=[s for s, _ in DEMO_STEPS])
def test_demo_killed_at_each_step_leaves_nothing(tmp_path: Path, store: str, step: str, marker: str | float,
                                                 sig: signal.Signals) -> None:
    code, text = _kill_at([CLI, "demo", "--store", store], tmp_path, marker, sig)
    assert code == (130 if sig == signal.SIGINT else 143), (code, text)
