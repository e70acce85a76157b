"""Where things are in this checkout, for tests: one definition instead of ``Path(__file__).parents[N]`` per file."""

from __future__ import annotations

from pathlib import Path

#: The repository root (the folder holding pyproject.toml).
ROOT = Path(__file__).resolve().parents[1]
#: The example job the README and most component tests deploy: ``examples/hello_job`` (``jobs:run``).
HELLO_JOB = ROOT / "examples" / "hello_job"
