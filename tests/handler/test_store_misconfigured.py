"""A store that refuses every call as it is set up is a configuration error, not a retryable blip: over real HTTP
through handler processes, on the Firestore emulator and the Spanner emulator (Google's own answers injected by the
gRPC fault proxy, or the emulator's own for a missing database) and on a real redis-server with an ACL user that
lacks a permission.

Each case checks what a user sees: every delivery answers 500 ``store_misconfigured`` with a ``fix`` naming what to
change, the job never runs, the handler logs the cause as ERROR exactly once across its start-up probe and several
deliveries (WARNING after), the run check answers ``store_misconfigured`` too, and once the store is fixed the next
delivery runs the job.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import requests

from scheduler_dedup.handler.core.paths import CHECK_LOCATION_GUARD, CHECK_PATH
from scheduler_dedup.handler.stores.firestore.wire import FIRESTORE_WIRE
from scheduler_dedup.local.faults.grpc_proxy import Fault, FaultProxy
from scheduler_dedup.local.servers.firestore_emulator import FirestoreEmulator
from scheduler_dedup.local.servers.handlers import AppEngineServer, HandlerServer
from scheduler_dedup.local.servers.redis_server import RedisServer
from scheduler_dedup.local.servers.spanner_emulator import SpannerEmulator

from .conftest import COLLECTION, Harness, deliver, scheduler_headers

T = ("2026-11-02T08:00:00Z", "2026-11-02T08:15:00Z", "2026-11-02T08:30:00Z")
SCHEDULE = {"DEDUP_SCHEDULE": "*/15 * * * *", "DEDUP_TIME_ZONE": "Etc/UTC"}
PROJECT = "demo-scheduler-dedup"
#: Google's answers, as its clients report them (issue threads of firebase-tools, quarkus-google-cloud-services,
#: nodejs-firestore, java-spanner; see the docstrings of the stores' ``config_fix``).
DATASTORE_MODE = ("The Cloud Firestore API is not available for Firestore in Datastore Mode database "
                  f"projects/{PROJECT}/databases/(default).")
NO_DATABASE = (f"The database (default) does not exist for project {PROJECT} Please visit "
               f"https://console.cloud.google.com/datastore/setup?project={PROJECT} to add a Cloud Datastore or Cloud "
               "Firestore database.")
NO_PERMISSION = "Missing or insufficient permissions."


def _lines(server: HandlerServer | AppEngineServer) -> list[dict[str, Any]]:
    return [json.loads(line) for line in server.log().splitlines() if line.startswith("{")]


def _misconfigured_lines(server: HandlerServer | AppEngineServer, severity: str) -> list[dict[str, Any]]:
    return [line for line in _lines(server) if line.get("outcome") == "store_misconfigured"
            and line["severity"] == severity]


def _run_check(server: HandlerServer | AppEngineServer) -> requests.Response:
    headers = {"Content-Type": "application/json", "X-Dedup-Location": CHECK_LOCATION_GUARD,
               **scheduler_headers("cfg-watchdog", "2026-11-02T09:05:00Z")}
    body = {"job_name": "cfg", "grace_seconds": 300, "window_seconds": 3600}
    return requests.post(server.url.rstrip("/") + CHECK_PATH, headers=headers, data=json.dumps(body), timeout=60)


def _assert_misconfigured(harness: Harness, server: HandlerServer | AppEngineServer, fix_words: tuple[str, ...],
                          *, run_check: bool = True) -> None:
    """Three deliveries of three runs answer store_misconfigured with a fix naming ``fix_words``, nothing ran, and the
    ERROR line appears exactly once (start-up probe included); the run check answers the same."""
    for stamp in T:
        answer = deliver(server.url, scheduler_headers("cfg", stamp))
        assert answer.status_code == 500, answer.text
        body = answer.json()
        assert body["status"] == "store_misconfigured" and body["executed"] is False, body
        assert all(word in body["fix"] for word in fix_words), body["fix"]
    assert harness.starts() == [], "the job never ran"
    if run_check:
        check = _run_check(server)
        assert check.status_code == 500 and check.json()["status"] == "store_misconfigured", check.text
        assert all(word in check.json()["fix"] for word in fix_words), check.text
        assert not [line for line in _lines(server) if line.get("event") == "run_check"], "no heartbeat"
    errors = _misconfigured_lines(server, "ERROR")
    assert len(errors) == 1, server.log()[-4000:]
    assert all(word in errors[0]["message"] for word in fix_words), errors[0]
    assert len(_misconfigured_lines(server, "WARNING")) == len(T) + int(run_check), server.log()[-4000:]


@pytest.fixture()
def proxy(emulator: FirestoreEmulator) -> Iterator[FaultProxy]:
    with FaultProxy(upstream=emulator.host, wire=FIRESTORE_WIRE) as p:
        yield p


@pytest.mark.parametrize(("code", "message", "fix_words"), [
    (grpc.StatusCode.FAILED_PRECONDITION, DATASTORE_MODE, ("Datastore mode", "Native mode", "DEDUP_DATABASE")),
    (grpc.StatusCode.NOT_FOUND, NO_DATABASE, ("does not exist", "DEDUP_DATABASE")),
    (grpc.StatusCode.PERMISSION_DENIED, NO_PERMISSION, ("roles/datastore.user",)),
], ids=["datastore-mode", "no-database", "no-role"])
def test_a_misconfigured_firestore_database_is_named_once_and_never_runs_the_job(
        harness: Harness, proxy: FaultProxy, code: grpc.StatusCode, message: str, fix_words: tuple[str, ...]) -> None:
    proxy.add(Fault(kind="refuse", code=code, message=message, count=1_000_000))  # every call, start-up probe too
    server = harness.server(FIRESTORE_EMULATOR_HOST=proxy.host, **SCHEDULE)
    startup = [line for line in _lines(server) if "start-up check" in line.get("message", "")]
    assert [line["severity"] for line in startup] == ["ERROR"], server.log()[-3000:]
    _assert_misconfigured(harness, server, fix_words)

    proxy.clear()  # the fix: a Native-mode database, the database created, the role granted
    fixed = deliver(server.url, scheduler_headers("cfg", T[0]))
    assert fixed.status_code == 200 and fixed.json()["status"] == "processed", fixed.text
    assert len(harness.starts()) == 1


def test_a_missing_index_is_still_a_plain_store_error(harness: Harness, proxy: FaultProxy) -> None:
    """A FAILED_PRECONDITION that is not about the database's mode stays ``store_error``: only configuration
    answers are ``store_misconfigured``."""
    server = harness.server(FIRESTORE_EMULATOR_HOST=proxy.host)
    proxy.add(Fault(step="claim", kind="refuse", message="The query requires an index.", count=100))
    answer = deliver(server.url, scheduler_headers("cfg", T[0]))
    assert answer.status_code == 500 and answer.json()["status"] == "store_error", answer.text
    assert _misconfigured_lines(server, "ERROR") == []


@pytest.fixture(scope="module")
def spanner() -> Iterator[SpannerEmulator]:
    with SpannerEmulator() as server:
        server.prepare(COLLECTION)
        yield server


def test_a_spanner_database_that_does_not_exist_is_named_once(harness: Harness, spanner: SpannerEmulator) -> None:
    """The emulator's own NOT_FOUND for a database id nobody created."""
    server = harness.server(**{**spanner.endpoint_env(), "DEDUP_SPANNER_DATABASE": "no-such-db"})
    _assert_misconfigured(harness, server, ("does not exist", "DEDUP_SPANNER_DATABASE"), run_check=False)


