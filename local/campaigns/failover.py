"""``scheduler-dedup failover-campaign``: what a Redis failover costs, measured; what the store contract cannot promise.

The contract's campaign (:mod:`scheduler_dedup.local.campaigns.campaign`) injects faults a store survives: calls failed,
answers lost, calls held. A Redis failover is another kind: the promoted replica lacks the primary's last
writes, *acknowledged ones included*, because replication is asynchronous (a replica lags behind the
primary, more so the more it writes: https://cloud.google.com/memorystore/docs/redis/high-availability); ``WAIT`` "does not make Redis a
strongly consistent store" (https://redis.io/docs/latest/commands/wait/). A lost claim or completion lets the
next delivery run the job again. This campaign measures how often, with and without ``WAIT``.

Each round starts a primary ``redis-server`` (no persistence) and a replica of it (``--replicaof``) whose
replication stream passes through a relay that delays it by ``lag_ms`` (the replica is always that far behind).
The handler processes reach the primary through a front relay, as clients reach Memorystore's primary endpoint.
While the round's scenarios play (the same seeded at-least-once scenarios as the contract's campaign, without
injected store faults), the failover happens at a random moment: the replication relay is cut (what it still
held is lost), the replica is promoted (``REPLICAOF NO ONE``), the front relay moves to it (open connections
drop and clients reconnect), and the old primary is killed. Then the invariants are checked as always; a double
execution is a run whose job started again while no earlier attempt had been killed or released.
"""

from __future__ import annotations

import json
import random
import secrets
import socket
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from scheduler_dedup.handler.stores.redis.store import NO_REPLICA_CHECK_SECONDS, RedisRunStore
from scheduler_dedup.handler.stores.redis.config import parse_redis_url
from scheduler_dedup.local.campaigns.campaign import COLLECTION
from scheduler_dedup.local.campaigns.delivery import play
from scheduler_dedup.local.campaigns.fleet import Fleet
from scheduler_dedup.local.campaigns.invariants import check
from scheduler_dedup.local.campaigns.observers import ExecutionsLog, FaultLog
from scheduler_dedup.local.campaigns.results import ScenarioResult
from scheduler_dedup.local.campaigns.scenarios import CampaignConfig, Scenario
from scheduler_dedup.local.servers.redis_server import RedisServer
from scheduler_dedup.local.faults.resp_proxy import RespFaultProxy

_JOB = "scheduler_dedup.local.demo.recording_job:run"
_DOUBLE = "neither killed nor released"


@dataclass(frozen=True)
class FailoverConfig:
    """How a failover campaign is played (durations in seconds unless named ``_ms``).

    Attributes:
        rounds: failovers per mode; each round is a fresh primary and replica.
        scenarios_per_round: scenarios played during one round (the failover falls among them).
        seed: seed of the first scenario and of the failover moments.
        lag_ms: how far the replica is behind the primary (its replication stream is delayed this long).
        wait_modes: the ``DEDUP_REDIS_WAIT_TIMEOUT_MS`` values compared (0: no ``WAIT``).
        concurrency: scenarios played at once.
        instances: handler processes.
    """

    rounds: int = 8
    scenarios_per_round: int = 24
    seed: int = 1
    lag_ms: int = 100
    wait_modes: tuple[int, ...] = (0, 500)
    concurrency: int = 12
    instances: int = 2

    def campaign(self) -> CampaignConfig:
        return CampaignConfig(scenarios=self.rounds * self.scenarios_per_round, seed=self.seed, fault_rate=0.0,
                              instances=self.instances, concurrency=self.concurrency, store="redis")


@dataclass
class ModeReport:
    """One mode's outcome: every scenario's result, and per failover the records the promoted replica lacked."""

    wait_ms: int
    results: list[ScenarioResult] = field(default_factory=list)
    lost_records: list[int] = field(default_factory=list)
    failover_times: list[float] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def doubles(self) -> list[ScenarioResult]:
        return [r for r in self.results if any(_DOUBLE in v for v in r.violations)]

    @property
    def others(self) -> list[ScenarioResult]:
        return [r for r in self.results if r.violations and r not in self.doubles]


