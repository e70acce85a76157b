"""Benchmark: each run store's round trips per delivery and the protocol's latency, side by side, on this machine.

For every store with a local server (:data:`scheduler_dedup.local.servers.store_servers.SERVER_KINDS`: the Firestore
emulator, redis-server, the Spanner emulator, and any store added later), through the store contract and the one
protocol (:class:`~scheduler_dedup.handler.protocol.idempotency.Idempotency`, the job doing nothing):

- round trips of a first delivery (claim, completion), of a duplicate on the instance that ran it (its cache of
  finished runs) and of a duplicate on another instance. Counted on the wire: every RPC a store's fault proxy
  forwards (gRPC stores: Spanner's fenced writes are a read that begins the transaction and a Commit), or the
  Redis store's own count of pipelines sent (``WAIT`` rides with its write); each store's floor
  (:data:`FLOORS`) is a target;
- latency of a first delivery and of a duplicate on another instance, p50 and p95 of 200 runs, straight to the
  server (no proxy);
- Redis only: the cost of ``WAIT 1`` on the writes that decide a run, with a real replica (``--replicaof``) on
  loopback, against ``WAIT`` off.

Run: ``python bench/store_bench.py`` (starts every server itself). Prints tables, and exits 1 if a store sends
more round trips than its floor. The emulators are not the services (Firestore's emulator is a Java process on
this machine, Memorystore is a network hop away, Spanner's emulator runs one transaction at a time), so compare
the stores with each other on this machine, not with production. How the protocol compares with the
transactional pattern on the same store: ``bench/dedup_bench.py``.
"""

from __future__ import annotations

import statistics
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.table import Table

from scheduler_dedup.handler.protocol.idempotency import Idempotency, Outcome
from scheduler_dedup.handler.stores.base import RunStore
from scheduler_dedup.local.servers.redis_server import RedisServer
from scheduler_dedup.local.servers.store_servers import SERVER_KINDS, StoreServer, store_server

SAMPLES = 200
#: Each store's round trips (first delivery, duplicate on the same instance, duplicate on another), at most. Spanner:
#: the claim's Commit, then the completion's read and Commit; a duplicate elsewhere is the claim's ALREADY_EXISTS and
#: a strong read (``tests/stores/test_spanner_store.py`` asserts the same on the wire). Redis: the claim's script
#: returns the record it found.
FLOORS = {"firestore": (2, 0, 2), "redis": (2, 0, 1), "spanner": (3, 0, 2)}


def _round_trips(store: RunStore, proxy: Any) -> Callable[[], int]:
    """How to read the round trips sent so far through ``store`` (reached through ``proxy``)."""
    if hasattr(store, "round_trips"):
        return lambda: int(getattr(store, "round_trips"))
    return lambda: len(proxy.calls)


def round_trips(server: StoreServer, samples: int = 10) -> tuple[float, float, float]:
    """Mean round trips of a first delivery, a duplicate on the same instance and one on another instance."""
    proxy = server.fault_proxy()
    try:
        stores = [server.connect("bench_rtt", timeout_seconds=10, host=proxy.host) for _ in range(2)]
        counters = [_round_trips(s, proxy) for s in stores]
        instances = [Idempotency(s, lease_seconds=60) for s in stores]
        for idem in instances:  # connections, scripts, replica counts
            idem.execute(uuid.uuid4().hex, lambda a: None)
            idem.store.get(uuid.uuid4().hex)
        first, same, other = [], [], []
        for _ in range(samples):
            run_id = uuid.uuid4().hex
            for sink, n in ((first, 0), (same, 0), (other, 1)):
                before = counters[n]()
                instances[n].execute(run_id, lambda a: None)
                sink.append(counters[n]() - before)
        for s in stores:
            s.close()
        return statistics.mean(first), statistics.mean(same), statistics.mean(other)
    finally:
        proxy.stop()


def _percentiles(values: list[float]) -> tuple[float, float]:
    ordered = sorted(values)
    return statistics.median(ordered), ordered[int(0.95 * (len(ordered) - 1))]


