"""Results a store cannot hold: each store's check (``result_refusal``) against the store itself, and the
protocol's promise that a run which executed is recorded and never run again because of its result."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from scheduler_dedup.handler.core.errors import InvalidWriteError
from scheduler_dedup.handler.protocol.idempotency import Idempotency, Outcome
from scheduler_dedup.handler.core.stored_result import json_form
from scheduler_dedup.handler.stores.base import SERVER_TIME, RunStore


def nest(levels: int, leaf: Any = 1) -> Any:
    value = leaf
    for _ in range(levels):
        value = {"a": value}
    return value


#: Results near and past the limits of the three stores (document and row size, nesting, integers, keys).
CASES: dict[str, Any] = {
    "small": {"rows": 3},
    "int64-max": 2**63 - 1,
    "int64-min": -(2**63),
    "beyond-int64": 2**63,
    "uint64-max": {"id": 18446744073709551615},
    "float": 1.5e300,
    "20-levels": nest(20),
    "21-levels": nest(21),
    "79-levels": nest(79),
    "101-levels": nest(101),
    "array-in-array": [[1, 2], [3]],
    "empty-key": {"": 1},
    "reserved-key": {"__name__": 1},
    "dotted-key": {"a.b": 1, "c`d": 2},
    "unicode": {"straße": "日本語 ✓"},
    "1000-keys": {f"k{n}": n for n in range(1000)},
    "500-KiB": "x" * 500_000,
    "1-MiB": "x" * 1_048_576,
    "3-MiB": "x" * 3_000_000,
    "11-MiB": "x" * 11_000_000,
}


#: Results every store must hold (its check must accept them).
MUST_FIT = ("small", "int64-max", "int64-min", "float", "20-levels", "dotted-key", "unicode", "1000-keys", "500-KiB")


@pytest.mark.parametrize("name", list(CASES))
def test_what_the_check_accepts_the_store_stores(store: RunStore, name: str) -> None:
    """The check is conservative: a result it accepts is written and read back intact (a result it refuses is
    never sent, so how the store would refuse it does not matter); ordinary results are accepted."""
    form = json_form(CASES[name])
    assert form.dropped is None
    run_id = uuid.uuid4().hex
    fields = {"status": "in_progress", "attempt_id": "a" * 32, "lease_seconds": 30.0, "job_name": "r",
              "claimed_at": SERVER_TIME}
    version = store.create(run_id, fields)
    assert version is not None
    finish = {"status": "completed", "error": None, "result_dropped": None, "finished_at": SERVER_TIME}
    refusal = store.result_refusal(form.value, run_id, {**fields, **finish})
    if name in MUST_FIT:
        assert refusal is None, refusal
    if refusal is not None:
        assert isinstance(refusal, str) and refusal
        return
    try:
        written = store.update_if_unchanged(run_id, {**finish, "result": form.value}, version)
    except InvalidWriteError as exc:
        raise AssertionError(f"{store.display_name} refused {name} ({exc}) but the check accepted it") from exc
    assert written is not None
    record = store.get(run_id)
    assert record is not None and record.result == form.value


def test_a_result_too_large_for_the_store_completes_the_run_without_it(store: RunStore) -> None:
    runs: list[str] = []

    def job(attempt_id: str) -> str:
        runs.append(attempt_id)
        return "x" * 11_000_000

    run_id = uuid.uuid4().hex
    idem = Idempotency(store, lease_seconds=30)
    first = idem.execute(run_id, job, {"job_name": "big"})
    assert first.outcome is Outcome.PROCESSED and first.result is None
    assert first.result_dropped, first
    again = Idempotency(store, lease_seconds=30).execute(run_id, job)
    assert again.outcome is Outcome.DUPLICATE and again.result_dropped == first.result_dropped
    assert len(runs) == 1
    record = store.get(run_id)
    assert record is not None and record.status == "completed" and record.result is None
