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
from scheduler_dedup.handler.stores.registry import registered
from scheduler_dedup.local.servers.store_servers import SERVER_KINDS, StoreServer, store_server

from .toy_store import TOY

COLLECTION = "contract_runs"
#: Store kinds whose server the whole test session shares (tests/conftest.py), and its fixture.
_SESSION_SERVERS = {"firestore": "firestore_emulator", "redis": "redis_server"}


@pytest.fixture(scope="session", params=(*SERVER_KINDS, TOY.id))
def store_server_session(request: pytest.FixtureRequest) -> Iterator[StoreServer]:
    """One running server per store kind for the whole session (the session's own where it has one)."""
    if request.param == TOY.id:
        with registered(TOY):
            toy = store_server(TOY.id)  # its local server, as its registration names it
        with toy:
            yield toy
        return
    if request.param in _SESSION_SERVERS:
        shared: StoreServer = request.getfixturevalue(_SESSION_SERVERS[request.param])
        shared.prepare(COLLECTION)
        yield shared
        return
    with store_server(request.param) as server:
        server.prepare(COLLECTION)
        yield server


@pytest.fixture()
def server(store_server_session: StoreServer) -> Iterator[StoreServer]:
    """The store's server, wiped clean before the test (the toy store registered for the test only)."""
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
