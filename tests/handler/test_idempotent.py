"""The public ``idempotent`` decorator, in-process on the real emulator, with real threads."""

from __future__ import annotations

import threading
import uuid
from datetime import datetime, timezone
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pydantic
import pytest
import requests
from google.cloud import firestore

from scheduler_dedup.handler import (
    ConfigError,
    FirestoreRunStore,
    Idempotency,
    NonRetryableJobError,
    RunFailedError,
    RunInProgressError,
    idempotent,
    record_id_for_key,
)
from scheduler_dedup.handler.protocol.idempotent import default_scope
from scheduler_dedup.local.servers.firestore_emulator import FirestoreEmulator


@pytest.fixture()
def machinery(emulator: FirestoreEmulator) -> Idempotency:
    return Idempotency(FirestoreRunStore(firestore.Client(project=emulator.project), "payments"), lease_seconds=30)


def test_runs_once_and_replays_the_stored_result(machinery: Idempotency) -> None:
    calls: list[str] = []

    @idempotent(key=lambda order: order["id"], idempotency=machinery)
    def charge(order: dict[str, Any]) -> dict[str, Any]:
        calls.append(order["id"])
        return {"charged": order["amount"]}

    assert charge({"id": "o-1", "amount": 5}) == {"charged": 5}
    assert charge({"id": "o-1", "amount": 999}) == {"charged": 5}
    assert charge({"id": "o-2", "amount": 7}) == {"charged": 7}
    assert calls == ["o-1", "o-2"]
    record = machinery.store.get(record_id_for_key("o-1", default_scope(charge)))
    assert record is not None and record.status == "completed" and record.data["key"] == "o-1"


def test_a_retryable_exception_releases_the_key_and_re_raises(machinery: Idempotency) -> None:
    attempts: list[int] = []

    @idempotent(key=lambda n: f"job-{n}", idempotency=machinery)
    def flaky(n: int) -> int:
        attempts.append(n)
        if len(attempts) == 1:
            raise ConnectionError("downstream reset")
        return n * 2

    with pytest.raises(ConnectionError):
        flaky(3)
    released = machinery.store.get(record_id_for_key("job-3", default_scope(flaky)))
    assert released is not None and released.status == "released", released
    assert released.error == "ConnectionError: downstream reset", released
    assert flaky(3) == 6
    assert attempts == [3, 3]


@pytest.mark.parametrize("exit_", [SystemExit(0), KeyboardInterrupt()])
def test_an_exit_releases_the_key_and_re_raises_in_process(machinery: Idempotency, exit_: BaseException) -> None:
    attempts: list[int] = []

    @idempotent(key=lambda n: f"exit-{n}", idempotency=machinery)
    def cli_main(n: int) -> int:
        attempts.append(n)
        if len(attempts) == 1:
            raise exit_  # e.g. a click/argparse main() called in-process
        return n

    with pytest.raises(type(exit_)):
        cli_main(1)
    released = machinery.store.get(record_id_for_key("exit-1", default_scope(cli_main)))
    assert released is not None and released.status == "released" and "never exit" in (released.error or "")
    assert cli_main(1) == 1 and attempts == [1, 1]


def test_a_non_retryable_error_is_recorded_and_never_retried(machinery: Idempotency) -> None:
    calls: list[int] = []

    @idempotent(key=lambda: "refund-1", idempotency=machinery)
    def refund() -> None:
        calls.append(1)
        raise NonRetryableJobError("card closed")

    with pytest.raises(RunFailedError, match="card closed"):
        refund()
    with pytest.raises(RunFailedError, match="card closed"):
        refund()
    assert calls == [1]