def latency(stores: list[RunStore], samples: int = SAMPLES) -> tuple[tuple[float, float], tuple[float, float]]:
    """(p50, p95) seconds of a first delivery on ``stores[0]`` and of a duplicate on ``stores[1]``."""
    ran, again = Idempotency(stores[0], lease_seconds=60), Idempotency(stores[1], lease_seconds=60)
    for idem in (ran, again):
        idem.execute(uuid.uuid4().hex, lambda a: None)
    firsts, duplicates = [], []
    for _ in range(samples):
        run_id = uuid.uuid4().hex
        started = time.perf_counter()
        assert ran.execute(run_id, lambda a: None).outcome is Outcome.PROCESSED
        firsts.append(time.perf_counter() - started)
        started = time.perf_counter()
        assert again.execute(run_id, lambda a: None).outcome is Outcome.DUPLICATE
        duplicates.append(time.perf_counter() - started)
    return _percentiles(firsts), _percentiles(duplicates)


def wait_cost(samples: int = SAMPLES) -> dict[str, tuple[float, float, int]]:
    """Redis first-delivery latency (p50, p95, unacknowledged writes) without WAIT and with WAIT 1, a real replica."""
    from scheduler_dedup.handler.stores.redis.store import RedisRunStore
    from scheduler_dedup.handler.stores.redis.config import parse_redis_url

    out: dict[str, tuple[float, float, int]] = {}
    with RedisServer() as primary, RedisServer(replica_of=primary.host, password=primary.password) as replica:
        replica.wait_until_replicating()
        for label, wait_ms in (("WAIT off", 0), ("WAIT 1 500 ms, one replica", 500)):
            store = RedisRunStore(parse_redis_url(f"redis://{primary.host}/0"), "bench_wait", 10.0,
                                  password=primary.password, wait_timeout_ms=wait_ms)
            idem = Idempotency(store, lease_seconds=60)
            idem.execute(uuid.uuid4().hex, lambda a: None)
            values = []
            for _ in range(samples):
                started = time.perf_counter()
                idem.execute(uuid.uuid4().hex, lambda a: None)
                values.append(time.perf_counter() - started)
            p50, p95 = _percentiles(values)
            out[label] = (p50, p95, store.unreplicated_writes)
            store.close()
    return out


def main() -> int:
    console = Console()
    trips: dict[str, tuple[float, float, float]] = {}
    lat: dict[str, tuple[tuple[float, float], tuple[float, float]]] = {}
    for kind in SERVER_KINDS:
        console.print(f"{kind}: starting its local server...")
        with store_server(kind) as server:
            server.prepare("bench_rtt")
            server.prepare("bench_latency")
            trips[kind] = round_trips(server)
            stores = [server.connect("bench_latency", timeout_seconds=10) for _ in range(2)]
            lat[kind] = latency(stores)
            for s in stores:
                s.close()
    waits = wait_cost()

    table = Table(title="Round trips to the store per delivery (the protocol through the store contract)")
    for column in ("store", "first delivery", "duplicate, same instance", "duplicate, another instance"):
        table.add_column(column, justify="right")
    for kind, (first, same, other) in trips.items():
        table.add_row(kind, f"{first:g}", f"{same:g}", f"{other:g}")
    console.print(table)

    table = Table(title=f"Latency of the protocol (job does nothing), {SAMPLES} runs, straight to the local server")
    for column in ("store", "first delivery p50 ms", "p95 ms", "duplicate (another instance) p50 ms", "p95 ms"):
        table.add_column(column, justify="right")
    for kind, ((f50, f95), (d50, d95)) in lat.items():
        table.add_row(kind, f"{f50 * 1000:.2f}", f"{f95 * 1000:.2f}", f"{d50 * 1000:.2f}", f"{d95 * 1000:.2f}")
    console.print(table)

    table = Table(title=f"Redis: the cost of WAIT on the claim and the completion, {SAMPLES} first deliveries, "
                        "a replica on loopback")
    for column in ("mode", "p50 ms", "p95 ms", "writes no replica acknowledged"):
        table.add_column(column, justify="right")
    for label, (p50, p95, unacked) in waits.items():
        table.add_row(label, f"{p50 * 1000:.2f}", f"{p95 * 1000:.2f}", str(unacked))
    console.print(table)

    misses = [f"{kind}: round trips {trips[kind]} over its floor {floor}" for kind, floor in FLOORS.items()
              if kind in trips and any(got > most for got, most in zip(trips[kind], floor))]
    for miss in misses:
        console.print(f"[red]target missed:[/red] {miss}")
    return 1 if misses else 0


if __name__ == "__main__":
    sys.exit(main())
