"""``idempotent`` on every store, on its real server: payload fingerprints, typed results, the replay hook and
``async def`` functions, each through the store contract only."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import uuid
from datetime import datetime
from typing import Any

import pytest

from scheduler_dedup.handler import (Idempotency, PayloadMismatchError, ReplayInfo, RunInProgressError, idempotent,
                                     record_id_for_key)
from scheduler_dedup.handler.protocol.payload import FINGERPRINT_FIELD, fingerprint
from scheduler_dedup.handler.stores.base import RunStore


@pytest.fixture()
def machinery(store: RunStore) -> Idempotency:
    return Idempotency(store, lease_seconds=30)


def fresh_key() -> str:
    return f"order-{uuid.uuid4().hex[:8]}"


def test_the_same_key_with_another_payload_is_refused_and_runs_nothing(machinery: Idempotency) -> None:
    calls: list[dict[str, Any]] = []

    @idempotent(key=lambda order: order["id"], payload=lambda order: order, idempotency=machinery)
    def charge(order: dict[str, Any]) -> dict[str, Any]:
        calls.append(order)
        return {"charged": order["amount"]}

    key = fresh_key()
    assert charge({"id": key, "amount": 5, "currency": "EUR"}) == {"charged": 5}
    # the same payload with its keys in another order is the same payload: replayed
    assert charge({"currency": "EUR", "amount": 5, "id": key}) == {"charged": 5}
    with pytest.raises(PayloadMismatchError) as refused:
        charge({"id": key, "amount": 999, "currency": "EUR"})
    assert refused.value.stored_fingerprint == fingerprint({"id": key, "amount": 5, "currency": "EUR"})
    assert len(calls) == 1
    # another process (no cache of its own) reads the fingerprint from the record and refuses too
    other = Idempotency(machinery.store, lease_seconds=30)
    with pytest.raises(PayloadMismatchError):
        idempotent(key=lambda order: order["id"], payload=lambda order: order, idempotency=other,
                   scope=f"{charge.__module__}.{charge.__qualname__}")(charge.__wrapped__)(  # type: ignore[attr-defined]
            {"id": key, "amount": 6, "currency": "EUR"})
    record = machinery.store.get(record_id_for_key(key, f"{charge.__module__}.{charge.__qualname__}"))
    assert record is not None and record.data[FINGERPRINT_FIELD] == refused.value.stored_fingerprint
    assert len(calls) == 1


def test_a_record_written_before_fingerprints_matches_any_payload(machinery: Idempotency) -> None:
    """A record without a fingerprint (an older version, or a call without payload=) replays: nothing to compare."""
    calls: list[int] = []
    key = fresh_key()

    @idempotent(key=lambda n: key, scope="legacy", idempotency=machinery)
    def before(n: int) -> int:
        calls.append(n)
        return n

    assert before(1) == 1
    later = Idempotency(machinery.store, lease_seconds=30)  # a new process after the upgrade

    @idempotent(key=lambda n: key, payload=lambda n: {"n": n}, scope="legacy", idempotency=later)
    def after(n: int) -> int:
        calls.append(n)
        return n

    assert after(2) == 1
    assert calls == [1]


@dataclasses.dataclass
class Line:
    sku: str
    quantity: int


@dataclasses.dataclass
class Receipt:
    order: str
    total: float
    lines: list[Line]


def test_a_dataclass_result_comes_back_as_itself_first_and_on_every_replay(machinery: Idempotency) -> None:
    key = fresh_key()

    @idempotent(key=lambda order: order, idempotency=machinery)
    def charge(order: str) -> Receipt:
        return Receipt(order, 12.5, [Line("a", 2)])

    expected = Receipt(key, 12.5, [Line("a", 2)])
    first = charge(key)
    assert isinstance(first, Receipt) and first == expected and isinstance(first.lines[0], Line)
    assert charge(key) == expected
    other = Idempotency(machinery.store, lease_seconds=30)  # replayed from the record, not this process's cache
    replayed = idempotent(key=lambda order: order, idempotency=other,
                          scope=f"{charge.__module__}.{charge.__qualname__}")(charge.__wrapped__)(key)  # type: ignore[attr-defined]
    assert isinstance(replayed, Receipt) and replayed == expected


def test_the_hook_is_called_on_replays_only_and_its_answer_is_returned(machinery: Idempotency) -> None:
    seen: list[tuple[Any, ReplayInfo]] = []
    key = fresh_key()

    def hook(result: Any, info: ReplayInfo) -> Any:
        seen.append((result, info))
        return {**result, "replayed": True}

    @idempotent(key=lambda order: order, response_hook=hook, idempotency=machinery)
    def charge(order: str) -> dict[str, Any]:
        return {"charged": 5}

    assert charge(key) == {"charged": 5}
    assert seen == []
    assert charge(key) == {"charged": 5, "replayed": True}  # from this process's cache
    other = Idempotency(machinery.store, lease_seconds=30)
    again = idempotent(key=lambda order: order, response_hook=hook, idempotency=other,
                       scope=f"{charge.__module__}.{charge.__qualname__}")(charge.__wrapped__)  # type: ignore[attr-defined]
    assert again(key) == {"charged": 5, "replayed": True}  # from the record
    assert len(seen) == 2
    for result, info in seen:
        assert result == {"charged": 5}
        assert info.replay and info.key == key and info.attempts == 1
        assert info.run_id == record_id_for_key(key, f"{charge.__module__}.{charge.__qualname__}")
        assert isinstance(info.first_run_at, datetime) and info.first_run_at.tzinfo is not None
    assert seen[0][1].first_run_at == seen[1][1].first_run_at


def test_two_concurrent_async_callers_run_the_function_once(machinery: Idempotency) -> None:
    """The coroutine runs on the caller's loop while the store calls run off it: the first call waits for an event
    the second call's answer sets, which would deadlock if the claim or the store calls blocked the loop."""
    calls: list[str] = []
    key = fresh_key()

    async def scenario() -> tuple[Any, Any]:
        second_answered = asyncio.Event()

        @idempotent(key=lambda order: order, payload=lambda order: {"order": order}, idempotency=machinery)
        async def charge(order: str) -> Receipt:
            calls.append(order)
            await second_answered.wait()
            return Receipt(order, 1.0, [])

        first = asyncio.create_task(charge(key))
        while not calls:
            await asyncio.sleep(0.01)
        with pytest.raises(RunInProgressError):
            await charge(key)
        second_answered.set()
        result = await first
        return result, await charge(key)

    first, replay = asyncio.run(scenario())
    assert first == replay == Receipt(key, 1.0, [])
    assert calls == [key]