def test_concurrent_calls_with_one_key_run_once(machinery: Idempotency) -> None:
    calls: list[int] = []
    barrier = threading.Barrier(20)
    release = threading.Event()

    @idempotent(key=lambda i: "shared", idempotency=machinery)
    def work(i: int) -> int:
        calls.append(i)
        release.wait(10)
        return i

    def call(i: int) -> str:
        barrier.wait()
        try:
            work(i)
            return "ok"
        except RunInProgressError as exc:
            assert exc.retry_after_seconds > 0
            return "in_progress"

    with ThreadPoolExecutor(20) as pool:
        futures = [pool.submit(call, i) for i in range(20)]
        threading.Timer(2.0, release.set).start()
        results = Counter(f.result() for f in futures)
    assert len(calls) == 1
    assert results == Counter({"ok": 1, "in_progress": 19})


def test_an_empty_key_is_refused_before_anything_is_written(machinery: Idempotency) -> None:
    @idempotent(key=lambda: "", idempotency=machinery)
    def nothing() -> None:
        raise AssertionError("must not run")

    with pytest.raises(ValueError, match="non-empty string"):
        nothing()


def test_replays_never_share_a_mutable_object(machinery: Idempotency) -> None:
    @idempotent(key=lambda order: order, idempotency=machinery)
    def charge(order: str) -> dict[str, Any]:
        return {"charged": 5, "items": [1, 2]}

    first = charge("o-9")
    first["charged"] = 999
    first["items"].append(3)
    replay = charge("o-9")
    assert replay == {"charged": 5, "items": [1, 2]}
    replay["charged"] = 1000
    assert charge("o-9") == {"charged": 5, "items": [1, 2]}


def test_every_call_returns_the_stored_form_the_first_included(machinery: Idempotency) -> None:
    @idempotent(key=lambda: "forms", idempotency=machinery)
    def pair() -> tuple[int, int]:
        return (1, 2)

    assert pair() == [1, 2]  # a tuple is stored as a JSON array: the first call says so too
    assert pair() == [1, 2]


def test_two_functions_with_one_key_keep_two_records(machinery: Idempotency) -> None:
    done: list[str] = []

    @idempotent(key=lambda order: order, idempotency=machinery)
    def charge(order: str) -> str:
        done.append(f"charge {order}")
        return "charged"

    @idempotent(key=lambda order: order, idempotency=machinery)
    def ship(order: str) -> str:
        done.append(f"ship {order}")
        return "shipped"

    assert charge("order-42") == "charged"
    assert ship("order-42") == "shipped"
    assert charge("order-42") == "charged" and ship("order-42") == "shipped"
    assert done == ["charge order-42", "ship order-42"]
    ids = {record_id_for_key("order-42", default_scope(charge)), record_id_for_key("order-42", default_scope(ship))}
    assert len(ids) == 2 and all(machinery.store.get(i) is not None for i in ids)


def test_an_explicit_scope_shares_one_record_on_purpose(machinery: Idempotency) -> None:
    done: list[str] = []

    @idempotent(key=lambda order: order, scope="payments", idempotency=machinery)
    def charge_v1(order: str) -> str:
        done.append("v1")
        return "charged by v1"

    @idempotent(key=lambda order: order, scope="payments", idempotency=machinery)
    def charge_v2(order: str) -> str:
        done.append("v2")
        return "charged by v2"

    assert charge_v1("o-7") == "charged by v1"
    assert charge_v2("o-7") == "charged by v1"
    assert done == ["v1"]
    record = machinery.store.get(record_id_for_key("o-7", "payments"))
    assert record is not None and record.data["scope"] == "payments"


def test_a_key_that_is_a_run_id_never_names_the_handlers_record(machinery: Idempotency) -> None:
    """The HTTP proxy target sends the run id as Idempotency-Key: the downstream must not find the handler's claim."""
    from scheduler_dedup.handler import RunKey

    run_id = RunKey("p1", "", "nightly", datetime(2026, 10, 16, 12, tzinfo=timezone.utc)).run_id
    assert record_id_for_key(run_id, "anything") != run_id
    holding, release = threading.Event(), threading.Event()

    def handler_job(_attempt: str) -> None:  # the handler, holding its claim while it calls downstream
        holding.set()
        release.wait(10)

    handler = threading.Thread(target=machinery.execute, args=(run_id, handler_job))
    handler.start()
    try:
        assert holding.wait(10)

        @idempotent(key=lambda token: token, idempotency=machinery)
        def downstream(token: str) -> str:
            return "ran"

        assert downstream(run_id) == "ran"
    finally:
        release.set()
        handler.join()