class _Lagging:
    """A TCP relay for the replication stream: primary-to-replica bytes are delivered ``lag`` seconds late;
    :meth:`cut` drops whatever it still holds and closes the link."""

    def __init__(self, upstream: str, lag: float):
        self.upstream = upstream
        self.lag = lag
        self._listener = socket.socket()
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(8)
        self.host = f"127.0.0.1:{self._listener.getsockname()[1]}"
        self._cut = threading.Event()
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._cut.is_set():
            try:
                replica, _ = self._listener.accept()
            except OSError:
                return
            host, _, port = self.upstream.rpartition(":")
            primary = socket.create_connection((host, int(port)))
            self._sockets += [replica, primary]
            threading.Thread(target=self._pump, args=(primary, replica, self.lag), daemon=True).start()
            threading.Thread(target=self._pump, args=(replica, primary, 0.0), daemon=True).start()

    def _pump(self, source: socket.socket, target: socket.socket, lag: float) -> None:
        held: list[tuple[float, bytes]] = []
        lock = threading.Condition()

        def deliver() -> None:
            while not self._cut.is_set():
                with lock:
                    while not held and not self._cut.is_set():
                        lock.wait(0.05)
                    if self._cut.is_set():
                        return
                    due, chunk = held[0]
                wait = due - time.monotonic()
                if wait > 0 and self._cut.wait(wait):
                    return
                with lock:
                    held.pop(0)
                try:
                    target.sendall(chunk)
                except OSError:
                    return

        threading.Thread(target=deliver, daemon=True).start()
        while not self._cut.is_set():
            try:
                chunk = source.recv(65536)
            except OSError:
                return
            if not chunk:
                return
            with lock:
                held.append((time.monotonic() + lag, chunk))
                lock.notify()

    def cut(self) -> None:
        self._cut.set()
        for sock in [self._listener, *self._sockets]:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()


def _replicated(primary: RedisServer, start_replica: Callable[[str], RedisServer],
                lag_ms: int) -> tuple[_Lagging, RedisServer]:
    """A replica of ``primary`` (started by ``start_replica(upstream)``) behind a replication relay ``lag_ms``
    late, once it has caught up."""
    link = _Lagging(primary.host, lag_ms / 1000)
    replica = start_replica(link.host)
    replica.wait_until_replicating()
    return link, replica


def _records(server: RedisServer) -> dict[bytes, bytes]:
    """Run record key -> version (``_v``) of every record the server holds."""
    versions: dict[bytes, bytes] = {}
    cursor = "0"
    while True:
        cursor_bytes, keys = server.command("SCAN", cursor, "MATCH", "{" + COLLECTION + "}:run:*", "COUNT", 1000)
        for key in keys:
            version = server.command("HGET", key.decode(), "_v")
            if version is not None:
                versions[key] = version
        cursor = cursor_bytes.decode()
        if cursor == "0":
            return versions


def _play_mode(cfg: FailoverConfig, wait_ms: int, console: Console) -> ModeReport:
    report = ModeReport(wait_ms)
    started = time.monotonic()
    campaign = cfg.campaign()
    scenarios = [Scenario.generate(cfg.seed + i, campaign.lease_seconds) for i in range(campaign.scenarios)]
    workdir = Path(tempfile.mkdtemp(prefix="scheduler-dedup-failover-"))
    plan_file, executions, auth_file = workdir / "plan.json", workdir / "executions.jsonl", workdir / "auth"
    plan_file.write_text(json.dumps({s.job_name: s.plan() for s in scenarios}))
    password = secrets.token_urlsafe(24)
    auth_file.write_text(password + "\n")
    started_servers: list[RedisServer] = []  # every server of this mode, closed at the end whatever happens

    def server(**kwargs: Any) -> RedisServer:
        started_servers.append(RedisServer(password=password, **kwargs))
        return started_servers[-1].start()

    first = server()
    pair = _replicated(first, lambda host: server(replica_of=host), cfg.lag_ms)
    front = RespFaultProxy(upstream=first.host).start()
    env = {"DEDUP_STORE": "redis", "DEDUP_REDIS_URL": f"redis://{front.host}/0", "DEDUP_REDIS_AUTH_FILE": str(auth_file),
           "GOOGLE_CLOUD_PROJECT": first.project, "DEDUP_JOB": _JOB, "DEDUP_COLLECTION": COLLECTION,
           "DEMO_JOB_PLAN": str(plan_file), "DEMO_EXECUTIONS_LOG": str(executions),
           "DEDUP_LEASE_SECONDS": str(campaign.lease_seconds),
           "DEDUP_STORE_TIMEOUT_SECONDS": str(campaign.store_timeout_seconds),
           "DEDUP_REDIS_WAIT_TIMEOUT_MS": str(wait_ms)}
    fleet = Fleet(env, cfg.instances)
    log = ExecutionsLog(executions)
    faults = FaultLog(front, slow_seconds=1e9)
    records = RedisRunStore(parse_redis_url(f"redis://{front.host}/0"), COLLECTION, 5.0, password=password,
                            wait_timeout_ms=0)
    primary: RedisServer | None = first
    try:
        for round_no in range(cfg.rounds):
            if primary is None:
                primary = server()
                pair = _replicated(primary, lambda host: server(replica_of=host), cfg.lag_ms)
                front.redirect(primary.host)
                if wait_ms:
                    time.sleep(NO_REPLICA_CHECK_SECONDS + 0.5)  # the handlers count the new replica
            link, replica = pair
            batch = scenarios[round_no * cfg.scenarios_per_round:(round_no + 1) * cfg.scenarios_per_round]
            moment = random.Random(f"failover:{cfg.seed}:{round_no}").uniform(0.2, 1.5)
            old = primary

            def failover(old: RedisServer = old, replica: RedisServer = replica, link: _Lagging = link) -> None:
                time.sleep(moment)
                report.failover_times.append(time.monotonic())
                link.cut()  # what the replica has not received yet is lost
                replica.promote()
                front.redirect(replica.host)
                had = _records(old)
                has = _records(replica)
                report.lost_records.append(sum(1 for k, v in had.items() if has.get(k) != v))
                old.kill()

            failing = threading.Thread(target=failover, daemon=True)
            failing.start()
            with futures.ThreadPoolExecutor(cfg.concurrency) as pool:
                results = list(pool.map(lambda s: play(s, campaign, fleet, log, faults, records), batch))
            failing.join(60)
            for result in results:
                result.violations = check(result, campaign)
            report.results += results
            old.close()
            replica.close()
            primary = None
            console.print(f"  WAIT {wait_ms} ms: round {round_no + 1}/{cfg.rounds}, "
                          f"{report.lost_records[-1] if report.lost_records else 0} record(s) lost at the failover, "
                          f"{sum(1 for r in results if any(_DOUBLE in v for v in r.violations))} double execution(s)")
    finally:
        log.close()
        fleet.close()
        front.stop()
        for each in started_servers:
            each.close()
    report.seconds = time.monotonic() - started
    return report


