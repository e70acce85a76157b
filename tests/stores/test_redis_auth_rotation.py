"""A rotated AUTH string keeps working without a restart, on a real redis-server: ``CONFIG SET requirepass`` or an
ACL change mid-run, and the mounted secret file rewritten. The store reads ``DEDUP_REDIS_AUTH_FILE`` again when Redis
refuses the AUTH string, once per call, before reporting a refusal."""

from __future__ import annotations

import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from scheduler_dedup.handler.config.settings import Settings
from scheduler_dedup.handler.core.errors import StoreRefusedError
from scheduler_dedup.handler.protocol.idempotency import Idempotency, Outcome
from scheduler_dedup.handler.stores import open_store
from scheduler_dedup.handler.stores.base import RunStore
from scheduler_dedup.local.servers.redis_server import RedisServer

pytestmark = pytest.mark.server  # tests/costs.py

C = "rotated_runs"


@pytest.fixture()
def own_redis() -> Iterator[RedisServer]:
    """A redis-server of this test's own (its AUTH string changes mid-test)."""
    with RedisServer() as server:
        yield server


def _open(server: RedisServer, auth_file: Path) -> RunStore:
    env = {**server.endpoint_env(), "DEDUP_COLLECTION": C, "DEDUP_REDIS_AUTH_FILE": str(auth_file),
           "DEDUP_STORE_TIMEOUT_SECONDS": "2"}
    return open_store(Settings.from_env(env))


def _rotate(server: RedisServer, new: str, how: str) -> None:
    """Give the server a new AUTH string and drop every client's connection (a connection made before stays
    authenticated; the ones made after the rotation are the ones that meet it)."""
    if how == "requirepass":
        server.command("CONFIG", "SET", "requirepass", new)
    else:
        server.command("ACL", "SETUSER", "default", "resetpass", f">{new}")
    server.password = new  # the test's own connections authenticate with the new one
    Path(server.auth_file).write_text(new + "\n")
    server.command("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")


@pytest.mark.parametrize("how", ["requirepass", "acl"])
def test_a_rotation_mid_run_with_the_secret_file_rewritten_completes_the_run(own_redis: RedisServer, tmp_path: Path,
                                                                            how: str) -> None:
    auth = tmp_path / "auth"
    shutil.copy(own_redis.auth_file, auth)
    store = _open(own_redis, auth)
    runs: list[str] = []

    def job(attempt_id: str) -> str:
        runs.append(attempt_id)
        _rotate(own_redis, "rotated-" + uuid.uuid4().hex, how)
        auth.write_text(own_redis.password + "\n")  # the secret's new version, mounted as a volume
        return "done"

    run_id = uuid.uuid4().hex
    result = Idempotency(store, lease_seconds=30).execute(run_id, job, {"job_name": "rotated"})
    assert result.outcome is Outcome.PROCESSED, result
    record = own_redis.connect(C).get(run_id)
    assert record is not None and record.status == "completed" and len(runs) == 1


def test_a_rotation_the_file_does_not_follow_is_refused_naming_the_file(own_redis: RedisServer, tmp_path: Path) -> None:
    auth = tmp_path / "auth"
    shutil.copy(own_redis.auth_file, auth)
    store = _open(own_redis, auth)
    assert store.get("a" * 64) is None
    _rotate(own_redis, "rotated-" + uuid.uuid4().hex, "requirepass")
    started = time.monotonic()
    with pytest.raises(StoreRefusedError) as caught:
        store.get("a" * 64)
    assert "DEDUP_REDIS_AUTH_FILE" in caught.value.hint and time.monotonic() - started < 2
    auth.write_text(own_redis.password + "\n")  # the new version arrives later: the next call picks it up
    assert store.get("a" * 64) is None
