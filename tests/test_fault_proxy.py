"""The gRPC fault proxy against the real emulator: each fault kind does what it says, each store call is named."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from concurrent import futures
from datetime import timedelta

import grpc
import pytest
from google.api_core import exceptions as gexc
from google.cloud import firestore

from scheduler_dedup.handler.protocol.idempotency import Idempotency
from scheduler_dedup.handler.stores.firestore.store import FirestoreRunStore
from scheduler_dedup.local.servers.firestore_emulator import FirestoreEmulator
from scheduler_dedup.handler.stores.firestore.wire import FIRESTORE_WIRE, classify
from scheduler_dedup.local.faults.grpc_proxy import Fault, FaultProxy

COLLECTION = "proxy_runs"


@pytest.fixture()
def proxy(emulator: FirestoreEmulator) -> Iterator[FaultProxy]:
    with FaultProxy(upstream=emulator.host, wire=FIRESTORE_WIRE) as p:
        yield p


def _client(host: str, project: str, monkeypatch: pytest.MonkeyPatch) -> firestore.Client:
    """A client whose channel goes to ``host`` (the client reads FIRESTORE_EMULATOR_HOST when built)."""
    with monkeypatch.context() as m:
        m.setenv("FIRESTORE_EMULATOR_HOST", host)
        return firestore.Client(project=project)


@pytest.fixture()
def via_proxy(proxy: FaultProxy, emulator: FirestoreEmulator, monkeypatch: pytest.MonkeyPatch) -> firestore.Client:
    return _client(proxy.host, emulator.project, monkeypatch)


@pytest.fixture()
def direct(emulator: FirestoreEmulator, monkeypatch: pytest.MonkeyPatch) -> firestore.Client:
    return _client(emulator.host, emulator.project, monkeypatch)


def _doc(client: firestore.Client, doc_id: str) -> firestore.DocumentReference:
    return client.collection(COLLECTION).document(doc_id)


def _exists(client: firestore.Client, doc_id: str) -> bool:
    return bool(_doc(client, doc_id).get().exists)


ONE_TRY = {"retry": None, "timeout": 10}  # one RPC, so the client reports exactly what the proxy answered


def test_unavailable_create_is_not_sent(proxy: FaultProxy, via_proxy: firestore.Client,
                                        direct: firestore.Client) -> None:
    proxy.add(Fault(step="claim", kind="unavailable"))
    with pytest.raises(gexc.ServiceUnavailable):
        _doc(via_proxy, "a").create({"status": "in_progress"}, **ONE_TRY)
    assert not _exists(direct, "a")
    (entry,) = proxy.injected
    assert {k: v for k, v in entry.items() if k != "time"} == {
        "step": "claim", "kind": "unavailable", "method": "Commit", "call_index": 0, "document": "a"}
    assert proxy.injected_on("a") == [entry] and proxy.injected_on("b") == []


def test_deadline_create_is_not_sent(proxy: FaultProxy, via_proxy: firestore.Client, direct: firestore.Client) -> None:
    proxy.add(Fault(step="claim", kind="deadline"))
    with pytest.raises(gexc.DeadlineExceeded):
        _doc(via_proxy, "a").create({"status": "in_progress"}, **ONE_TRY)
    assert not _exists(direct, "a")


def test_refuse_answers_the_given_code_without_sending(proxy: FaultProxy, via_proxy: firestore.Client,
                                                       direct: firestore.Client) -> None:
    proxy.add(Fault(step="claim", kind="refuse", code=grpc.StatusCode.INVALID_ARGUMENT))
    with pytest.raises(gexc.InvalidArgument):
        _doc(via_proxy, "a").create({"status": "in_progress"}, **ONE_TRY)
    assert not _exists(direct, "a")


def test_lose_answer_applies_the_create_and_reports_unavailable(proxy: FaultProxy, via_proxy: firestore.Client,
                                                                direct: firestore.Client) -> None:
    proxy.add(Fault(step="claim", kind="lose_answer"))
    with pytest.raises(gexc.ServiceUnavailable):
        _doc(via_proxy, "a").create({"status": "in_progress", "attempt_id": "x"}, **ONE_TRY)
    assert _doc(direct, "a").get().to_dict() == {"status": "in_progress", "attempt_id": "x"}
    # The client library's own retry of that create then meets our write: AlreadyExists.
    proxy.add(Fault(step="claim", kind="lose_answer"))
    with pytest.raises(gexc.AlreadyExists):
        _doc(via_proxy, "b").create({"status": "in_progress"}, timeout=20)
    assert _exists(direct, "b")


def test_lose_answer_on_a_streamed_read(proxy: FaultProxy, via_proxy: firestore.Client,
                                        direct: firestore.Client) -> None:
    _doc(direct, "a").create({"n": 1})
    proxy.add(Fault(step="read", kind="lose_answer"))
    with pytest.raises(gexc.ServiceUnavailable):
        _doc(via_proxy, "a").get(**ONE_TRY)
    assert _doc(via_proxy, "a").get(**ONE_TRY).to_dict() == {"n": 1}


def test_delay_beyond_the_timeout_lands_late(proxy: FaultProxy, via_proxy: firestore.Client,
                                             direct: firestore.Client) -> None:
    proxy.add(Fault(step="claim", kind="delay", delay_seconds=1.5))
    with pytest.raises(gexc.DeadlineExceeded):
        _doc(via_proxy, "a").create({"late": True}, retry=None, timeout=0.5)
    deadline = time.monotonic() + 30
    while not _exists(direct, "a"):  # the held write is forwarded after the caller gave up
        assert time.monotonic() < deadline, "the delayed create never reached the emulator"
        time.sleep(0.1)


def test_nth_and_count_pick_consecutive_matching_calls(proxy: FaultProxy, via_proxy: firestore.Client,
                                                       direct: firestore.Client) -> None:
    _doc(direct, "a").create({"n": 1})
    proxy.add(Fault(step="read", kind="unavailable", nth=2, count=2))
    outcomes = []
    for _ in range(5):
        try:
            _doc(via_proxy, "a").get(**ONE_TRY)
            outcomes.append("ok")
        except gexc.ServiceUnavailable:
            outcomes.append("unavailable")
    assert outcomes == ["ok", "unavailable", "unavailable", "ok", "ok"]
    assert [i["call_index"] for i in proxy.injected] == [1, 2]


def test_observers_see_each_call_its_fault_and_how_long_it_was_held(proxy: FaultProxy,
                                                                    via_proxy: firestore.Client) -> None:
    seen: list[tuple[str, str, str | None, float]] = []
    proxy.observe(lambda call, kind, seconds: seen.append((call.step, call.document, kind, seconds)))
    proxy.add(Fault(step="claim", kind="delay", delay_seconds=0.5))
    _doc(via_proxy, "a").create({"n": 1}, **ONE_TRY)
    _doc(via_proxy, "a").get(**ONE_TRY)
    assert [(step, doc, kind) for step, doc, kind, _ in seen] == [("claim", "a", "delay"), ("read", "a", None)]
    assert seen[0][3] >= 0.5


def test_method_filter_and_document_filter(proxy: FaultProxy, via_proxy: firestore.Client) -> None:
    proxy.add(Fault(method="Commit", document="b", kind="unavailable"))
    _doc(via_proxy, "a").set({"n": 1}, **ONE_TRY)
    _doc(via_proxy, "a").get(**ONE_TRY)
    with pytest.raises(gexc.ServiceUnavailable):
        _doc(via_proxy, "b").set({"n": 1}, **ONE_TRY)


def test_store_steps_are_classified(proxy: FaultProxy, emulator: FirestoreEmulator,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    store = FirestoreRunStore(_client(proxy.host, emulator.project, monkeypatch), COLLECTION, timeout_seconds=10)
    t0 = store.create("r", {"status": "in_progress", "attempt_id": "a1"})
    assert t0 is not None
    record = store.get("r")
    assert record is not None
    t1 = store.update_if_unchanged("r", {"heartbeat_at": firestore.SERVER_TIMESTAMP,
                                         "lease_expires": store.server_now() + timedelta(seconds=3)}, t0)
    assert t1 is not None
    t2 = store.update_if_unchanged("r", {"status": "in_progress", "attempt_id": "a2"}, t1)
    assert t2 is not None
    t3 = store.update_if_unchanged("r", {"status": "failed", "error": "x"}, t2)
    assert t3 is not None
    t4 = store.update_if_unchanged("r", {"status": "completed", "result": None}, t3)
    assert t4 is not None
    assert store.delete_if_unchanged("r", t4)
    list(store.client.collection(COLLECTION).where(filter=firestore.FieldFilter("status", "==", "x")).stream())
    assert proxy.calls == [("claim", "Commit"), ("read", "BatchGetDocuments"), ("renewal", "Commit"),
                           ("takeover", "Commit"), ("failure", "Commit"), ("completion", "Commit"),
                           ("release", "Commit"), ("query", "RunQuery")]


def test_the_idempotency_protocol_calls_are_classified(proxy: FaultProxy, emulator: FirestoreEmulator,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A claim, its renewals and its completion, as the handler's own code issues them."""
    store = FirestoreRunStore(_client(proxy.host, emulator.project, monkeypatch), COLLECTION, timeout_seconds=10)
    idem = Idempotency(store, lease_seconds=1.5)

    def work(attempt_id: str) -> str:
        deadline = time.monotonic() + 30
        while ("renewal", "Commit") not in proxy.calls:  # hold the lease until it was renewed once
            assert time.monotonic() < deadline
            time.sleep(0.05)
        return "done"

    run_id = uuid.uuid4().hex
    assert idem.execute(run_id, work).outcome.value == "processed"
    steps = [step for step, _ in proxy.calls]
    assert steps[0] == "claim" and steps[-1] == "completion" and "renewal" in steps
    assert set(steps) <= {"claim", "renewal", "read", "completion"}


