"""A job that exits (``SystemExit``) or is interrupted fails with a clear reason, over real HTTP on the real
emulator, and the server keeps serving.

``raise SystemExit(0)`` is what a click or argparse ``main()`` does; reaching the server it drops the
connection, and ``SystemExit(3)`` (gunicorn's worker-boot-failure code) shuts gunicorn's master down. An exit says
nothing about whether the job's work was done (exit 0 usually means it was), so the run is recorded failed, naming the
exit and the fix, and is not run again. ``KeyboardInterrupt`` and ``GeneratorExit`` are retryable failures: the run
is released (recorded ``released`` with the reason) and the retry runs the job again.
"""

from __future__ import annotations

import pytest

from .conftest import Harness, deliver, scheduler_headers
from .test_results import strict_json

T = "2026-10-16T12:00:00Z"


@pytest.mark.parametrize("raised, code", [("system_exit_0", "0"), ("system_exit_3", "3")])
def test_a_job_that_calls_sys_exit_is_recorded_failed_naming_the_exit_and_the_fix(harness: Harness, raised: str,
                                                                                  code: str) -> None:
    harness.plan("exits", raise_python=raised, fail_times=1)
    server = harness.server()
    answer = deliver(server.url, scheduler_headers("exits", T))
    body = strict_json(answer)
    assert answer.status_code == 200 and body["status"] == "failed", answer.text[:300]
    assert body["error"].startswith(f"JobExitedError: the job called sys.exit({code}) instead of returning"), body
    assert "main(standalone_mode=False)" in body["error"] and "raise an exception" in body["error"], body
    [record] = harness.records().values()
    assert record["status"] == "failed" and record["error"] == body["error"], record
    # Not run again (the exit may have come after the work was done); the same process still answers.
    again = deliver(server.url, scheduler_headers("exits", T))
    assert again.status_code == 200 and strict_json(again)["status"] == "failed", again.text[:300]
    assert len(harness.starts(body["run_id"])) == 1
    assert server.proc is not None and server.proc.poll() is None


@pytest.mark.parametrize("raised, name", [("keyboard_interrupt", "KeyboardInterrupt"),
                                          ("generator_exit", "GeneratorExit")])
def test_an_interrupted_job_is_released_with_a_json_500_and_the_server_keeps_serving(harness: Harness, raised: str,
                                                                                      name: str) -> None:
    harness.plan("interrupted", raise_python=raised, fail_times=1)
    server = harness.server()
    answer = deliver(server.url, scheduler_headers("interrupted", T))
    body = strict_json(answer)
    assert answer.status_code == 500 and body["status"] == "released" and body["released"] is True, answer.text[:300]
    assert body["error"].startswith(f"{name}") and "never exit" in body["error"], body
    [record] = harness.records().values()
    assert record["status"] == "released" and record["error"] == body["error"], record
    # The same process still answers, and the retry runs the job again (the run was released).
    retry = deliver(server.url, scheduler_headers("interrupted", T))
    assert retry.status_code == 200 and strict_json(retry)["status"] == "processed", retry.text[:300]
    assert len(harness.starts(body["run_id"])) == 2
    assert server.proc is not None and server.proc.poll() is None
