"""What the Redis store promises beyond the contract, on a real redis-server: exact key expiry with indexes that go
with their records, a clock that never goes back, one round trip per duplicate, WAIT on the writes that decide a
run where there is a replica, AUTH from a file."""

from __future__ import annotations

import os
import signal
import time
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from scheduler_dedup.handler.config.settings import Settings
from scheduler_dedup.handler.core.errors import StoreRefusedError, StoreUnavailableError
from scheduler_dedup.handler.protocol.idempotency import Idempotency, Outcome
from scheduler_dedup.handler.stores import open_store
from scheduler_dedup.handler.stores.base import SERVER_TIME, Increment
from scheduler_dedup.handler.stores.redis.store import RedisRunStore
from scheduler_dedup.handler.stores.redis.config import parse_redis_url
from scheduler_dedup.handler.stores.redis.values import micros
from scheduler_dedup.local.faults.grpc_proxy import Fault
from scheduler_dedup.local.servers.redis_server import RedisServer

pytestmark = pytest.mark.server  # tests/costs.py

T0 = datetime(2026, 11, 30, tzinfo=timezone.utc)
C = "redis_runs"


def _store(server: RedisServer, wait_timeout_ms: int = 0, **kwargs: object) -> RedisRunStore:
    return RedisRunStore(parse_redis_url(f"redis://{server.host}/0"), C, 5.0, password=server.password,
                         wait_timeout_ms=wait_timeout_ms)


def _fields(job: str, when: datetime, expire_in: float, attempt: str = "a" * 32) -> dict[str, object]:
    return {"status": "in_progress", "attempt_id": attempt, "lease_seconds": 30.0, "job_name": job,
            "schedule_time": when, "claimed_at": SERVER_TIME, "attempts": Increment(1),
            "expire_at": datetime.now(timezone.utc) + timedelta(seconds=expire_in)}


def _keys(server: RedisServer) -> set[str]:
    return {k.decode() for k in server.command("KEYS", "{" + C + "}:*")}


def test_a_record_and_its_index_entries_expire_at_expire_at(redis: RedisServer, redis_client: Any) -> None:
    store = _store(redis)
    run_id = uuid.uuid4().hex
    assert store.create(run_id, _fields("nightly", T0, expire_in=1.0)) is not None
    with redis_client(redis) as client:
        record_ms = client.pexpiretime(f"{{{C}}}:run:{run_id}")
        for index in ("job:nightly", "ids", "exp"):
            assert client.pexpiretime(f"{{{C}}}:{index}") == record_ms, index
    assert [len(p) for p in store.job_run_pages("nightly", since=None, until=None, page_size=5)] == [1]
    deadline = time.monotonic() + 10
    while store.get(run_id) is not None:
        assert time.monotonic() < deadline, "the record outlived its expire_at"
        time.sleep(0.05)
    assert _keys(redis) == {f"{{{C}}}:clock"}, "an index outlived the records it held"
    assert list(store.job_run_pages("nightly", since=None, until=None, page_size=5)) == [[]]
    assert store.runs_with_id_prefix(run_id[:6], 5) == []


def test_entries_of_expired_records_are_pruned_while_the_index_lives_on(redis: RedisServer, redis_client: Any) -> None:
    store = _store(redis)
    short, long = uuid.uuid4().hex, uuid.uuid4().hex
    assert store.create(short, _fields("j", T0, expire_in=0.5)) is not None
    assert store.create(long, _fields("j", T0 + timedelta(hours=1), expire_in=600)) is not None
    time.sleep(1.0)
    with redis_client(redis) as client:
        assert client.zscore(f"{{{C}}}:job:j", short) is not None  # nobody wrote since it expired
        assert store.create(uuid.uuid4().hex, _fields("other", T0, expire_in=600)) is not None  # a create prunes
        assert client.zscore(f"{{{C}}}:job:j", short) is None
        assert client.zscore(f"{{{C}}}:ids", short) is None
        assert client.zcard(f"{{{C}}}:exp") == 2
        assert client.zscore(f"{{{C}}}:job:j", long) is not None