# ---------------------------------------------------------------- typed results, the test switch, the endpoint

class Invoice(pydantic.BaseModel):
    number: str
    issued: datetime
    amounts: list[float]


def test_a_pydantic_model_result_comes_back_as_itself(machinery: Idempotency) -> None:
    issued = datetime(2026, 10, 16, 12, tzinfo=timezone.utc)

    @idempotent(key=lambda n: n, idempotency=machinery)
    def invoice(n: str) -> Invoice:
        return Invoice(number=n, issued=issued, amounts=[1.5, 2.0])

    first, replay = invoice("inv-1"), invoice("inv-1")
    assert isinstance(first, Invoice) and isinstance(replay, Invoice)
    assert first == replay == Invoice(number="inv-1", issued=issued, amounts=[1.5, 2.0])
    record = machinery.store.get(record_id_for_key("inv-1", default_scope(invoice)))
    assert record is not None and record.result == {"number": "inv-1", "issued": "2026-10-16T12:00:00Z",
                                                    "amounts": [1.5, 2.0]}


def test_a_type_given_as_serializer_rebuilds_an_unannotated_result(machinery: Idempotency) -> None:
    @idempotent(key=lambda n: n, serializer=Invoice, idempotency=machinery)
    def invoice(n: str):  # type: ignore[no-untyped-def]  # no annotation: serializer= says the type
        return {"number": n, "issued": "2026-10-16T12:00:00+00:00", "amounts": []}

    assert isinstance(invoice("inv-2"), Invoice) and isinstance(invoice("inv-2"), Invoice)
    with pytest.raises(TypeError, match="neither a dataclass nor a Pydantic model"):
        idempotent(key=lambda: "x", serializer=dict, idempotency=machinery)(lambda: None)


