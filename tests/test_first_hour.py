"""The small things that cost a new user minutes: each is a behaviour a test can see."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from scheduler_dedup.infra.errors import DedupConfigError
from scheduler_dedup.infra.job.settings import validate_time_zone
from scheduler_dedup.local.commands.console import in_words
from scheduler_dedup.local.commands.run_local import LocalRunError, check_inputs

pytestmark = pytest.mark.processes  # tests/costs.py: CLI runs

ROOT = Path(__file__).resolve().parents[1]
CLI = str(Path(sys.executable).parent / "scheduler-dedup")


def test_the_policy_pack_module_answers_help_instead_of_waiting_for_an_engine() -> None:
    out = subprocess.run([sys.executable, "-m", "scheduler_dedup.policies", "--help"], capture_output=True, text=True,
                         timeout=60, check=False)
    assert out.returncode == 0 and "pulumi preview --policy-pack policies" in out.stdout, out.stdout + out.stderr


def test_version_and_short_help() -> None:
    version = subprocess.run([CLI, "--version"], capture_output=True, text=True, timeout=60, check=False)
    assert version.returncode == 0 and version.stdout.startswith("scheduler-dedup "), version.stdout
    for args in (["-h"], ["run-local", "-h"], ["runs", "show", "-h"]):
        out = subprocess.run([CLI, *args], capture_output=True, text=True, timeout=60, check=False)
        assert out.returncode == 0 and out.stdout.startswith("Usage:"), (args, out.stdout + out.stderr)


@pytest.mark.parametrize("typo, meant", [("America/Chicgo", "America/Chicago"), ("Asia/Tokio", "Asia/Tokyo"),
                                         ("europe/paris", "Europe/Paris")])
def test_a_misspelt_time_zone_gets_the_closest_real_one(tmp_path: Path, typo: str, meant: str) -> None:
    with pytest.raises(DedupConfigError, match=f"did you mean '{meant}'"):
        validate_time_zone(typo)
    (tmp_path / "jobs.py").write_text("def run(s):\n    return None\n")
    with pytest.raises(LocalRunError, match=f"did you mean '{meant}'"):
        check_inputs(tmp_path, "jobs:run", "* * * * *", typo, ())


@pytest.mark.parametrize("seconds, words", [(45, "45 s"), (725, "12 min 5 s"), (52018, "14 h 26 min"),
                                            (266400, "3 d 2 h")])
def test_waits_are_written_for_people(seconds: float, words: str) -> None:
    assert in_words(seconds) == words


def test_a_job_module_named_main_is_told_that_main_is_taken(tmp_path: Path) -> None:
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "main.py").write_text("def run(scheduled):\n    return None\n")
    env = {k: v for k, v in os.environ.items() if k not in ("FIRESTORE_EMULATOR_HOST", "PYTHONPATH")}
    out = subprocess.run([CLI, "run-local", "--source", str(tmp_path / "mine"), "--job", "main:run", "--schedule",
                          "* * * * *", "--speed", "600", "--runs", "1"], capture_output=True, text=True, env=env,
                         timeout=300, check=False)
    assert out.returncode == 2, out.stdout + out.stderr
    assert "the module name 'main' is taken" in out.stderr and "rename your main.py" in out.stderr, out.stderr
