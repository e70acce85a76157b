"""``scheduler-dedup check`` checks the program of the folder it runs in, or the one ``--program`` names; this
project's root stack only when none is named."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.processes  # tests/costs.py: CLI runs

ROOT = Path(__file__).resolve().parents[2]
CLI = str(Path(sys.executable).parent / "scheduler-dedup")


def _own_program(tmp_path: Path, schedule_line: str) -> Path:
    program = tmp_path / "mystack"
    shutil.copytree(ROOT / "examples" / "reuse", program)
    main = program / "__main__.py"
    main.write_text(main.read_text().replace('schedule="0 3 * * *"', schedule_line))
    return program


def _check(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run([CLI, "check", *args], cwd=cwd, capture_output=True, text=True, env=env, timeout=300,
                          check=False)


def test_check_in_a_folder_with_its_own_program_runs_that_program(tmp_path: Path) -> None:
    program = _own_program(tmp_path, 'schedule="0 3 * * *"')
    out = _check(program, "--stack", "dev")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "nightly-report-job" in out.stdout, out.stdout  # the program's own resources were checked
    assert "schedule: is required" not in out.stdout


def test_check_program_names_another_folder_and_finds_its_own_mistake(tmp_path: Path) -> None:
    program = _own_program(tmp_path, 'schedule="0 25 * * *"')
    out = _check(ROOT, "--program", str(program), "--stack", "dev")
    assert out.returncode == 1, out.stdout + out.stderr
    assert "component-config" in out.stdout and "schedule" in out.stdout and "25" in out.stdout, out.stdout
    assert f"program {program}" in " ".join(out.stdout.split()), out.stdout


def test_program_without_a_pulumi_yaml_is_a_usage_error(tmp_path: Path) -> None:
    out = _check(ROOT, "--program", str(tmp_path), "--stack", "dev")
    assert out.returncode == 2 and "no Pulumi.yaml there" in out.stdout, out.stdout + out.stderr


@pytest.mark.parametrize("folder", ["no-program"])
def test_without_a_pulumi_yaml_in_reach_the_root_stack_is_checked(tmp_path: Path, folder: str) -> None:
    (tmp_path / folder).mkdir()
    shutil.copy(ROOT / "Pulumi.example.yaml", tmp_path / folder / "Pulumi.example.yaml")
    out = _check(tmp_path / folder, "--config", "Pulumi.example.yaml")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "(program " not in out.stdout
