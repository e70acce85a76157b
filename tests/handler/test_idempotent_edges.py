"""``idempotent`` at its edges, as a user of Powertools' idempotency would try it, on the real Firestore emulator:
typed results of any annotation, results that are no value (generators, coroutines), payloads equal as JSON values,
and ``async def`` functions cancelled mid-run."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import datetime as dt
import uuid
from typing import Any, Optional

import pytest
from google.cloud import firestore

from scheduler_dedup.handler import (FirestoreRunStore, Idempotency, PayloadMismatchError, ReplayInfo,
                                     RunInProgressError, idempotent, record_id_for_key)
from scheduler_dedup.handler.protocol.idempotent import default_scope
from scheduler_dedup.handler.service.idempotent_endpoint import idempotent_endpoint
from scheduler_dedup.local.servers.firestore_emulator import FirestoreEmulator


@pytest.fixture()
def machinery(emulator: FirestoreEmulator) -> Idempotency:
    return Idempotency(FirestoreRunStore(firestore.Client(project=emulator.project), "edges"), lease_seconds=30)


def fresh() -> str:
    return f"order-{uuid.uuid4().hex[:8]}"


@dataclasses.dataclass
class Line:
    sku: str
    qty: int


@dataclasses.dataclass
class Shipment:
    order: str
    lines: list[Line]
    at: dt.datetime
    due: dt.date
    note: Optional[Line] = None


def test_a_dataclass_with_datetime_and_date_fields_comes_back_with_them_first_and_on_replays(
        machinery: Idempotency) -> None:
    """A datetime field was stored as its ISO 8601 string and came back a ``str`` inside the dataclass."""
    at = dt.datetime(2026, 12, 7, 15, 0, tzinfo=dt.timezone.utc)

    @idempotent(key=lambda order: order, idempotency=machinery)
    def ship(order: str) -> Shipment:
        return Shipment(order, [Line("a", 1)], at, dt.date(2026, 12, 8), Line("b", 2))

    key = fresh()
    expected = Shipment(key, [Line("a", 1)], at, dt.date(2026, 12, 8), Line("b", 2))
    assert ship(key) == expected and ship(key) == expected
    replay = ship(key)
    assert isinstance(replay.at, dt.datetime) and isinstance(replay.due, dt.date)
    assert isinstance(replay.note, Line)


def test_optional_list_and_dict_return_annotations_of_dataclasses_are_typed_results(machinery: Idempotency) -> None:
    """``-> Optional[Line]`` came back a dict, and ``-> list[Line]`` was dropped (stored None) and returned None."""
    runs: list[str] = []

    @idempotent(key=lambda order: order, idempotency=machinery)
    def maybe(order: str) -> Optional[Line]:
        runs.append(order)
        return Line(order, 1) if order.endswith("x") else None

    @idempotent(key=lambda order: order, idempotency=machinery)
    def many(order: str) -> list[Line]:
        runs.append(order)
        return [Line(order, 1), Line(order, 2)]

    @idempotent(key=lambda order: order, idempotency=machinery)
    def by_sku(order: str) -> dict[str, Line]:
        runs.append(order)
        return {"a": Line(order, 3)}

    some, none, lines, keyed = fresh() + "x", fresh() + "y", fresh(), fresh()
    for _ in range(2):
        assert maybe(some) == Line(some, 1)
        assert maybe(none) is None
        assert many(lines) == [Line(lines, 1), Line(lines, 2)]
        assert by_sku(keyed) == {"a": Line(keyed, 3)}
    assert runs == [some, none, lines, keyed]
    record = machinery.store.get(record_id_for_key(lines, default_scope(many)))
    assert record is not None and record.result == [{"sku": lines, "qty": 1}, {"sku": lines, "qty": 2}]


def test_a_generator_function_is_refused_when_decorated(machinery: Idempotency) -> None:
    """A generator function's body never ran: its generator was dropped as "not JSON" and the key recorded
    completed with None, for good (the kind of the old ``async def`` defect)."""
    with pytest.raises(TypeError, match="generator"):
        @idempotent(key=lambda order: order, idempotency=machinery)
        def rows(order: str) -> Any:
            yield order

    with pytest.raises(TypeError, match="generator"):
        @idempotent(key=lambda order: order, idempotency=machinery)
        async def async_rows(order: str) -> Any:
            yield order

    with pytest.raises(TypeError, match="generator"):
        @idempotent_endpoint(idempotency=machinery)
        def streamed(request: Any) -> Any:
            yield "row"


def test_a_result_that_is_an_unawaited_coroutine_releases_the_key_and_raises(machinery: Idempotency) -> None:
    """A plain function returning a coroutine (a wrapper around an ``async def``) never did its work; recording the
    key completed with None would skip it on every retry. It raises TypeError and the key is released."""
    ran: list[str] = []

    async def work(order: str) -> str:
        ran.append(order)
        return order

    def call_later(order: str) -> Any:
        return work(order)

    wrapped = idempotent(key=lambda order: order, idempotency=machinery)(call_later)
    key = fresh()
    with pytest.raises(TypeError, match="coroutine"):
        wrapped(key)
    record = machinery.store.get(record_id_for_key(key, default_scope(call_later)))
    assert record is not None and record.status == "released" and ran == []


def test_payloads_equal_as_json_values_share_a_fingerprint_one_and_one_point_zero(machinery: Idempotency) -> None:
    """JSON has one number type: ``1`` and ``1.0`` (a client that sends an amount as a float) are one payload."""
    runs: list[Any] = []

    @idempotent(key=lambda order: order["id"], payload=lambda order: order, idempotency=machinery)
    def charge(order: dict[str, Any]) -> Any:
        runs.append(order["amount"])
        return order["amount"]

    key = fresh()
    assert charge({"id": key, "amount": 1}) == 1
    assert charge({"id": key, "amount": 1.0}) == 1
    assert charge({"amount": 1.0, "id": key}) == 1
    assert runs == [1]
    nested = fresh()
    assert charge({"id": nested, "amount": [2, {"x": 3}]}) == [2, {"x": 3}]
    assert charge({"id": nested, "amount": [2.0, {"x": 3.0}]}) == [2, {"x": 3}]
    with pytest.raises(PayloadMismatchError):
        charge({"id": nested, "amount": [2.5, {"x": 3}]})
    assert runs == [1, [2, {"x": 3}]]


def test_an_async_function_cancelled_by_wait_for_is_cancelled_and_its_key_released(machinery: Idempotency) -> None:
    """``asyncio.wait_for`` timing out, or a task cancelled, cancels the function itself (as asyncio promises)
    and releases the key, so the retry runs at once; before, the function ran on, detached from its caller, and
    the retry got RunInProgressError."""
    events: list[str] = []

    @idempotent(key=lambda order, seconds: order, idempotency=machinery)
    async def slow(order: str, seconds: float) -> dict[str, str]:
        events.append("start")
        try:
            await asyncio.sleep(seconds)
        except asyncio.CancelledError:
            events.append("cancelled")
            raise
        events.append("done")
        return {"order": order}

    key, other = fresh(), fresh()

    async def main() -> Any:
        with pytest.raises((asyncio.TimeoutError, TimeoutError)):
            await asyncio.wait_for(slow(key, 60), 2)
        assert events == ["start", "cancelled"]
        assert await slow(key, 0) == {"order": key}  # released: the retry runs at once

        task = asyncio.ensure_future(slow(other, 60))
        while events.count("start") < 3:
            await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert events[-1] == "cancelled"
        return await slow(other, 0)

    assert asyncio.run(main()) == {"order": other}
    assert events == ["start", "cancelled", "start", "done", "start", "cancelled", "start", "done"]
    assert machinery.store.get(record_id_for_key(key, default_scope(slow))).status == "completed"  # type: ignore[union-attr]


def test_a_concurrent_async_caller_of_a_cancelled_run_waits_for_no_detached_work(machinery: Idempotency) -> None:
    """While the first call runs, a second gets RunInProgressError; once the first is cancelled, nothing of it
    still runs: the key is free and the next call runs the function itself."""
    events: list[str] = []

    @idempotent(key=lambda order: order, idempotency=machinery)
    async def slow(order: str) -> str:
        events.append(order)
        await asyncio.sleep(60 if len(events) == 1 else 0)
        return order

    async def main(key: str) -> str:
        first = asyncio.ensure_future(slow(key))
        while not events:
            await asyncio.sleep(0.05)
        with pytest.raises(RunInProgressError):
            await slow(key)
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        return await slow(key)

    key = fresh()
    assert asyncio.run(main(key)) == key and events == [key, key]


def test_an_async_response_hook_is_awaited_and_refused_beside_a_plain_function(machinery: Idempotency) -> None:
    """An ``async def`` hook of an ``async def`` function handed the caller its unawaited coroutine on every replay;
    beside a plain function it cannot be awaited, so it is refused when decorating. A hook that raises gives the
    caller its exception and leaves the record completed."""
    async def mark(result: dict[str, Any], info: ReplayInfo) -> dict[str, Any]:
        await asyncio.sleep(0)
        return {**result, "replayed": info.replay}

    @idempotent(key=lambda order: order, response_hook=mark, idempotency=machinery)
    async def notify(order: str) -> dict[str, Any]:
        return {"notified": order}

    async def main(key: str) -> list[Any]:
        return [await notify(key), await notify(key)]

    key = fresh()
    assert asyncio.run(main(key)) == [{"notified": key}, {"notified": key, "replayed": True}]
    with pytest.raises(TypeError, match="async def"):
        idempotent(key=lambda order: order, response_hook=mark, idempotency=machinery)(lambda order: order)

    def broken(result: Any, info: ReplayInfo) -> Any:
        raise LookupError("hook failed")

    @idempotent(key=lambda order: order, response_hook=broken, idempotency=machinery)
    def ship(order: str) -> str:
        return order

    assert ship(key) == key
    with pytest.raises(LookupError):
        ship(key)
    assert machinery.store.get(record_id_for_key(key, default_scope(ship))).status == "completed"  # type: ignore[union-attr]


def test_a_released_key_still_refuses_another_payload_and_replays_the_first(machinery: Idempotency) -> None:
    """As docs/idempotent.md says (and unlike Powertools, which deletes the record): after the function raised and
    released the key, a retry with the first payload runs, another payload is refused and runs nothing."""
    amounts: list[int] = []

    @idempotent(key=lambda order: order["id"], payload=lambda order: order, idempotency=machinery)
    def pay(order: dict[str, Any]) -> int:
        amounts.append(order["amount"])
        if len(amounts) == 1:
            raise RuntimeError("the gateway timed out")
        return int(order["amount"])

    key = fresh()
    with pytest.raises(RuntimeError):
        pay({"id": key, "amount": 5})
    with pytest.raises(PayloadMismatchError):
        pay({"id": key, "amount": 6})
    assert pay({"id": key, "amount": 5}) == 5 and amounts == [5, 5]


def test_a_loop_closed_under_a_running_async_call_releases_its_key(machinery: Idempotency) -> None:
    """A loop closed with the call's task still pending (never cancelled) cannot finish the function: the worker
    holding the claim notices and releases the key rather than renewing its lease for the life of the process."""
    @idempotent(key=lambda order: order, idempotency=machinery)
    async def slow(order: str) -> str:
        await asyncio.sleep(60)
        return order

    key = fresh()
    loop = asyncio.new_event_loop()
    task = loop.create_task(slow(key))
    record_id = record_id_for_key(key, default_scope(slow))
    while (record := machinery.store.get(record_id)) is None or record.status != "in_progress":
        loop.run_until_complete(asyncio.sleep(0.1))
    loop.close()
    for _ in range(300):
        record = machinery.store.get(record_id)
        if record is not None and record.status == "released":
            break
        threading.Event().wait(0.1)
    assert record is not None and record.status == "released", record
    del task