def test_a_spanner_identity_without_its_role_is_named_once(harness: Harness, spanner: SpannerEmulator) -> None:
    denied = (f"Caller is missing IAM permission spanner.sessions.create on resource projects/{spanner.project}/"
              f"instances/{spanner.instance}/databases/{spanner.database}.")
    with FaultProxy(upstream=spanner.host, wire=spanner.wire) as proxy:
        proxy.add(Fault(kind="refuse", code=grpc.StatusCode.PERMISSION_DENIED, message=denied, count=1_000_000))
        server = harness.server(**spanner.endpoint_env(proxy.host), **SCHEDULE)
        _assert_misconfigured(harness, server, ("roles/spanner.databaseUser",))
        proxy.clear()
        fixed = deliver(server.url, scheduler_headers("cfg", T[1]))
    assert fixed.status_code == 200 and fixed.json()["status"] == "processed", fixed.text


@pytest.fixture()
def own_redis() -> Iterator[RedisServer]:
    with RedisServer() as server:
        yield server


def test_a_redis_acl_user_without_scripting_is_named_once(harness: Harness, own_redis: RedisServer,
                                                          tmp_path: Path) -> None:
    password = secrets.token_urlsafe(16)
    own_redis.command("ACL", "SETUSER", "app", "on", f">{password}", "~*", "+@all", "-@scripting")
    auth = tmp_path / "app-auth"
    auth.write_text(password + "\n")
    env = {**own_redis.endpoint_env(), "DEDUP_REDIS_URL": f"redis://app@{own_redis.host}/0",
           "DEDUP_REDIS_AUTH_FILE": str(auth), "DEDUP_STORE_TIMEOUT_SECONDS": "2"}
    server = harness.server(**env)
    _assert_misconfigured(harness, server, ("ACL user app",), run_check=False)

    own_redis.command("ACL", "SETUSER", "app", "+@scripting")  # the fix
    fixed = deliver(server.url, scheduler_headers("cfg", T[0]))
    assert fixed.status_code == 200 and fixed.json()["status"] == "processed", fixed.text


def test_a_redis_auth_string_refused_after_reading_the_file_again_is_named_once(
        harness: Harness, own_redis: RedisServer, tmp_path: Path) -> None:
    auth = tmp_path / "stale-auth"
    auth.write_text("not-the-instance-auth-string\n")
    env = {**own_redis.endpoint_env(), "DEDUP_REDIS_AUTH_FILE": str(auth), "DEDUP_STORE_TIMEOUT_SECONDS": "2"}
    server = harness.server(**env)
    _assert_misconfigured(harness, server, ("DEDUP_REDIS_AUTH_FILE",), run_check=False)
