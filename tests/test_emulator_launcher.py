"""The emulator launcher says what is missing and how to install it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from scheduler_dedup.local.servers.firestore_emulator import EmulatorNotFoundError, find_emulator_jar, find_java
from tests.paths import ROOT

pytestmark = pytest.mark.campaign  # tests/costs.py



def test_a_missing_jar_names_the_install_command(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("FIRESTORE_EMULATOR_JAR", str(tmp_path / "nope.jar"))
    with pytest.raises(EmulatorNotFoundError, match="gcloud components install cloud-firestore-emulator"):
        find_emulator_jar()


def test_a_missing_java_says_so(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(EmulatorNotFoundError, match="java was not found"):
        find_java()


def test_the_readme_commands_stop_early_with_the_install_hint(tmp_path: Path) -> None:
    """./scripts/test and ./scripts/demo check for the emulator before doing anything else."""
    env = {**os.environ, "FIRESTORE_EMULATOR_JAR": str(tmp_path / "nope.jar")}
    result = subprocess.run(["bash", str(ROOT / "scripts" / "demo")], env=env, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode != 0
    assert "gcloud components install cloud-firestore-emulator" in result.stderr + result.stdout
