"""Every missing piece names its install command, and nothing is left running after it: a store's client library
(the pip extra), an emulator (its Debian package and the lines that add Google's apt repository), a binary."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from scheduler_dedup.local.servers.store_servers import GOOGLE_APT_REPOSITORY

from .test_command_lifetime import _started_by

CLI = str(Path(sys.executable).parent / "scheduler-dedup")

#: A sitecustomize that makes google-cloud-spanner look not installed, as in a plain ``[infra]`` install.
NO_SPANNER = '''
import sys

class _NotInstalled:
    def find_spec(self, name, path=None, target=None):
        if name.startswith(("google.cloud.spanner", "google.cloud.spanner_v1", "google.cloud.spanner_admin")):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, _NotInstalled())
'''


def _run(tmp_path: Path, *args: str, **env: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir(exist_ok=True)
    full = {k: v for k, v in os.environ.items() if k not in ("FIRESTORE_EMULATOR_HOST", "PYTHONPATH")}
    full.update(TMPDIR=str(tmpdir), COLUMNS="200", **env)
    return subprocess.run([CLI, *args], capture_output=True, text=True, env=full, cwd=tmp_path, timeout=300,
                          check=False), tmpdir


@pytest.mark.parametrize("command", [pytest.param("run-local", marks=pytest.mark.processes),
                                     pytest.param("demo", marks=pytest.mark.campaign)])  # tests/costs.py
def test_spanner_without_its_client_library_names_the_extra_and_starts_nothing(tmp_path: Path, command: str) -> None:
    (tmp_path / "block").mkdir()
    (tmp_path / "block" / "sitecustomize.py").write_text(NO_SPANNER)
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "jobs.py").write_text("def run(scheduled):\n    return None\n")
    args = ["--store", "spanner"] + (["--source", str(tmp_path / "mine"), "--job", "jobs:run", "--schedule",
                                      "* * * * *", "--speed", "600", "--runs", "1"] if command == "run-local" else [])
    out, tmpdir = _run(tmp_path, command, *args, PYTHONPATH=str(tmp_path / "block"))
    text = out.stdout + out.stderr
    assert out.returncode == 2, text
    assert "pip install 'scheduler-dedup[spanner]'" in text and "Traceback" not in text, text
    assert not _started_by(tmpdir) and not list(tmpdir.iterdir()), text


@pytest.mark.campaign  # tests/costs.py: demo (it stops before starting anything)
@pytest.mark.parametrize("variable, package", [("FIRESTORE_EMULATOR_JAR", "google-cloud-cli-firestore-emulator"),
                                               ("SPANNER_EMULATOR_BINARY", "google-cloud-cli-spanner-emulator")])
def test_a_missing_emulator_names_its_debian_package_and_googles_apt_repository(tmp_path: Path, variable: str,
                                                                                 package: str) -> None:
    store = "firestore" if "FIRESTORE" in variable else "spanner"
    out, tmpdir = _run(tmp_path, "demo", "--store", store, **{variable: str(tmp_path / "nothing-here")})
    text = out.stdout + out.stderr
    assert out.returncode == 2, text
    flat = " ".join(text.split())
    assert f"sudo apt-get install -y {package}" in flat, text
    for line in GOOGLE_APT_REPOSITORY.splitlines():
        assert " ".join(line.split()) in flat, (line, text)
    assert not _started_by(tmpdir) and not list(tmpdir.iterdir()), text


@pytest.mark.campaign  # tests/costs.py: demo (it stops before starting anything)
def test_a_missing_redis_server_names_its_package(tmp_path: Path) -> None:
    out, _ = _run(tmp_path, "demo", "--store", "redis", REDIS_SERVER=str(tmp_path / "nothing-here"))
    assert out.returncode == 2 and "apt-get install -y redis-server" in out.stdout + out.stderr, out.stdout