def test_an_async_function_that_raises_releases_the_key(machinery: Idempotency) -> None:
    attempts: list[int] = []
    key = fresh_key()

    @idempotent(key=lambda: key, idempotency=machinery)
    async def flaky() -> int:
        attempts.append(threading.get_ident())
        if len(attempts) == 1:
            raise ConnectionError("downstream reset")
        return 7

    with pytest.raises(ConnectionError):
        asyncio.run(flaky())
    assert asyncio.run(flaky()) == 7
    assert asyncio.run(flaky()) == 7
    assert len(attempts) == 2


def test_an_async_function_cancelled_by_its_caller_is_cancelled_and_releases_the_key(machinery: Idempotency) -> None:
    """``asyncio.wait_for`` timing out cancels the function itself and releases the key on every store: the record
    says released, and the next call runs at once."""
    events: list[str] = []
    key = fresh_key()

    @idempotent(key=lambda: key, idempotency=machinery)
    async def export() -> str:
        events.append("start")
        try:
            await asyncio.sleep(60 if len(events) == 1 else 0)
        except asyncio.CancelledError:
            events.append("cancelled")
            raise
        return "exported"

    async def scenario() -> tuple[str | None, str]:
        with pytest.raises((asyncio.TimeoutError, TimeoutError)):
            await asyncio.wait_for(export(), 1)
        record = machinery.store.get(record_id_for_key(key, f"{export.__module__}.{export.__qualname__}"))
        return (record.status if record is not None else None), await export()

    assert asyncio.run(scenario()) == ("released", "exported")
    assert events == ["start", "cancelled", "start"]
