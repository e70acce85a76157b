"""A store server that dies mid-suite (SIGKILL) is named, restarted between tests, and where it cannot be restarted
the tests that need it fail at once with that reason: a tiny suite run by pytest on a pytest-xdist worker, with this
project's fixtures (tests/conftest.py, tests/server_watch.py), in a process of its own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.paths import ROOT

pytestmark = pytest.mark.processes  # tests/costs.py: a pytest run that starts a redis-server

KILLS = '''
import os, signal, time

def test_the_server_dies(redis):
    os.kill(redis.pid, signal.SIGKILL)
    time.sleep(0.5)
    redis.command("PING")
'''

NEEDS = '''
def test_then_it_answers_{n}(redis):
    assert redis.command("PING") == "PONG"
'''

UNRELATED = '''
def test_a_test_without_it():
    assert True
'''


EMULATORS = {
    "spanner": '''
import os, signal, time
import pytest

@pytest.mark.parametrize("store_server_session", ["spanner"], indirect=True)
def test_the_server_dies(server):
    os.kill(server.pid, signal.SIGKILL)
    time.sleep(0.5)
    assert server.pid is None

@pytest.mark.parametrize("store_server_session", ["spanner"], indirect=True)
def test_then_its_table_is_back(store):
    assert store.get("0" * 64) is None
''',
    "firestore": '''
import os, signal, time

def test_the_server_dies(emulator):
    os.kill(emulator.pid, signal.SIGKILL)
    time.sleep(0.5)
    assert emulator.pid is None

def test_then_it_answers(emulator):
    emulator.wipe()
''',
}


def _run(tmp_path: Path, suite: str, **env: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_tiny.py").write_text(suite)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.conftest", "-p", "tests.stores.conftest", "-p",
         "no:cacheprovider", "-n", "1",
         "-c", str(ROOT / "pyproject.toml"), "--rootdir", str(ROOT), str(tmp_path / "test_tiny.py")],
        cwd=ROOT, capture_output=True, text=True, timeout=240,
        env={**os.environ, "PYTHONPATH": str(ROOT), **env})


def test_a_killed_server_is_named_and_restarted(tmp_path: Path) -> None:
    done = _run(tmp_path, KILLS + NEEDS.format(n=1) + NEEDS.format(n=2))
    out = done.stdout
    assert done.returncode == 1, out
    assert "1 failed, 2 passed" in out, out
    summary = out.index("servers that died")
    assert summary < out.index("short test summary info"), out
    assert summary < out.index("FAILURES"), out  # the first cause first
    died = out[summary:]
    assert "redis-server on 127.0.0.1:" in died and "of worker gw0 exited: killed by signal 9" in died, out
    assert "restarted on 127.0.0.1:" in died, out
    assert "server watch (" in out[:summary], out  # named as the run goes, too
    assert "ConnectionRefusedError" not in out[out.index("FAILURES"):out.index("short test summary info")] or \
        "the test's own error (its end)" in out, out


def test_a_server_that_cannot_restart_fails_the_tests_that_need_it_at_once(tmp_path: Path) -> None:
    # the restart looks for redis-server where REDIS_SERVER says, set by the dying test: a restart that fails
    suite = KILLS.replace("    os.kill(", "    os.environ['REDIS_SERVER'] = '/nonexistent/redis-server'\n    os.kill(")
    done = _run(tmp_path, suite + NEEDS.format(n=1) + NEEDS.format(n=2) + UNRELATED)
    out = done.stdout
    assert "1 failed, 1 passed, 2 errors" in out, out  # the two that need it fail at set-up
    short = out[out.index("short test summary info"):]
    for n in (1, 2):
        line = next(line for line in short.splitlines() if f"test_then_it_answers_{n}" in line)
        assert line.startswith("ERROR") and "Failed: redis-server on 127.0.0.1:" in line, line
    assert out.count("could not be restarted: REDIS_SERVER=/nonexistent/redis-server is not a file") >= 2, out
    # the tests that need the server fail with the death, never a connection error (the dying test itself may
    # show its own, depending on when its call met the killed server)
    needing = [line for line in short.splitlines() if "test_then_it_answers_" in line]
    assert needing and not [line for line in needing if "Connection refused" in line], out


@pytest.mark.parametrize("kind", sorted(EMULATORS))
def test_a_killed_emulator_comes_back_with_what_the_tests_need(tmp_path: Path, kind: str) -> None:
    """The Firestore emulator's JVM (with its sizing flags) and the Spanner emulator (its tables made again)."""
    done = _run(tmp_path, EMULATORS[kind])
    out = done.stdout
    assert done.returncode == 0 and "2 passed" in out, out
    died = out[out.index("servers that died"):]
    assert "emulator on 127.0.0.1:" in died and "of worker gw0 exited: killed by signal 9" in died, out
    assert "emulator of worker gw0 restarted on 127.0.0.1:" in died, out