def run_failover_campaign(cfg: FailoverConfig, console: Console | None = None) -> list[ModeReport]:
    """Play ``cfg.rounds`` failovers in each mode of ``cfg.wait_modes``; returns one report per mode.

    Raises:
        EmulatorNotFoundError, EmulatorStartError: redis-server cannot run.
    """
    console = console or Console()
    console.print(f"Failover campaign: {cfg.rounds} failovers per mode, {cfg.scenarios_per_round} scenarios each, "
                  f"replica {cfg.lag_ms} ms behind")
    return [_play_mode(cfg, wait_ms, console) for wait_ms in cfg.wait_modes]


def table(cfg: FailoverConfig, reports: list[ModeReport]) -> Table:
    """The comparison: per mode, the failovers, what they lost and the double executions it caused."""
    out = Table(title=f"Redis failovers: the promoted replica is {cfg.lag_ms} ms behind (seeds {cfg.seed}.."
                      f"{cfg.seed + cfg.rounds * cfg.scenarios_per_round - 1})")
    out.add_column("")
    for report in reports:
        out.add_column(f"WAIT {report.wait_ms} ms" if report.wait_ms else "no WAIT", justify="right")
    rows: list[tuple[str, list[str]]] = [
        ("failovers", [str(len(r.lost_records)) for r in reports]),
        ("scenarios (runs)", [str(len(r.results)) for r in reports]),
        ("job executions", [str(sum(1 for x in r.results for e in x.events if e["event"] == "start"))
                            for r in reports]),
        ("records the promoted replica lacked", [str(sum(r.lost_records)) for r in reports]),
        ("runs executed twice (double executions)", [str(len(r.doubles)) for r in reports]),
        ("runs recorded wrongly, no double", [str(len(r.others)) for r in reports]),
        ("seconds", [f"{r.seconds:.0f}" for r in reports]),
    ]
    for label, values in rows:
        out.add_row(label, *values, style="bold" if "twice" in label else None)
    out.caption = ("A double execution: the job started again while no earlier attempt had been killed or released "
                   "(a lost claim or completion). Only Firestore or Spanner rule this out.")
    return out


def run_cli(cfg: FailoverConfig) -> int:
    """Run the failover campaign and print its table and each affected run's first violation; returns 0 (what it
    measures is a known risk of Redis, not a bug: it reports, it does not fail)."""
    console = Console(width=max(Console().width, 120))
    reports = run_failover_campaign(cfg, console)
    console.print(table(cfg, reports))
    for report in reports:
        for result in report.doubles[:5]:
            console.print(f"  WAIT {report.wait_ms} ms, seed {result.scenario.seed}: {result.violations[0]}",
                          soft_wrap=True)
    kinds = Counter(v.split(":")[0] for r in reports for x in r.others for v in x.violations)
    if kinds:
        console.print(f"  other violations: {dict(kinds)}", soft_wrap=True)
    return 0
