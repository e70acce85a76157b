"""A test skipped for a missing tool skips on a developer's machine and fails under ``CI=true``
(tests/missing_tools.py); other skips stay skips: a tiny suite run by pytest with this project's hooks."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.paths import ROOT

pytestmark = pytest.mark.processes  # tests/costs.py: a pytest run of its own

SUITE = '''
import pytest
from tests.missing_tools import missing

@pytest.mark.skipif(True, reason=missing("no frobnicator (apt-get install frobnicator)"))
def test_marked():
    pass

def test_called():
    pytest.skip(missing("no widget (pip install widget)"))

def test_skipped_for_another_reason():
    pytest.skip("not on this platform")
'''


def _run(tmp_path: Path, ci: str | None) -> str:
    (tmp_path / "test_tiny.py").write_text(SUITE)
    env = {k: v for k, v in os.environ.items() if k != "CI"} | {"PYTHONPATH": str(ROOT)}
    if ci is not None:
        env["CI"] = ci
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "tests.missing_tools", "-p", "no:cacheprovider",
                           "-p", "no:xdist", "-c", str(ROOT / "pyproject.toml"), "--rootdir", str(ROOT), "-rA",
                           str(tmp_path / "test_tiny.py")], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env=env)
    return done.stdout


@pytest.mark.parametrize("ci", [None, "false"])
def test_outside_ci_a_missing_tool_skips(tmp_path: Path, ci: str | None) -> None:
    out = _run(tmp_path, ci)
    assert "3 skipped" in out and "failed" not in out, out


def test_under_ci_a_missing_tool_fails_naming_it(tmp_path: Path) -> None:
    out = _run(tmp_path, "true")
    # a skipif marker acts at set-up, so that test is an error there; pytest.skip() in the test, a failure
    assert "1 failed, 1 skipped, 1 error" in out, out
    assert "missing tool: no frobnicator (apt-get install frobnicator)" in out, out
    assert "missing tool: no widget (pip install widget)" in out, out
    assert "CI=true: a CI run must install it" in out, out
