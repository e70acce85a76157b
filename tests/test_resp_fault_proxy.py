"""The RESP fault proxy against a real redis-server: each fault kind does what it says, each store call is named."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any
from datetime import datetime, timezone

import pytest
import redis as redispy

from scheduler_dedup.handler.protocol.idempotency import Idempotency
from scheduler_dedup.handler.stores.base import SERVER_TIME
from scheduler_dedup.handler.stores.redis.store import RedisRunStore
from scheduler_dedup.handler.stores.redis.config import parse_redis_url
from scheduler_dedup.local.faults.grpc_proxy import Fault
from scheduler_dedup.local.servers.redis_server import RedisServer
from scheduler_dedup.local.faults.resp_proxy import RespFaultProxy


@pytest.fixture()
def proxy(redis: RedisServer) -> Iterator[RespFaultProxy]:
    with redis.fault_proxy() as p:
        yield p


def _client(host: str, server: RedisServer, timeout: float = 5.0) -> redispy.Redis:
    h, _, port = host.rpartition(":")
    return redispy.Redis(host=h, port=int(port), password=server.password, socket_timeout=timeout,
                         retry=redispy.retry.Retry(redispy.backoff.NoBackoff(), 0))


def _store(proxy: RespFaultProxy, server: RedisServer, timeout: float = 5.0) -> RedisRunStore:
    return RedisRunStore(parse_redis_url(f"redis://{proxy.host}/0"), "proxied", timeout, password=server.password,
                         wait_timeout_ms=0)


def test_unavailable_drops_the_connection_without_forwarding(proxy: RespFaultProxy, redis: RedisServer, redis_client: Any) -> None:
    client, direct = _client(proxy.host, redis), redis_client(redis)
    client.ping()
    proxy.add(Fault(method="SET", kind="unavailable"))
    with pytest.raises(redispy.ConnectionError):
        client.set("a", "1")
    assert direct.get("a") is None
    (entry,) = proxy.injected
    assert (entry["step"], entry["kind"], entry["method"]) == ("other", "unavailable", "SET")


def test_lose_answer_applies_the_command_and_drops_the_answer(proxy: RespFaultProxy, redis: RedisServer, redis_client: Any) -> None:
    client, direct = _client(proxy.host, redis), redis_client(redis)
    proxy.add(Fault(method="SET", kind="lose_answer"))
    with pytest.raises(redispy.ConnectionError):
        client.set("a", "1")
    assert direct.get("a") == b"1"


def test_deadline_answers_nothing_until_the_client_gives_up(proxy: RespFaultProxy, redis: RedisServer, redis_client: Any) -> None:
    client, direct = _client(proxy.host, redis, timeout=0.5), redis_client(redis)
    proxy.add(Fault(method="SET", kind="deadline", delay_seconds=10))
    started = time.monotonic()
    with pytest.raises(redispy.TimeoutError):
        client.set("a", "1")
    assert 0.5 <= time.monotonic() - started < 5
    time.sleep(0.5)
    assert direct.get("a") is None


def test_delay_lands_the_command_after_the_client_gave_up(proxy: RespFaultProxy, redis: RedisServer, redis_client: Any) -> None:
    client, direct = _client(proxy.host, redis, timeout=0.3), redis_client(redis)
    proxy.add(Fault(method="SET", kind="delay", delay_seconds=1.0))
    with pytest.raises(redispy.TimeoutError):
        client.set("a", "1")
    assert direct.get("a") is None
    deadline = time.monotonic() + 10
    while direct.get("a") is None:
        assert time.monotonic() < deadline, "the held command never reached Redis"
        time.sleep(0.05)


def test_refuse_answers_an_error_without_forwarding(proxy: RespFaultProxy, redis: RedisServer, redis_client: Any) -> None:
    client, direct = _client(proxy.host, redis), redis_client(redis)
    proxy.add(Fault(method="SET", kind="refuse"))
    with pytest.raises(redispy.ResponseError, match="fault proxy"):
        client.set("a", "1")
    assert direct.get("a") is None
    assert client.set("a", "2") and direct.get("a") == b"2"  # the connection goes on


def test_store_steps_are_classified(proxy: RespFaultProxy, redis: RedisServer) -> None:
    store = _store(proxy, redis)

    def protocol(run_id: str) -> None:
        t0 = store.create(run_id, {"status": "in_progress", "attempt_id": "a1", "job_name": "j",
                                   "schedule_time": datetime(2026, 1, 1, tzinfo=timezone.utc)})
        assert t0 is not None and store.get(run_id) is not None
        t1 = store.update_if_unchanged(run_id, {"heartbeat_at": SERVER_TIME}, t0)
        assert t1 is not None
        t2 = store.update_if_unchanged(run_id, {"status": "in_progress", "attempt_id": "a2"}, t1)
        assert t2 is not None
        t3 = store.update_if_unchanged(run_id, {"status": "failed", "error": "x"}, t2)
        assert t3 is not None
        t4 = store.update_if_unchanged(run_id, {"status": "completed", "result": None}, t3)
        assert t4 is not None
        assert store.delete_if_unchanged(run_id, t4)
        list(store.job_run_pages("j", since=None, until=None, page_size=5))
        store.runs_with_id_prefix("ab", 2)

    protocol("warm-up")  # each script's first call answers NOSCRIPT and loads it
    proxy.clear()
    seen: list[tuple[str, str]] = []
    proxy.observe(lambda call, kind, seconds: seen.append((call.step, call.document)))
    protocol("r")
    assert proxy.calls == [("claim", "EVALSHA"), ("read", "EVALSHA"), ("renewal", "EVALSHA"), ("takeover", "EVALSHA"),
                           ("failure", "EVALSHA"), ("completion", "EVALSHA"), ("release", "EVALSHA"),
                           ("query", "EVALSHA"), ("query", "EVALSHA")]
    assert seen == [("claim", "r"), ("read", "r"), ("renewal", "r"), ("takeover", "r"), ("failure", "r"),
                    ("completion", "r"), ("release", "r"), ("query", ""), ("query", "")]


def test_a_fault_names_the_run_id_and_hits_that_step_only(proxy: RespFaultProxy, redis: RedisServer) -> None:
    store = _store(proxy, redis, timeout=2.0)
    run_id = uuid.uuid4().hex
    proxy.add(Fault(step="completion", kind="lose_answer"))
    outcome = Idempotency(store, lease_seconds=30).execute(run_id, lambda a: "ok")
    assert outcome.outcome.value == "processed"
    (entry,) = proxy.injected
    assert (entry["step"], entry["document"]) == ("completion", run_id)
    assert proxy.injected_on(run_id) == [entry]
