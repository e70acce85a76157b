"""The distribution installs one top-level import name, ``scheduler_dedup``, and nothing generic."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_wheel_has_only_the_scheduler_dedup_package(tmp_path: Path) -> None:
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(tmp_path), str(ROOT)],
                   check=True, capture_output=True, timeout=600)
    (wheel,) = tmp_path.glob("scheduler_dedup-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top_level = {name.split("/")[0] for name in names}
    assert top_level == {"scheduler_dedup", wheel.name.split("-")[0] + "-" + wheel.name.split("-")[1] + ".dist-info"}
    packages = {"/".join(name.split("/")[:2]) for name in names if name.startswith("scheduler_dedup/")}
    assert packages == {"scheduler_dedup/handler", "scheduler_dedup/infra", "scheduler_dedup/policies",
                        "scheduler_dedup/local"}
    assert "scheduler_dedup/handler/main.py" in names  # what functions-framework serves
    assert not any(name.startswith(("handler/", "infra/", "policies/", "local/", "tests/")) for name in names)
