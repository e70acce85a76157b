"""A full Redis instance (``maxmemory`` reached, ``noeviction``, as the policy pack requires) on a real redis-server:
the holder of a run still renews and records its outcome, a new claim is refused with the job not run."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest

from scheduler_dedup.handler.core.errors import StoreError
from scheduler_dedup.handler.protocol.idempotency import Idempotency, Outcome
from scheduler_dedup.handler.protocol.lease import current_lease
from scheduler_dedup.local.servers.redis_server import RedisServer

pytestmark = pytest.mark.server  # tests/costs.py

C = "full_runs"


@pytest.fixture()
def full_redis() -> Iterator[RedisServer]:
    """A redis-server of this test's own (its ``maxmemory`` is changed mid-test)."""
    with RedisServer() as server:
        yield server


def _fill(server: RedisServer) -> None:
    """Reach ``maxmemory`` at once: every write Redis guards (``SET``, a script's first such write) now answers OOM."""
    server.command("CONFIG", "SET", "maxmemory", "1")


def test_a_full_instance_still_takes_the_holders_renewals_and_completion(full_redis: RedisServer) -> None:
    """Filled right after the claim: every renewal over three leases extends the lease, the completion commits, the
    run is answered ``duplicate`` afterwards; a new run's claim is refused (``store_error``, the job not run)."""
    store = full_redis.connect(C, timeout_seconds=1.0)
    idem = Idempotency(store, lease_seconds=1.5)
    run_id = uuid.uuid4().hex
    held: list[bool] = []
    runs: list[str] = []

    def job(attempt_id: str) -> str:
        runs.append(attempt_id)
        _fill(full_redis)
        keeper = current_lease.get()
        assert keeper is not None
        deadline = time.monotonic() + 4.5
        while time.monotonic() < deadline:
            held.append(keeper.holds())
            time.sleep(0.05)
        record = store.get(run_id)
        assert record is not None and record.held_by(attempt_id) and record.lease_remaining_seconds > 0
        return "done"

    result = idem.execute(run_id, job, {"job_name": "full"})
    assert result.outcome is Outcome.PROCESSED, result
    assert held and all(held)
    with pytest.raises(Exception, match="OOM|maxmemory"):
        full_redis.command("SET", "still-full", "x")
    record = store.get(run_id)
    assert record is not None and record.status == "completed" and record.data["attempts"] == 1
    again = Idempotency(full_redis.connect(C, timeout_seconds=1.0), lease_seconds=1.5).execute(
        run_id, lambda a: runs.append(a) or "twice")
    assert again.outcome is Outcome.DUPLICATE and len(runs) == 1
    with pytest.raises(StoreError) as caught:
        idem.execute(uuid.uuid4().hex, lambda a: runs.append(a) or "never")
    assert caught.value.step == "claim" and not caught.value.executed and len(runs) == 1
    assert "scale it up" in str(caught.value.__cause__.hint)  # type: ignore[union-attr]
