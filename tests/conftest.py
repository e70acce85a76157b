"""Shared fixtures: one real Firestore emulator and one real redis-server per test session, wiped between tests that
ask for it."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

pytest.register_assert_rewrite("tests.server_watch", "tests.missing_tools")  # plugins this module also imports

from scheduler_dedup.local.servers.firestore_emulator import FirestoreEmulator
from scheduler_dedup.local.servers.handlers import HandlerServer
from scheduler_dedup.local.servers.redis_server import RedisServer
from tests import server_watch
from tests.costs import pytest_collection_modifyitems, pytest_configure, pytest_runtest_protocol  # noqa: F401 (hooks)

if TYPE_CHECKING:
    import redis as redispy

pytest_plugins = ["tests.server_watch", "tests.missing_tools"]

PROJECT = "demo-scheduler-dedup"

# A pytest-xdist worker is started with COLUMNS=80 and LINES=24, a serial run with neither: the commands' tables and
# messages wrap at $COLUMNS, so every run starts without them and a test that wants a width sets one.
for _name in ("COLUMNS", "LINES"):
    os.environ.pop(_name, None)


#: The handler servers the running test started: on its failure, their threads' stacks and logs go in the report.
_handlers: list[HandlerServer] = []
_start_handler = HandlerServer.start


def _start_and_remember(self: HandlerServer) -> HandlerServer:
    _handlers.append(self)
    return _start_handler(self)


HandlerServer.start = _start_and_remember  # type: ignore[method-assign]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """A failed test gets a section per handler server it started that still runs: its log, ending with the stack of
    each thread of its worker, so a handler that stopped answering says what it waits on."""
    outcome = yield
    report = outcome.get_result()
    if report.failed and call.when == "call":
        for server in _handlers:
            if server.proc is not None and server.proc.poll() is None:
                report.sections.append((f"handler {server.url} (its log, then its threads' stacks)",
                                        server.dump_stacks()[-20000:]))
            elif server.proc is not None:  # it exited (or was killed) during the test: say how, and its last lines
                report.sections.append((f"handler {server.url} of worker {server_watch.worker()} exited with "
                                        f"{server.proc.returncode} (its log ends)", server.log()[-5000:]))
    if call.when == "teardown":
        _handlers.clear()


@pytest.fixture(scope="session")
def firestore_emulator() -> Iterator[FirestoreEmulator]:
    """The running emulator; ``FIRESTORE_EMULATOR_HOST`` and ``GOOGLE_CLOUD_PROJECT`` point at it."""
    with FirestoreEmulator(project=PROJECT) as emulator:
        server_watch.watch(emulator, "firestore_emulator", "emulator")
        old = {k: os.environ.get(k) for k in ("FIRESTORE_EMULATOR_HOST", "GOOGLE_CLOUD_PROJECT")}
        os.environ["FIRESTORE_EMULATOR_HOST"] = emulator.host
        os.environ["GOOGLE_CLOUD_PROJECT"] = PROJECT
        try:
            yield emulator
        finally:
            server_watch.unwatch(emulator)
            for key, value in old.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value


@pytest.fixture()
def emulator(firestore_emulator: FirestoreEmulator) -> FirestoreEmulator:
    """The session's emulator, wiped clean before the test."""
    server_watch.ready(firestore_emulator)
    firestore_emulator.wipe()
    return firestore_emulator


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """A running redis-server (no persistence, noeviction, AUTH on) for the whole session."""
    with RedisServer(project=PROJECT) as server:
        server_watch.watch(server, "redis_server", "redis")
        yield server
        server_watch.unwatch(server)


@pytest.fixture()
def redis(redis_server: RedisServer) -> RedisServer:
    """The session's redis-server, flushed before the test."""
    server_watch.ready(redis_server)
    redis_server.wipe()
    return redis_server


def _redis_py_client(server: RedisServer, **kwargs: Any) -> "redispy.Redis":
    import redis as redispy

    if server.tls is not None:
        kwargs.update(ssl=True, ssl_ca_certs=server.tls[2], ssl_check_hostname=False)
    return redispy.Redis(host="127.0.0.1", port=server.port, password=server.password, **kwargs)


@pytest.fixture()
def redis_client() -> Callable[..., "redispy.Redis"]:
    """``redis_client(server, **kwargs)``: a redis-py client of a local redis-server, to look at what the store wrote."""
    return _redis_py_client
