"""The failover campaign's model on real redis-servers: a replica behind a lagging replication relay, promoted
before it caught up, lacks a claim the primary acknowledged; a claim acknowledged after WAIT is on it."""

from __future__ import annotations

import secrets
import uuid
from datetime import datetime, timedelta, timezone

from scheduler_dedup.handler.stores.redis.store import RedisRunStore
from scheduler_dedup.handler.stores.redis.config import parse_redis_url
from scheduler_dedup.local.campaigns.failover import FailoverConfig, ModeReport, _replicated, table
from scheduler_dedup.local.servers.redis_server import RedisServer
import pytest

pytestmark = pytest.mark.campaign  # tests/costs.py


def _claim(store: RedisRunStore) -> str:
    run_id = uuid.uuid4().hex
    assert store.create(run_id, {"status": "in_progress", "attempt_id": "a" * 32, "lease_seconds": 30.0,
                                 "expire_at": datetime.now(timezone.utc) + timedelta(minutes=5)}) is not None
    return run_id


def test_a_failover_before_the_replica_caught_up_loses_an_acknowledged_claim_unless_wait_acknowledged_it() -> None:
    password = secrets.token_urlsafe(16)
    with RedisServer(password=password) as primary:
        replicas: list[RedisServer] = []

        def start(host: str) -> RedisServer:
            replicas.append(RedisServer(replica_of=host, password=password).start())
            return replicas[-1]

        try:
            link, replica = _replicated(primary, start, lag_ms=300)
            url = parse_redis_url(f"redis://{primary.host}/0")
            waited = _claim(RedisRunStore(url, "failover", 5.0, password=password, wait_timeout_ms=2000))
            unwaited = _claim(RedisRunStore(url, "failover", 5.0, password=password, wait_timeout_ms=0))
            link.cut()  # the failover: what the relay still holds is lost
            replica.promote()
            assert replica.command("EXISTS", "{failover}:run:" + waited), "WAIT returned before the replica had it"
            assert not replica.command("EXISTS", "{failover}:run:" + unwaited), "the replica was not behind"
            assert replica.info("replication")["role"] == "master"
        finally:
            for each in replicas:
                each.close()


def test_the_table_reports_each_mode() -> None:
    cfg = FailoverConfig(rounds=1, scenarios_per_round=2, wait_modes=(0, 500))
    reports = [ModeReport(0, lost_records=[3], seconds=1.0), ModeReport(500, lost_records=[1], seconds=2.0)]
    rendered = table(cfg, reports)
    assert [c.header for c in rendered.columns] == ["", "no WAIT", "WAIT 500 ms"]
    assert rendered.row_count == 7