def test_versions_never_go_back_even_if_the_servers_clock_does(redis: RedisServer, redis_client: Any) -> None:
    store = _store(redis)
    ahead = datetime.now(timezone.utc) + timedelta(seconds=30)
    with redis_client(redis) as client:  # as if the clock had stepped back 30 s since the last write
        client.set(f"{{{C}}}:clock", str(micros(ahead)))
    run_id = uuid.uuid4().hex
    v1 = store.create(run_id, _fields("j", T0, expire_in=60))
    assert v1 is not None and v1 > ahead
    v2 = store.update_if_unchanged(run_id, {"heartbeat_at": SERVER_TIME}, v1)
    assert v2 is not None and v2 > v1
    record = store.get(run_id)
    assert record is not None and record.read_time >= record.update_time == v2
    assert record.data["heartbeat_at"] == v2


def test_a_duplicate_on_another_instance_costs_one_round_trip(redis: RedisServer) -> None:
    first, other = _store(redis), _store(redis)
    warm = uuid.uuid4().hex
    for store in (first, other):  # load the scripts (a process's first call of each costs SCRIPT LOAD once)
        Idempotency(store, lease_seconds=30).execute(warm, lambda a: "warm")
        store.get(warm)
    run_id = uuid.uuid4().hex
    before = first.round_trips
    assert Idempotency(first, lease_seconds=30).execute(run_id, lambda a: "ok").outcome is Outcome.PROCESSED
    assert first.round_trips - before == 2  # claim, completion
    before = other.round_trips
    again = Idempotency(other, lease_seconds=30).execute(run_id, lambda a: "never")
    assert again.outcome is Outcome.DUPLICATE and again.result == "ok"
    assert other.round_trips - before == 1  # the claim's script answered with the record it found


@pytest.fixture()
def replica(redis: RedisServer) -> Iterator[RedisServer]:
    with RedisServer(replica_of=redis.host, password=redis.password) as server:
        server.wait_until_replicating()
        yield server


def _wait_calls(server: RedisServer) -> int:
    stats = server.info("commandstats").get("cmdstat_wait", "")
    return int(dict(p.split("=", 1) for p in stats.split(",") if "=" in p).get("calls", 0))


def _reset_stats(server: RedisServer) -> None:
    server.command("CONFIG", "RESETSTAT")


def test_decisive_writes_wait_for_a_replica_and_others_do_not(redis: RedisServer, replica: RedisServer, redis_client: Any) -> None:
    _reset_stats(redis)
    # a replica that answers: a generous WAIT timeout, so a loaded machine's slow acknowledgement still counts
    store = _store(redis, wait_timeout_ms=3000)
    run_id = uuid.uuid4().hex
    v = store.create(run_id, _fields("j", T0, expire_in=60))  # a claim: WAIT
    assert v is not None and _wait_calls(redis) == 1
    with redis_client(replica) as client:
        assert client.exists(f"{{{C}}}:run:{run_id}"), "WAIT returned before the replica had the claim"
    v = store.update_if_unchanged(run_id, {"heartbeat_at": SERVER_TIME}, v)  # a renewal: no WAIT
    assert v is not None and _wait_calls(redis) == 1
    assert store.update_if_unchanged(run_id, {"status": "completed"}, v) is not None  # a completion: WAIT
    assert _wait_calls(redis) == 2 and store.unreplicated_writes == 0
    os.kill(replica.pid or 0, signal.SIGSTOP)  # the replica stops acknowledging
    try:
        store = _store(redis, wait_timeout_ms=300)
        started = time.monotonic()
        other = uuid.uuid4().hex
        with pytest.raises(StoreUnavailableError, match="no replica acknowledged"):  # unanswered: read to decide
            store.create(other, _fields("j", T0, expire_in=60))
        assert time.monotonic() - started >= 0.3  # it waited its WAIT timeout for the replica
        assert store.unreplicated_writes == 1
        record = store.get(other)
        assert record is not None and record.attempt_id == "a" * 32  # in place on the primary it reached
        runs: list[str] = []  # the protocol reads its own claim back and runs the job once
        outcome = Idempotency(store, lease_seconds=30).execute(uuid.uuid4().hex, lambda a: runs.append(a) or "ok")
        assert outcome.outcome is Outcome.FENCED or outcome.outcome is Outcome.PROCESSED
        assert len(runs) == 1
    finally:
        os.kill(replica.pid or 0, signal.SIGCONT)


