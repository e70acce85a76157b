"""A job that exits (``SystemExit``) or is interrupted fails like any job, over real HTTP on the real emulator.

``raise SystemExit(0)`` is what a click or argparse ``main()`` does; reaching the server it drops the
connection, and ``SystemExit(3)`` (gunicorn's worker-boot-failure code) shuts gunicorn's master down. The
handler must release the claim, answer the JSON contract (500 ``released``) and keep serving.
"""

from __future__ import annotations

import pytest

from .conftest import Harness, deliver, scheduler_headers
from .test_results import strict_json

T = "2026-10-16T12:00:00Z"


@pytest.mark.parametrize("raised, name", [("system_exit_0", "SystemExit"), ("system_exit_3", "SystemExit"),
                                          ("keyboard_interrupt", "KeyboardInterrupt"),
                                          ("generator_exit", "GeneratorExit")])
def test_a_job_that_exits_is_released_with_a_json_500_and_the_server_keeps_serving(harness: Harness, raised: str,
                                                                                    name: str) -> None:
    harness.plan("exits", raise_python=raised, fail_times=1)
    server = harness.server()
    answer = deliver(server.url, scheduler_headers("exits", T))
    body = strict_json(answer)
    assert answer.status_code == 500 and body["status"] == "released" and body["released"] is True, answer.text[:300]
    assert body["error"].startswith(f"{name}") and "never exit" in body["error"], body
    assert harness.records() == {}, "the claim must be released"
    # The same process still answers, and the retry runs the job again (the claim was released).
    retry = deliver(server.url, scheduler_headers("exits", T))
    assert retry.status_code == 200 and strict_json(retry)["status"] == "processed", retry.text[:300]
    assert len(harness.starts(body["run_id"])) == 2
    assert server.proc is not None and server.proc.poll() is None
