"""A handler server that stopped answering says what its threads wait on (``HandlerServer.dump_stacks``), and a
failed test's report carries that for each handler it started (tests/conftest.py)."""

from __future__ import annotations

import pytest
import requests

from tests.handler.conftest import Harness, deliver, scheduler_headers


def test_a_busy_handlers_stacks_name_the_job_it_waits_in(harness: Harness) -> None:
    harness.plan("slow", sleep=8)
    server = harness.server()
    with pytest.raises(requests.ReadTimeout):
        deliver(server.url, scheduler_headers("slow", "2026-12-04T10:00:00Z"), timeout=2)
    stacks = server.dump_stacks()
    assert "recording_job.py\", line" in stacks and "in call_job" in stacks, stacks[-3000:]
    assert "lease.py\", line" in stacks, stacks[-3000:]  # the lease keeper renews beside it