@pytest.mark.parametrize("step", ["claim", "completion"])
def test_a_decisive_write_whose_answer_was_lost_still_waits_for_a_replica(redis: RedisServer, replica: RedisServer,
                                                                          step: str) -> None:
    """A claim (or completion) that committed with its answer lost is found again by the retry or the protocol's read:
    that write, too, counts only once a replica acknowledged it (a ``WAIT`` on a connection that wrote nothing since
    acknowledges nothing), so a stopped replica shows as one more unreplicated write. (That a live replica has the
    claim before the job runs is the test above; a 300 ms WAIT on a loaded machine may time out, so not here.)"""
    with redis.fault_proxy() as proxy:
        store = RedisRunStore(parse_redis_url(f"redis://{proxy.host}/0"), C, 5.0, password=redis.password,
                              wait_timeout_ms=300)
        Idempotency(store, lease_seconds=30).execute(uuid.uuid4().hex, lambda a: "warm")  # the connection is open
        os.kill(replica.pid or 0, signal.SIGSTOP)  # the replica stops acknowledging
        try:
            for count in (1, 3):  # once lost, then every try lost (the store's retries give up; the protocol reads)
                proxy.add(Fault(step=step, kind="lose_answer", count=count))
                before = store.unreplicated_writes
                runs: list[str] = []
                outcome = Idempotency(store, lease_seconds=30).execute(uuid.uuid4().hex,
                                                                       lambda a: runs.append(a) or "ok")
                assert len(runs) == 1 and outcome.outcome in (Outcome.PROCESSED, Outcome.FENCED)
                assert store.unreplicated_writes - before == 2, "the write whose answer was lost never waited"
        finally:
            os.kill(replica.pid or 0, signal.SIGCONT)


def test_without_replicas_nothing_waits(redis: RedisServer) -> None:
    _reset_stats(redis)
    store = _store(redis, wait_timeout_ms=2000)
    started = time.monotonic()
    assert store.create(uuid.uuid4().hex, _fields("j", T0, expire_in=60)) is not None
    assert time.monotonic() - started < 1.5 and _wait_calls(redis) == 0


def test_the_auth_string_comes_from_its_file_and_a_wrong_one_is_refused(redis: RedisServer, tmp_path: Path) -> None:
    env = {**redis.endpoint_env(), "DEDUP_COLLECTION": C}
    store = open_store(Settings.from_env(env))
    assert store.create(uuid.uuid4().hex, _fields("j", T0, expire_in=60)) is not None
    wrong = tmp_path / "auth"
    wrong.write_text("not-the-auth-string\n")
    bad = open_store(Settings.from_env({**env, "DEDUP_REDIS_AUTH_FILE": str(wrong)}))
    with pytest.raises(StoreRefusedError) as caught:
        bad.get("x")
    assert "DEDUP_REDIS_AUTH_FILE" in caught.value.hint
    with pytest.raises(StoreRefusedError, match="DEDUP_REDIS_AUTH_FILE"):
        open_store(Settings.from_env({**env, "DEDUP_REDIS_AUTH_FILE": str(tmp_path / "missing")}))
    for name, data in (("binary", b"\xff\xfe\x00auth"), ("blank", b" \n"), ("empty", b"")):
        (tmp_path / name).write_bytes(data)  # a secret version uploaded in the wrong form, or with no AUTH string
        with pytest.raises(StoreRefusedError, match="DEDUP_REDIS_AUTH_FILE"):
            open_store(Settings.from_env({**env, "DEDUP_REDIS_AUTH_FILE": str(tmp_path / name)}))
    none = open_store(Settings.from_env({k: v for k, v in env.items() if k != "DEDUP_REDIS_AUTH_FILE"}))
    with pytest.raises(StoreRefusedError):  # the server requires AUTH
        none.get("x")


def _certificates(folder: Path) -> tuple[str, str, str]:
    """A CA and a server certificate it signed for 127.0.0.1 (PEM files), as Memorystore's per-instance server CA."""
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.now(timezone.utc)

    def issue(subject: str, key: ec.EllipticCurvePrivateKey, issuer: x509.Name, signer: ec.EllipticCurvePrivateKey,
              ca: bool) -> x509.Certificate:
        builder = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
                   .issuer_name(issuer).public_key(key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(now - timedelta(minutes=5)).not_valid_after(now + timedelta(days=1))
                   .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
                   .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(signer.public_key()),
                                  critical=False))  # as real CAs: tells two CAs of one name apart in a bundle
        if ca:
            builder = builder.add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        if not ca:
            builder = builder.add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                                            critical=False)
        return builder.sign(signer, hashes.SHA256())

    ca_key, server_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca = issue("test server CA", ca_key, x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test server CA")]), ca_key,
               True)
    server = issue("redis", server_key, ca.subject, ca_key, False)
    paths = (folder / "server.pem", folder / "server.key", folder / "ca.pem")
    paths[0].write_bytes(server.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(server_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                  serialization.NoEncryption()))
    paths[2].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    return str(paths[0]), str(paths[1]), str(paths[2])