def test_switched_off_the_function_runs_every_time_and_no_store_is_opened(
        redis_server: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """DEDUP_IDEMPOTENCY_DISABLED=1: no connection reaches redis-server, the function runs on each call, and one
    warning says so; the same calls with the switch off connect and run once."""
    from scheduler_dedup.handler.protocol import idempotent as idempotent_module

    for name, value in redis_server.endpoint_env().items():
        monkeypatch.setenv(name, value)
    collection = f"switch_{uuid.uuid4().hex[:8]}"
    calls: list[int] = []

    @idempotent(key=lambda n: "same", collection=collection)
    def work(n: int) -> int:
        calls.append(n)
        return n

    def connections() -> int:
        return int(redis_server.info("stats")["total_connections_received"])

    monkeypatch.setenv("DEDUP_IDEMPOTENCY_DISABLED", "1")
    idempotent_module._warned_disabled.clear()
    before = connections()
    with caplog.at_level("WARNING", logger="scheduler_dedup"):
        assert [work(1), work(2), work(3)] == [1, 2, 3]
    assert connections() == before + 1  # the INFO call of connections() itself, nothing else
    assert calls == [1, 2, 3] and collection not in idempotent_module._built
    assert len([r for r in caplog.records if "DEDUP_IDEMPOTENCY_DISABLED" in r.getMessage()]) == 1

    monkeypatch.delenv("DEDUP_IDEMPOTENCY_DISABLED")
    before = connections()
    assert [work(4), work(5)] == [4, 4]
    assert connections() > before + 1 and calls == [1, 2, 3, 4]


@pytest.mark.parametrize("value", ["yes", "on", "disabled"])
def test_a_switch_value_that_is_neither_on_nor_off_is_refused_naming_the_variable(
        redis_server: Any, monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    """``DEDUP_IDEMPOTENCY_DISABLED=yes`` (Powertools' own switch accepts it) was taken as off without a word: a unit
    test meaning to switch idempotent off opened the real store. Any value but 1/true/0/false is a ConfigError
    naming the variable, raised before the function runs or redis-server is reached."""
    for name, env_value in redis_server.endpoint_env().items():
        monkeypatch.setenv(name, env_value)
    calls: list[int] = []

    @idempotent(key=lambda n: "same", collection=f"switch_{uuid.uuid4().hex[:8]}")
    def work(n: int) -> int:
        calls.append(n)
        return n

    monkeypatch.setenv("DEDUP_IDEMPOTENCY_DISABLED", value)
    before = int(redis_server.info("stats")["total_connections_received"])
    with pytest.raises(ConfigError, match="DEDUP_IDEMPOTENCY_DISABLED"):
        work(1)
    assert calls == [] and int(redis_server.info("stats")["total_connections_received"]) == before + 1
    for off in ("0", "false", "FALSE", ""):
        monkeypatch.setenv("DEDUP_IDEMPOTENCY_DISABLED", off)
        assert work(2) == 2
    assert calls == [2]


def test_the_endpoint_answers_422_to_another_body_under_a_used_key(machinery: Idempotency) -> None:
    """Over real HTTP: the first body runs, the same JSON body (keys reordered) replays, another body gets 422
    payload_mismatch and runs nothing."""
    import flask
    from werkzeug.serving import make_server

    from scheduler_dedup.handler import idempotent_endpoint

    ran: list[Any] = []
    app = flask.Flask("endpoint")

    @idempotent_endpoint(idempotency=machinery)
    def export(request: flask.Request) -> dict[str, Any]:
        ran.append(request.get_json())
        return {"rows": 42}

    @idempotent_endpoint(payload=lambda request: request.get_json()["order"], idempotency=machinery)
    def by_order(request: flask.Request) -> dict[str, Any]:
        ran.append(request.get_json())
        return {"order": request.get_json()["order"]}

    app.add_url_rule("/", "export", lambda: export(flask.request), methods=["POST"])
    app.add_url_rule("/order", "order", lambda: by_order(flask.request), methods=["POST"])
    server = make_server("127.0.0.1", 0, app, threaded=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_port}/"
    try:
        key = {"Idempotency-Key": "run-1", "Content-Type": "application/json"}
        first = requests.post(url, data='{"run_id": "run-1", "job_name": "nightly"}', headers=key, timeout=30)
        again = requests.post(url, data='{ "job_name": "nightly",  "run_id": "run-1" }', headers=key, timeout=30)
        other = requests.post(url, data='{"run_id": "run-1", "job_name": "other"}', headers=key, timeout=30)
        # JSON has one number type: 1.0 is the 1 of the first body (a client that writes numbers as floats)
        numbers = [requests.post(url, data=body, headers={**key, "Idempotency-Key": "run-2"}, timeout=30).status_code
                   for body in ('{"run_id": "run-2", "limit": 1}', '{"run_id": "run-2", "limit": 1.0}',
                                '{"run_id": "run-2", "limit": 1.5}')]
        # payload= picks what must match: another "sent_at" is the same payload, another "order" is not
        orders = [requests.post(f"{url}order", json=body, headers={"Idempotency-Key": "o-1"}, timeout=30)
                  for body in ({"order": 7, "sent_at": 1}, {"order": 7, "sent_at": 2}, {"order": 8, "sent_at": 3})]
    finally:
        server.shutdown()
    assert (first.status_code, first.json()["status"]) == (200, "processed")
    assert (again.status_code, again.json()["status"]) == (200, "duplicate")
    assert (other.status_code, other.json()["status"]) == (422, "payload_mismatch")
    assert "another payload" in other.json()["error"] and other.json()["key"] == "run-1"
    assert numbers == [200, 200, 422]
    assert [(o.status_code, o.json()["status"]) for o in orders] == [(200, "processed"), (200, "duplicate"),
                                                                     (422, "payload_mismatch")]
    assert ran == [{"run_id": "run-1", "job_name": "nightly"}, {"run_id": "run-2", "limit": 1},
                   {"order": 7, "sent_at": 1}]
