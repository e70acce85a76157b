"""Benchmark: scheduler-dedup side by side with the transactional pattern on the same store (Firestore, Spanner):
RPCs per delivery and added latency, and (Firestore) a duplicate storm. Every store's own round trips and protocol
latency, the stores side by side, are ``bench/store_bench.py``'s.

Three handlers serve real HTTP in this process, each on a thread pool of 8 (Cloud Run's
concurrency on a small instance), against each store's real emulator:

- ``scheduler-dedup``: this project's claim (put-if-absent), lease and fenced completion;
- ``transactional``: the transactional pattern, a transaction to claim (read, then write if absent) and another
  to complete. Firestore: Google's sample (begin, get, commit twice), written per call; Spanner: the same with
  ``database.run_in_transaction`` (``transactional_sample_spanner.py``);
- ``no dedup``: the job alone, as the baseline for added latency.

Every Firestore RPC is counted by a gRPC interceptor on the client's channel; every Spanner RPC by a fault proxy
(no faults) in front of the emulator, which also names each call's protocol step.

Run: ``python bench/dedup_bench.py`` (starts the emulators itself). Prints tables; exits 1 if scheduler-dedup
misses its storm targets (no 5xx, p95 < 1 s, exactly one execution per run). Each store's floor of round trips is
``bench/store_bench.py``'s target.
"""

from __future__ import annotations

import os
import socketserver
import statistics
import tempfile
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import flask
import grpc
import requests
from google.cloud import firestore
from rich.console import Console
from rich.table import Table
from werkzeug.serving import BaseWSGIServer

from scheduler_dedup.handler import Idempotency, ScheduledRun, Settings
from scheduler_dedup.handler.schedule.run_key import run_key_from_headers
from scheduler_dedup.handler.service.delivery import SchedulerHandler
from scheduler_dedup.handler.stores.firestore.store import FirestoreRunStore
from scheduler_dedup.local.servers.firestore_emulator import FirestoreEmulator
from scheduler_dedup.handler.stores.spanner.config import SpannerConfig
from scheduler_dedup.local.servers.spanner_emulator import SpannerEmulator
from scheduler_dedup.local.servers.store_servers import environment
from scheduler_dedup.local.demo.recording_job import read_events
from scheduler_dedup.local.servers.handlers import HandlerServer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from transactional_sample import make_view as transactional_view  # noqa: E402
from transactional_sample_spanner import make_view as spanner_transactional_view  # noqa: E402

SERVER_THREADS = 8


class RpcCounter(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor,
                 grpc.StreamUnaryClientInterceptor, grpc.StreamStreamClientInterceptor):
    """Counts every RPC on a channel, by method name."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls: Counter[str] = Counter()

    def _count(self, details: Any) -> None:
        with self.lock:
            self.calls[details.method.rsplit("/", 1)[-1]] += 1

    def total(self) -> int:
        with self.lock:
            return sum(self.calls.values())

    def intercept_unary_unary(self, continuation, details, request):  # type: ignore[no-untyped-def]
        self._count(details)
        return continuation(details, request)

    def intercept_unary_stream(self, continuation, details, request):  # type: ignore[no-untyped-def]
        self._count(details)
        return continuation(details, request)

    def intercept_stream_unary(self, continuation, details, request_iterator):  # type: ignore[no-untyped-def]
        self._count(details)
        return continuation(details, request_iterator)

    def intercept_stream_stream(self, continuation, details, request_iterator):  # type: ignore[no-untyped-def]
        self._count(details)
        return continuation(details, request_iterator)


class CountingClient(firestore.Client):
    """A Firestore client whose emulator channel counts RPCs."""

    def __init__(self, counter: RpcCounter, **kwargs: Any):
        self.counter = counter
        super().__init__(**kwargs)

    def _emulator_channel(self, transport):  # type: ignore[no-untyped-def]
        return grpc.intercept_channel(super()._emulator_channel(transport), self.counter)


class PooledServer(BaseWSGIServer):
    """A WSGI server answering on a fixed pool of threads, like gunicorn's gthread worker."""

    def __init__(self, port: int, app: flask.Flask, threads: int):
        super().__init__("127.0.0.1", port, app)
        self.pool = ThreadPoolExecutor(threads)

    def process_request(self, request, client_address):  # type: ignore[no-untyped-def]
        self.pool.submit(self._serve, request, client_address)

    def _serve(self, request, client_address):  # type: ignore[no-untyped-def]
        try:
            self.finish_request(request, client_address)
        except Exception:  # noqa: BLE001 - a broken client connection must not kill the pool
            self.handle_error(request, client_address)
        finally:
            self.shutdown_request(request)