def test_rediss_with_the_server_ca_file_and_a_foreign_ca_is_refused(tmp_path: Path) -> None:
    """Memorystore's transit encryption: rediss:// verified against the instance's CA (DEDUP_REDIS_CA_FILE)."""
    (tmp_path / "ours").mkdir()
    (tmp_path / "other").mkdir()
    files = _certificates(tmp_path / "ours")
    with RedisServer(tls=files) as server:
        env = {**server.endpoint_env(), "DEDUP_COLLECTION": C}
        assert env["DEDUP_REDIS_URL"].startswith("rediss://")
        store = open_store(Settings.from_env(env))
        runs: list[str] = []
        outcome = Idempotency(store, lease_seconds=30).execute(uuid.uuid4().hex, lambda a: runs.append(a) or "ok")
        assert outcome.outcome is Outcome.PROCESSED and len(runs) == 1
        foreign = _certificates(tmp_path / "other")[2]
        stranger = open_store(Settings.from_env({**env, "DEDUP_REDIS_CA_FILE": foreign, "DEDUP_STORE_TIMEOUT_SECONDS": "2"}))
        with pytest.raises(StoreRefusedError) as refused:  # the handshake fails at once: nothing is sent, no retry
            stranger.get("x")
        assert "DEDUP_REDIS_CA_FILE" in refused.value.hint
        bundle = tmp_path / "bundle.pem"  # a CA rotation: the file holds the next CA and the current one
        bundle.write_text(Path(foreign).read_text() + Path(files[2]).read_text())
        assert open_store(Settings.from_env({**env, "DEDUP_REDIS_CA_FILE": str(bundle)})).get("x") is None
        plain = open_store(Settings.from_env({**{k: v for k, v in env.items() if k != "DEDUP_REDIS_CA_FILE"},
                                              "DEDUP_REDIS_URL": env["DEDUP_REDIS_URL"].replace("rediss", "redis"),
                                              "DEDUP_STORE_TIMEOUT_SECONDS": "2"}))
        with pytest.raises(StoreUnavailableError):  # a TLS port does not answer plain RESP
            plain.get("x")


def test_a_refusal_while_connecting_is_the_contracts_refusal(redis: RedisServer) -> None:
    """An ACL user the connection's set-up commands (``CLIENT SETNAME``, ``SELECT``) are refused to: StoreRefusedError
    naming the endpoint, never redis-py's own exception."""
    user = "limited-" + uuid.uuid4().hex[:8]
    redis.command("ACL", "SETUSER", user, "on", ">pw-" + user, "~*", "&*", "+@all", "-client|setname")
    try:
        store = RedisRunStore(parse_redis_url(f"redis://{user}@{redis.host}/0"), C, 2.0, password="pw-" + user)
        with pytest.raises(StoreRefusedError, match="client") as refused:
            store.get(uuid.uuid4().hex)
        assert f"ACL user {user} of DEDUP_REDIS_URL" in refused.value.hint
    finally:
        redis.command("ACL", "DELUSER", user)


def test_a_call_ends_within_the_store_timeout_even_while_connecting() -> None:
    """A server that drops connections and then accepts one it never answers: the call's retries and the new
    connection's set-up together end by the store timeout, not a whole store timeout after the last try began."""
    import socket
    import threading

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    started = time.monotonic()
    held: list[socket.socket] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            if time.monotonic() - started < 1.5:
                conn.close()  # dropped at once: the store retries
            else:
                held.append(conn)  # accepted, never answered

    threading.Thread(target=serve, daemon=True).start()
    try:
        store = RedisRunStore(parse_redis_url(f"redis://127.0.0.1:{listener.getsockname()[1]}/0"), C, 2.0,
                              password="x")
        with pytest.raises(StoreUnavailableError):
            store.get(uuid.uuid4().hex)
        assert time.monotonic() - started < 2.0 + 0.5, "the call outlived DEDUP_STORE_TIMEOUT_SECONDS"
    finally:
        listener.close()
        for conn in held:
            conn.close()
