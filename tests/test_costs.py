"""The test layers of tests/costs.py: commands are classified by what they start, and a test marked below what it
starts fails."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests import costs


@pytest.mark.parametrize(("argv", "layer"), [
    (["/usr/bin/java", "-cp", "emulator.jar"], "server"),
    (["/usr/bin/redis-server", "/tmp/redis.conf"], "server"),
    (["/bin/sh", "-c", "gunicorn -b :8080 main:app"], "processes"),
    ([sys.executable, "-m", "scheduler_dedup.local.servers.serve_socket", "--source", "main.py"], "processes"),
    (["/venv/bin/scheduler-dedup", "run-local", "--source", "x"], "processes"),
    (["/venv/bin/scheduler-dedup", "demo", "--runs", "6"], "campaign"),
    (["bash", "/repo/scripts/demo"], "campaign"),
    (["/venv/bin/scheduler-dedup", "check", "--stack", "dev"], None),
    (["git", "status"], None),
])
def test_a_command_is_classified_by_what_it_starts(argv: list[str], layer: str | None) -> None:
    assert costs.needed_layer(argv) == layer


def test_a_unit_test_that_starts_a_server_fails_naming_the_marker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(costs, "_current", ["unit"])
    with pytest.raises(RuntimeError, match=r"mark it @pytest.mark.server"):
        subprocess.Popen(["/nonexistent/redis-server", "--port", "0"])  # never runs, whatever happens


def test_this_module_is_in_the_unit_layer(request: pytest.FixtureRequest) -> None:
    assert costs.layer_of(request.node) == "unit"
    assert request.node.get_closest_marker("unit") is not None
