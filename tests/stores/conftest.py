"""The contract suite's fixtures: every registered store on its real local server, and the toy store.

A store passes only by passing every test of ``tests/stores`` on its own server; a store joins by its registration
(:data:`scheduler_dedup.handler.stores.registry.STORES`, whose local servers are
:data:`~scheduler_dedup.local.servers.store_servers.SERVER_KINDS`), which parametrises these fixtures. The toy store
(:mod:`.toy_store`, in memory) is registered here, by one line, for its own tests only.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from scheduler_dedup.handler.stores.base import RunStore
from scheduler_dedup.handler.stores import registry
from scheduler_dedup.handler.stores.registry import registered
from scheduler_dedup.local.servers.store_servers import SERVER_KINDS, ProcessStoreServer, StoreServer, store_server
from tests import server_watch

from .toy_store import TOY

COLLECTION = "contract_runs"


def _session_fixture(kind: str) -> str:
    """The name of the session fixture that shares a store's server with the whole test session, where
    tests/conftest.py has one: its registered local server's module name (``firestore_emulator``, ``redis_server``)."""
    store = registry.find(kind)
    assert store is not None, kind
    return store.local_server.partition(":")[0].rpartition(".")[2]


@pytest.fixture(scope="session", params=(*SERVER_KINDS, TOY.id))
def store_server_session(request: pytest.FixtureRequest) -> Iterator[StoreServer]:
    """One running server per store kind for the whole session (the session's own where it has one)."""
    if request.param == TOY.id:
        with registered(TOY):
            toy = store_server(TOY.id)  # its local server, as its registration names it
        with toy:
            yield toy
        return
    try:
        shared: StoreServer = request.getfixturevalue(_session_fixture(request.param))
    except pytest.FixtureLookupError:  # no session server of this store: a server of its own
        pass
    else:
        shared.prepare(COLLECTION)
        yield shared
        return
    with store_server(request.param) as server:
        server.prepare(COLLECTION)
        if isinstance(server, ProcessStoreServer):
            server_watch.watch(server)
        yield server
        if isinstance(server, ProcessStoreServer):
            server_watch.unwatch(server)


@pytest.fixture()
def server(store_server_session: StoreServer) -> Iterator[StoreServer]:
    """The store's server, wiped clean before the test (the toy store registered for the test only)."""
    if isinstance(store_server_session, ProcessStoreServer):
        server_watch.ready(store_server_session)
    store_server_session.wipe()
    if store_server_session.kind != TOY.id:
        yield store_server_session
        return
    with registered(TOY):  # the toy store's one registration line
        yield store_server_session


@pytest.fixture()
def store(server: StoreServer) -> Iterator[RunStore]:
    """A client of the contract on the server's test collection (20 s store timeout)."""
    client = server.connect(COLLECTION, timeout_seconds=20.0)
    yield client
    client.close()