socketserver.TCPServer.allow_reuse_address = True


class Job:
    """The benchmark job: sleeps, counts executions per run id."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.lock = threading.Lock()
        self.runs: Counter[str] = Counter()

    def __call__(self, run: ScheduledRun) -> dict[str, str]:
        with self.lock:
            self.runs[run.run_id] += 1
        time.sleep(self.seconds)
        return {"ok": run.job_name}


def ours_view(client: firestore.Client, collection: str, job: Job, project: str) -> Callable[[flask.Request], Any]:
    settings = Settings(project=project, collection=collection)
    handler = SchedulerHandler(settings, Idempotency(FirestoreRunStore(client, collection)), job)

    def view(request: flask.Request) -> Any:
        body, status, headers = handler.handle(request.headers)
        return flask.jsonify(body), status, headers

    return view


def no_dedup_view(client: Any, collection: str, job: Job, project: str) -> Callable[[flask.Request], Any]:
    def view(request: flask.Request) -> Any:
        key = run_key_from_headers(request.headers, default_project=project,
                                   server_now=datetime.now(timezone.utc), manual_tolerance_seconds=5)
        job(ScheduledRun.of(key, uuid.uuid4().hex))
        return flask.jsonify({"status": "processed"}), 200

    return view


class Served:
    """One handler variant on its own port with its own job, and a count of the store RPCs it sent."""

    def __init__(self, name: str, make_view: Callable[[Job], Callable[[flask.Request], Any]],
                 count: Callable[[], int], job_seconds: float = 0.0):
        self.name = name
        self.count = count
        self.job = Job(job_seconds)
        app = flask.Flask(name)
        view = make_view(self.job)
        app.add_url_rule("/", name, lambda: view(flask.request), methods=["POST"])
        self.server = PooledServer(0, app, SERVER_THREADS)  # port 0: the kernel picks a free one, bound at once
        self.port = self.server.server_port
        self.url = f"http://127.0.0.1:{self.port}/"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()


_schedule = iter(range(10**9))


def next_time() -> str:
    """A fresh past schedule time (one per run)."""
    base = datetime(2026, 1, 1, tzinfo=timezone.utc) + timedelta(minutes=next(_schedule))
    return base.strftime("%Y-%m-%dT%H:%M:%SZ")


def deliver(url: str, when: str, job: str = "bench") -> tuple[int, float]:
    started = time.perf_counter()
    response = requests.post(url, headers={"X-CloudScheduler-JobName": job, "X-CloudScheduler-ScheduleTime": when},
                             timeout=120)
    return response.status_code, time.perf_counter() - started


def rpc_costs(served: Served, other: Served, samples: int = 5) -> tuple[float, float, float]:
    """Mean RPCs of a first delivery, a duplicate on the same instance, and one on another instance."""
    firsts, same, elsewhere = [], [], []
    for _ in range(samples):
        when = next_time()
        for sink, target in ((firsts, served), (same, served), (elsewhere, other)):
            before = target.count()
            deliver(target.url, when)
            sink.append(target.count() - before)
    return statistics.mean(firsts), statistics.mean(same), statistics.mean(elsewhere)


def storm(url: str, executions_log: Path, runs: int = 10, clients: int = 20) -> dict[str, Any]:
    """``runs`` fresh runs, each delivered by ``clients`` concurrent clients, all released at once."""
    times = [next_time() for _ in range(runs)]
    barrier = threading.Barrier(runs * clients)

    def one(i: int) -> tuple[int, float]:
        barrier.wait()
        return deliver(url, times[i % runs], job="storm")

    with ThreadPoolExecutor(runs * clients) as pool:
        results = list(pool.map(one, range(runs * clients)))
    latencies = sorted(latency for _, latency in results)
    starts = Counter(e["run_id"] for e in read_events(executions_log) if e["event"] == "start")
    return {
        "5xx": sum(1 for status, _ in results if status >= 500),
        "409": sum(1 for status, _ in results if status == 409),
        "deliveries": len(results),
        "p50": statistics.median(latencies),
        "p95": latencies[int(0.95 * (len(latencies) - 1))],
        "executions": sum(starts.values()),
        "runs executed": len(starts),
    }


def latency(served: Served, samples: int = 40) -> tuple[float, float]:
    values = sorted(deliver(served.url, next_time())[1] for _ in range(samples))
    return statistics.median(values), values[int(0.95 * (len(values) - 1))]


def firestore_served(name: str, factory: Callable[..., Callable[[flask.Request], Any]], project: str,
                     collection: str) -> Served:
    """A variant on its own Firestore client, whose channel counts RPCs."""
    counter = RpcCounter()
    client = CountingClient(counter, project=project)
    return Served(name, lambda job: factory(client, collection, job, project), counter.total)


def spanner_served(name: str, kind: str, emulator: SpannerEmulator, table: str) -> tuple[Served, Callable[[], None]]:
    """A variant reaching the Spanner emulator through a fault proxy of its own (no faults) that counts its RPCs;
    returns it with what closes its proxy and client."""
    proxy = emulator.fault_proxy()
    if kind == "scheduler-dedup":
        store = emulator.connect(table, host=proxy.host)
        settings = Settings(project=emulator.project, collection=table, store="spanner",
                            store_config=SpannerConfig(instance=emulator.instance, database=emulator.database))

        def ours(job: Job) -> Callable[[flask.Request], Any]:
            handler = SchedulerHandler(settings, Idempotency(store), job)
            return lambda request: _answer(handler.handle(request.headers))
        make, close = ours, store.close
    else:
        from scheduler_dedup.handler.stores.spanner.admin import admin_client

        with environment({"SPANNER_EMULATOR_HOST": proxy.host}):
            database = admin_client(emulator.project).instance(emulator.instance).database(emulator.database)
        make = (lambda job: spanner_transactional_view(database, table, job, emulator.project)) \
            if kind == "transactional" else (lambda job: no_dedup_view(None, table, job, emulator.project))
        # not database.close(): it joins the library's multiplexed-session maintenance thread, which sleeps 10 min
        close = (lambda: None)

    def stop() -> None:
        close()
        proxy.stop()

    return Served(name, make, lambda: len(proxy.calls)), stop


def _answer(result: tuple[Any, int, Any]) -> Any:
    body, status, headers = result
    return flask.jsonify(body), status, headers


def spanner_tables(console: Console) -> None:
    """Spanner: scheduler-dedup's and the transactional pattern's RPC and latency tables."""
    with SpannerEmulator() as emulator:
        for table in ("bench_ours", "bench_tx", "bench_none"):
            emulator.prepare(table)
        kinds = {"scheduler-dedup": "bench_ours", "transactional": "bench_tx", "no dedup": "bench_none"}
        made = {name: spanner_served(name, name, emulator, table) for name, table in kinds.items()}
        others = {name: spanner_served(f"{name} #2", name, emulator, kinds[name]) for name in kinds if name != "no dedup"}
        try:
            for served, _ in [*made.values(), *others.values()]:
                deliver(served.url, next_time())  # warm up: sessions, connections
            rpcs = {name: rpc_costs(made[name][0], others[name][0]) for name in others}
            lat = {name: latency(served) for name, (served, _) in made.items()}
        finally:
            for served, stop in [*made.values(), *others.values()]:
                served.close()
                stop()
    print_rpcs(console, "Spanner RPCs per delivery (emulator)", rpcs)
    print_latency(console, "Spanner: latency of a first delivery (job does nothing), 40 sequential runs", lat)


def print_rpcs(console: Console, title: str, rpcs: dict[str, tuple[float, float, float]]) -> None:
    table = Table(title=title)
    table.add_column("handler")
    table.add_column("first delivery", justify="right")
    table.add_column("duplicate of a completed run, same instance", justify="right")
    table.add_column("duplicate, another instance", justify="right")
    for name, (first, same, elsewhere) in rpcs.items():
        table.add_row(name, f"{first:g}", f"{same:g}", f"{elsewhere:g}")
    console.print(table)


def print_latency(console: Console, title: str, lat: dict[str, tuple[float, float]]) -> None:
    base50, base95 = lat["no dedup"]
    table = Table(title=title)
    for column in ("handler", "p50 ms", "p95 ms", "added p50 ms", "added p95 ms"):
        table.add_column(column, justify="right")
    for name, (p50, p95) in lat.items():
        table.add_row(name, f"{p50 * 1000:.1f}", f"{p95 * 1000:.1f}", f"{(p50 - base50) * 1000:+.1f}",
                      f"{(p95 - base95) * 1000:+.1f}")
    console.print(table)


def main() -> int:
    console = Console()
    with FirestoreEmulator() as emulator:
        os.environ["FIRESTORE_EMULATOR_HOST"] = emulator.host
        project = emulator.project
        factories = {"scheduler-dedup": ours_view, "transactional": transactional_view, "no dedup": no_dedup_view}
        variants = {name: firestore_served(name, f, project, f"bench_{i}") for i, (name, f) in
                    enumerate(factories.items())}
        # A second instance of each dedup handler on the same collection, with its own process state.
        others = {name: firestore_served(f"{name} #2", factories[name], project, f"bench_{i}")
                  for i, name in enumerate(factories) if name != "no dedup"}
        try:
            for served in [*variants.values(), *others.values()]:  # warm up connections
                deliver(served.url, next_time())
            rpcs = {name: rpc_costs(variants[name], others[name]) for name in others}
            lat = {name: latency(s) for name, s in variants.items()}
        finally:
            for served in [*variants.values(), *others.values()]:
                served.close()
        storms = {}
        with tempfile.TemporaryDirectory() as tmp:
            for name, target in [("scheduler-dedup", None),
                                 ("transactional", (str(Path(__file__).resolve().parent / "transactional_sample.py"),
                                                    "handle"))]:
                log = Path(tmp) / f"{name}.jsonl"
                env = {"FIRESTORE_EMULATOR_HOST": emulator.host, "GOOGLE_CLOUD_PROJECT": project,
                       "DEDUP_JOB": "scheduler_dedup.local.demo.recording_job:run", "DEMO_JOB_SECONDS": "0.5",
                       "DEMO_EXECUTIONS_LOG": str(log), "DEDUP_COLLECTION": f"storm_{name.replace('-', '_')}"}
                console.print(f"storm against {name} (10 runs x 20 concurrent clients, 0.5 s job, "
                              f"functions-framework with {SERVER_THREADS} threads)...")
                with HandlerServer(env, target=target, threads=SERVER_THREADS) as server:
                    deliver(server.url, next_time(), job="warm-up")
                    log.unlink(missing_ok=True)
                    storms[name] = storm(server.url, log)

    print_rpcs(console, "Firestore RPCs per delivery", rpcs)

    table = Table(title=f"Storm: 10 runs x 20 concurrent deliveries, 0.5 s job, {SERVER_THREADS} server threads")
    for column in ("handler", "deliveries", "5xx", "409", "p50 s", "p95 s", "executions", "runs executed"):
        table.add_column(column, justify="right")
    for name, s in storms.items():
        table.add_row(name, str(s["deliveries"]), f"{s['5xx']} ({100 * s['5xx'] / s['deliveries']:.0f}%)", str(s["409"]),
                      f"{s['p50']:.3f}", f"{s['p95']:.3f}", str(s["executions"]), str(s["runs executed"]))
    console.print(table)

    print_latency(console, "Firestore: latency of a first delivery (job does nothing), 40 sequential runs", lat)

    spanner_tables(console)

    ours_storm = storms["scheduler-dedup"]
    misses = []  # each store's floor of round trips is bench/store_bench.py's target
    if ours_storm["5xx"] or ours_storm["p95"] >= 1.0 or ours_storm["executions"] != 10:
        misses.append(f"storm: {ours_storm}")
    for miss in misses:
        console.print(f"[red]target missed:[/red] {miss}")
    return 1 if misses else 0


if __name__ == "__main__":
    sys.exit(main())