def test_random_faults_are_replayed_by_their_seed(proxy: FaultProxy, via_proxy: firestore.Client,
                                                  direct: firestore.Client) -> None:
    for name in "abcde":
        _doc(direct, name).create({"n": 1})

    def play() -> list[tuple[str, str]]:
        proxy.clear()
        proxy.set_random(rate=0.3, seed=42, kinds=("unavailable", "refuse"), steps=("read",))
        for _ in range(10):
            for name in "abcde":
                try:
                    _doc(via_proxy, name).get(**ONE_TRY)
                except (gexc.ServiceUnavailable, gexc.FailedPrecondition):
                    pass
        return [(i["document"], i["kind"]) for i in proxy.injected]

    first = play()
    assert 5 <= len(first) <= 30  # 50 reads at 30 %
    assert {kind for _, kind in first} == {"unavailable", "refuse"}
    assert play() == first


def test_invocation_metadata_is_forwarded() -> None:
    """The proxy passes the caller's metadata (e.g. the emulator's bearer token, routing params) upstream."""

    class Echo(grpc.GenericRpcHandler):
        def service(self, details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler:
            def echo(request: bytes, context: grpc.ServicerContext) -> bytes:
                md = dict(context.invocation_metadata())
                return f"{md.get('x-goog-request-params')}|{md.get('authorization')}".encode()
            return grpc.unary_unary_rpc_method_handler(echo)

    upstream = grpc.server(futures.ThreadPoolExecutor(max_workers=2), handlers=[Echo()])
    port = upstream.add_insecure_port("127.0.0.1:0")
    upstream.start()
    try:
        with FaultProxy(upstream=f"127.0.0.1:{port}", wire=FIRESTORE_WIRE) as p, grpc.insecure_channel(p.host) as channel:
            call = channel.unary_unary("/google.firestore.v1.Firestore/GetDocument")
            answer = call(b"", metadata=[("x-goog-request-params", "database=projects/p/databases/d"),
                                         ("authorization", "Bearer owner")], timeout=10)
            assert answer == b"database=projects/p/databases/d|Bearer owner"
            assert p.calls == [("read", "GetDocument")]
    finally:
        upstream.stop(None)


def test_stop_releases_delayed_calls(emulator: FirestoreEmulator, monkeypatch: pytest.MonkeyPatch) -> None:
    proxy = FaultProxy(upstream=emulator.host, wire=FIRESTORE_WIRE).start()
    client = _client(proxy.host, emulator.project, monkeypatch)
    proxy.add(Fault(step="read", kind="delay", delay_seconds=600))
    errors: list[BaseException] = []

    def read() -> None:
        try:
            _doc(client, "a").get(retry=None, timeout=600)
        except Exception as exc:  # noqa: BLE001 - recorded for the assertion
            errors.append(exc)

    reader = threading.Thread(target=read)
    reader.start()
    deadline = time.monotonic() + 30
    while not proxy.injected:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    proxy.stop()
    reader.join(timeout=60)
    assert not reader.is_alive()
    assert errors and isinstance(errors[0], gexc.GoogleAPICallError)


def test_classify_ignores_undecodable_requests() -> None:
    assert classify("Commit", b"\xff\xff\xff").step == "other"
    assert classify("Rollback", b"").step == "other"


def test_fault_rejects_unknown_kinds_and_steps() -> None:
    with pytest.raises(ValueError, match="kind"):
        Fault(kind="explode")
    with pytest.raises(ValueError, match="step"):
        Fault(kind="unavailable", step="commit")
