"""``scheduler-dedup campaign``: seeded fault scenarios against real handler processes, checked by invariants.

Faults are injected where the handler talks to its store (Jepsen's and FoundationDB's practice):
a fault proxy (:mod:`scheduler_dedup.local.faults.grpc_proxy`, RESP for Redis) sits between the handler processes and
a real local store server (the Firestore emulator by default; ``--store`` picks another), and hits
each store call of every protocol step (claim, read, takeover, renewal, completion, failure record,
release) with probability ``fault_rate``: fail it before sending (UNAVAILABLE, DEADLINE_EXCEEDED), apply it and lose the answer, or hold it
beyond the store timeout. On top, each scenario plays at-least-once delivery: concurrent
duplicate deliveries to two or more functions-framework processes, Scheduler's retries after
its attempt deadline, a duplicate after the run was acknowledged, jobs longer than the lease,
retryable and non-retryable job failures, and SIGKILL of the process running the job.

No step-by-step expectation is written down. After each scenario the campaign checks
invariants (:func:`check`) on what happened: the answers, the executions the job recorded, the
run record and the faults injected. A scenario is fully described by its seed
(:meth:`Scenario.generate`): ``--seed S --scenarios 1`` replays scenario ``S`` with the same plan
and the same fault draws for its run (the draws depend on the seed, the run id, the step and
the call's rank, not on the other scenarios played beside it).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests
from rich.console import Console
from rich.table import Table

from scheduler_dedup.handler.stores.base import RunStore
from scheduler_dedup.local.faults.grpc_proxy import PROTOCOL_STEPS, Call, FaultPlan
from scheduler_dedup.local.servers.store_servers import StoreServer, store_server
from scheduler_dedup.local.servers.handlers import HandlerServer

#: Fault kinds the campaign draws from (what a store's network does: see the module docstring).
CAMPAIGN_KINDS = ("unavailable", "deadline", "lose_answer", "delay")
COLLECTION = "campaign_runs"
_JOB = "scheduler_dedup.local.demo.recording_job:run"


@dataclass(frozen=True)
class CampaignConfig:
    """How a campaign is played (all durations in seconds).

    Attributes:
        scenarios: number of scenarios; scenario ``i`` has seed ``seed + i``.
        seed: seed of the first scenario.
        fault_rate: probability that one store call is hit by a fault, 0 to 1.
        instances: handler processes behind the proxy (at least 2).
        concurrency: scenarios played at once.
        lease_seconds: the handler's ``DEDUP_LEASE_SECONDS``.
        store_timeout_seconds: the handler's ``DEDUP_STORE_TIMEOUT_SECONDS``.
        attempt_deadline: how long the simulated Scheduler waits for an answer before retrying.
        max_deliveries: Scheduler's retry budget per run (deliveries, first wave included): it only
            ends a scenario that makes no progress, so it spans many leases (a SIGKILL ends every
            attempt running in that process, and a long job may be killed more than once).
        kinds: fault kinds drawn from.
        baseline: serve the no-dedup baseline instead of the handler (shows what the invariants catch).
        store: the run store (``DEDUP_STORE``) whose local server the handlers use.

    The defaults keep the production ratio of store timeout to lease small enough that one failed
    lease renewal leaves time for the next (renewal every ``lease / 3``, each failure costing up
    to the store timeout), with everything scaled down so a scenario takes seconds.
    """

    scenarios: int = 80
    seed: int = 1
    fault_rate: float = 0.1
    instances: int = 2
    concurrency: int = 12
    lease_seconds: float = 4.0
    store_timeout_seconds: float = 0.8
    attempt_deadline: float = 2.5
    max_deliveries: int = 40
    kinds: tuple[str, ...] = CAMPAIGN_KINDS
    baseline: bool = False
    store: str = "firestore"

    @property
    def delay_seconds(self) -> tuple[float, float]:
        """How long a ``delay`` fault holds a call, drawn from (least, most) seconds: always beyond the
        store timeout, at most beyond the lease (a write that lands after another attempt could take over)."""
        return self.store_timeout_seconds + 0.3, self.lease_seconds + 1.0


@dataclass(frozen=True)
class Scenario:
    """One scheduled run's plan, drawn from its seed.

    Attributes:
        seed: the seed (replay with ``--seed SEED --scenarios 1``).
        job_name: a Scheduler job id of its own (so scenarios never share a run).
        schedule_time: RFC 3339, UTC.
        job_seconds: how long the job runs; some runs outlast the lease.
        fail: ``None``, ``"retryable"`` or ``"permanent"``.
        fail_times: how many of the run's first executions fail.
        wave: concurrent duplicate deliveries sent at once.
        kill_after: SIGKILL the process running the job this long after the job started (None: no kill).
        late_duplicate: deliver once more after the run was acknowledged (a lost 2xx).
    """

    seed: int
    job_name: str
    schedule_time: str
    job_seconds: float
    fail: str | None
    fail_times: int
    wave: int
    kill_after: float | None
    late_duplicate: bool

    @classmethod
    def generate(cls, seed: int, lease_seconds: float) -> "Scenario":
        """The scenario of ``seed``, for a handler whose lease is ``lease_seconds``."""
        rng = random.Random(f"scenario:{seed}")
        long_job = rng.random() < 0.25
        job_seconds = rng.uniform(lease_seconds + 0.5, 2 * lease_seconds) if long_job else rng.uniform(0.02, 0.4)
        fail = rng.choices([None, "retryable", "permanent"], weights=[70, 18, 12])[0]
        kill_after = None
        if rng.random() < 0.03:
            job_seconds = max(job_seconds, rng.uniform(1.5, lease_seconds + 1))
            kill_after = rng.uniform(0.1, job_seconds / 2)
        minute = seed % (60 * 24 * 365 * 10)  # one run a minute from 2026-01-01, ten years long
        return cls(seed=seed, job_name=f"campaign-{seed}",
                   schedule_time=time.strftime("%Y-%m-%dT%H:%M:00Z", time.gmtime(1767225600 + 60 * minute)),
                   job_seconds=round(job_seconds, 3), fail=fail, fail_times=rng.choice([1, 1, 2]),
                   wave=rng.choices([1, 2, 3, 4], weights=[40, 30, 20, 10])[0], kill_after=kill_after,
                   late_duplicate=rng.random() < 0.3)

    def plan(self) -> dict[str, Any]:
        """The recording job's plan for this run (see ``scheduler_dedup.local.demo.recording_job``)."""
        plan: dict[str, Any] = {"sleep": self.job_seconds}
        if self.fail:
            plan.update(fail=self.fail, fail_times=self.fail_times)
        return plan


@dataclass
class Answer:
    """One delivery and what came back.

    Attributes:
        instance: index of the handler process it went to.
        status: HTTP status, 0 when there was no answer (connection refused or reset, timeout).
        body: the answer's JSON object, or None if it was not one.
        text: the raw answer (first 300 characters).
        in_time: answered within the attempt deadline.
        error: why there was no answer.
    """

    instance: int
    status: int = 0
    body: dict[str, Any] | None = None
    text: str = ""
    in_time: bool = False
    error: str = ""
    sent_at: float = 0.0
    answered_at: float = 0.0
    done: threading.Event = field(default_factory=threading.Event, repr=False)

    @property
    def outcome(self) -> str:
        return str(self.body.get("status", "")) if self.body else ("no answer" if not self.status else "non-json")


@dataclass
class ScenarioResult:
    """Everything observed of one scenario, for the invariants and the report."""

    scenario: Scenario
    answers: list[Answer]
    events: list[dict[str, Any]]
    killed_at: dict[str, float]
    record: dict[str, Any] | None
    run_id: str
    faults: list[tuple[float, str, str]]
    acknowledged: bool
    started: float = 0.0
    violations: list[str] = field(default_factory=list)

    def trace(self) -> list[str]:
        """What happened to this run, in time order (seconds from its first delivery), to debug a violation."""
        lines: list[tuple[float, str]] = []
        for i, a in enumerate(self.answers):
            lines.append((a.sent_at, f"delivery {i} -> instance {a.instance}"))
            lines.append((a.answered_at, f"delivery {i} answered {a.status or a.error} {a.outcome}"
                                         f"{'' if a.in_time else ' (late)'}"))
        for e in self.events:
            what = "started" if e["event"] == "start" else f"ended {e['outcome']}"
            lines.append((e["seen"], f"attempt {e['attempt_id'][:8]} (pid {e['pid']}) {what}"))
        for attempt, t in self.killed_at.items():
            lines.append((t, f"SIGKILL of the process running attempt {attempt[:8]}"))
        for t, step, kind in self.faults:
            lines.append((t, f"fault {kind} on {step}"))
        record = {k: self.record.get(k) for k in ("status", "attempt_id", "previous_attempt_id", "attempts")} \
            if self.record else None
        return [f"{t - self.started:7.2f}s {text}" for t, text in sorted(lines)] + [f"record: {record}"]


class _ExecutionsLog:
    """Tails the recording job's executions log shared by all handler processes."""

    def __init__(self, path: Path):
        self.path = path
        self._cond = threading.Condition()
        self._by_job: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self._offset = 0  # bytes of the log read so far
        self._partial = b""  # the start of a line still being written
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="executions-log", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(0.02):
            try:
                with open(self.path, "rb") as fh:
                    fh.seek(self._offset)
                    chunk = fh.read()
            except FileNotFoundError:
                continue
            if not chunk:
                continue
            lines = (self._partial + chunk).split(b"\n")
            partial = lines.pop()
            seen = time.monotonic()
            events = [{**json.loads(line), "seen": seen} for line in lines if line.strip()]
            with self._cond:
                for event in events:
                    self._by_job[event["job_name"]].append(event)
                self._offset += len(chunk)
                self._partial = partial
                self._cond.notify_all()

    def sync(self, timeout: float = 10.0) -> None:
        """Wait until every event written before this call has been read (a killed attempt's last
        event may have been written a moment before its process died)."""
        try:
            size = os.path.getsize(self.path)
        except FileNotFoundError:
            return
        self.wait(lambda: self._offset >= size and not self._partial, timeout)

    def events(self, job_name: str) -> list[dict[str, Any]]:
        with self._cond:
            return list(self._by_job.get(job_name, ()))

    def wait(self, predicate: Callable[[], bool], timeout: float) -> bool:
        with self._cond:
            return self._cond.wait_for(predicate, timeout)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


def _group_members(pgid: int) -> list[int]:
    """The pids of the processes in process group ``pgid`` (from /proc; the group's leader included)."""
    members = [pgid]
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2:].split()  # after "pid (comm) ": state, ppid, pgrp, ...
            if len(fields) > 2 and int(fields[2]) == pgid:
                members.append(int(entry))
    return members


class _Fleet:
    """The handler processes; a killed one is replaced by a fresh process in the background."""

    def __init__(self, env: dict[str, str], count: int, baseline: bool = False):
        self._env = env
        self._baseline = baseline
        self._lock = threading.Lock()
        self.servers: list[HandlerServer | None] = []
        self.killed_pids: dict[int, float] = {}  # pid of every process of a killed group -> time of its SIGKILL
        self.kills = 0
        with futures.ThreadPoolExecutor(count) as pool:
            self.servers = list(pool.map(lambda _: self._start(), range(count)))
        self._restarts: list[threading.Thread] = []

    def _start(self) -> HandlerServer:
        """A new handler process, warmed with a run of its own (store connection, imports) as Cloud Run's
        startup probe would, so its first scenario's store calls are not slowed past the store timeout."""
        server = HandlerServer(self._env, threads=32, baseline=self._baseline).start()
        warm_up = {"X-CloudScheduler-JobName": f"warm-up-{server.port}-{time.monotonic_ns()}",
                   "X-CloudScheduler-ScheduleTime": "2000-01-01T00:00:00Z"}
        for _ in range(3):  # the warm-up meets faults like any run; it only has to reach the store once
            try:
                if requests.post(server.url, headers=warm_up, timeout=60).status_code < 500:
                    break
            except requests.RequestException:
                pass
        return server

    def url(self, index: int) -> str | None:
        """The URL of process ``index``, or of a live one while it is being replaced (Cloud Run routes
        requests to live instances only); None if none is up."""
        with self._lock:
            live = [s for s in self.servers[index:] + self.servers[:index] if s is not None]
        return live[0].url if live else None

    def owner_of(self, pid: int) -> int | None:
        """The process group (the handler process) of a live pid, or None if it is gone."""
        try:
            return os.getpgid(pid)
        except OSError:
            return None

    def kill_group(self, pgid: int) -> bool:
        """SIGKILL the handler process whose process group is ``pgid`` and start a replacement."""
        with self._lock:
            found = [i for i, s in enumerate(self.servers) if s is not None and s.proc is not None
                     and s.proc.pid == pgid]
            if not found:
                return False
            index = found[0]
            victim = self.servers[index]
            self.servers[index] = None
            self.kills += 1
        assert victim is not None
        now = time.monotonic()
        for pid in _group_members(pgid):
            self.killed_pids[pid] = now
        victim.kill()
        victim.stop()
        thread = threading.Thread(target=self._replace, args=(index, victim), daemon=True)
        thread.start()
        self._restarts.append(thread)
        return True

    def _replace(self, index: int, victim: HandlerServer) -> None:
        victim.remove_log()
        server = self._start()
        with self._lock:
            self.servers[index] = server

    def logs(self) -> str:
        with self._lock:
            return "\n".join(s.log()[-4000:] for s in self.servers if s is not None)

    def close(self) -> None:
        for thread in self._restarts:
            thread.join(timeout=60)
        with self._lock:
            servers, self.servers = [s for s in self.servers if s is not None], []
        for server in servers:
            server.stop()
            server.remove_log()


class _FaultLog:
    """Per document (run id): the faults the proxy injected and the calls the store took too long to answer.

    :meth:`of` lists ``(monotonic time the call arrived, step, kind)``; ``kind`` is a fault kind, or
    ``"slow"`` for a call without a fault that the proxy held longer than ``slow_seconds`` (the
    emulator itself was slower than the store timeout, e.g. on a loaded machine). Faults are known
    from the moment the call arrives, so a call still held by a ``delay`` counts.
    """

    def __init__(self, proxy: FaultPlan, slow_seconds: float) -> None:
        self._proxy = proxy
        self._lock = threading.Lock()
        self._slow_seconds = slow_seconds
        self._slow: dict[str, list[tuple[float, str, str]]] = defaultdict(list)
        self.calls: dict[str, Counter[str]] = defaultdict(Counter)

    def __call__(self, call: Call, kind: str | None, seconds: float) -> None:
        if not call.document:
            return
        with self._lock:
            self.calls[call.document][call.step] += 1
            if kind is None and seconds >= self._slow_seconds:
                self._slow[call.document].append((time.monotonic() - seconds, call.step, "slow"))

    def of(self, run_id: str) -> list[tuple[float, str, str]]:
        injected = [(i["time"], i["step"], i["kind"]) for i in self._proxy.injected_on(run_id)]
        with self._lock:
            return sorted(injected + self._slow.get(run_id, []))


def _deliver(url: str | None, headers: dict[str, str], answer: Answer, deadline: float) -> None:
    sent = answer.sent_at = time.monotonic()
    try:
        if url is None:
            answer.error = "instance down"
            return
        response = requests.post(url, headers=headers, data=b"", timeout=90)
        answer.status = response.status_code
        answer.text = response.text[:300]
        answer.in_time = time.monotonic() - sent <= deadline
        try:
            body = response.json()
        except ValueError:
            body = None
        answer.body = body if isinstance(body, dict) else None
    except requests.RequestException as exc:
        answer.error = type(exc).__name__
    finally:
        answer.answered_at = time.monotonic()
        answer.done.set()


def play(scenario: Scenario, cfg: CampaignConfig, fleet: _Fleet, log: _ExecutionsLog, faults: _FaultLog,
         records: RunStore) -> ScenarioResult:
    """Deliver one scenario's run at least once, as Cloud Scheduler would, and gather what happened."""
    rng = random.Random(f"deliveries:{scenario.seed}")
    headers = {"X-CloudScheduler-JobName": scenario.job_name, "X-CloudScheduler-ScheduleTime": scenario.schedule_time,
               "User-Agent": "Google-Cloud-Scheduler"}
    answers: list[Answer] = []
    threads: list[threading.Thread] = []
    started = time.monotonic()

    def send() -> Answer:
        answer = Answer(instance=rng.randrange(cfg.instances))
        answers.append(answer)
        thread = threading.Thread(target=_deliver, args=(fleet.url(answer.instance), headers, answer,
                                                         cfg.attempt_deadline), daemon=True)
        thread.start()
        threads.append(thread)
        return answer

    def acked() -> bool:
        return any(a.in_time and 200 <= a.status < 300 for a in answers)

    killer: threading.Thread | None = None
    if scenario.kill_after is not None:
        def kill() -> None:
            starts: list[dict[str, Any]] = []

            def started() -> bool:
                starts[:] = [e for e in log.events(scenario.job_name) if e["event"] == "start"]
                return bool(starts)

            if log.wait(started, timeout=30):
                time.sleep(scenario.kill_after or 0)
                owner = fleet.owner_of(int(starts[0]["pid"]))
                ended = any(e["event"] == "end" and e["attempt_id"] == starts[0]["attempt_id"]
                            for e in log.events(scenario.job_name))
                if owner is not None and not ended:
                    fleet.kill_group(owner)

        killer = threading.Thread(target=kill, daemon=True)

    wave = [send() for _ in range(scenario.wave)]
    if killer is not None:
        killer.start()
    current = wave[-1]
    sent = len(wave)
    backoff = 0.25
    while True:
        current.done.wait(cfg.attempt_deadline)
        if acked() or sent >= cfg.max_deliveries:
            break
        time.sleep(backoff)
        backoff = min(backoff * 2, 2.0)
        if acked():
            break
        current = send()
        sent += 1
    acknowledged = acked()
    if acknowledged and scenario.late_duplicate:
        send()
    if killer is not None:
        killer.join(timeout=60)
    for thread in threads:
        thread.join(timeout=120)

    def executions_settled() -> bool:
        events = log.events(scenario.job_name)
        open_attempts = {e["attempt_id"]: e["pid"] for e in events if e["event"] == "start"}
        for e in events:
            if e["event"] == "end":
                open_attempts.pop(e["attempt_id"], None)
        return all(int(pid) in fleet.killed_pids for pid in open_attempts.values())

    log.wait(executions_settled, timeout=60)
    log.sync()
    events = log.events(scenario.job_name)
    killed_at = {str(e["attempt_id"]): fleet.killed_pids[int(e["pid"])] for e in events
                 if e["event"] == "start" and int(e["pid"]) in fleet.killed_pids}
    run_ids = {str(a.body["run_id"]) for a in answers if a.body and a.body.get("run_id")} | \
        {str(e["run_id"]) for e in events}
    docs = [r for page in records.job_run_pages(scenario.job_name, since=None, until=None, page_size=20)
            for r in page]
    run_ids |= {d.run_id for d in docs}
    run_id = sorted(run_ids)[0] if len(run_ids) == 1 else ",".join(sorted(run_ids))
    record = dict(docs[0].data) if len(docs) == 1 else None
    return ScenarioResult(scenario=scenario, answers=answers, events=events, killed_at=killed_at, record=record,
                          run_id=run_id, faults=faults.of(run_id), acknowledged=acknowledged, started=started)


def renewals_failed_within_a_lease(result: ScenarioResult, since: float, until: float, lease_seconds: float) -> bool:
    """True if two of the run's renewal calls between ``since`` and ``until`` (monotonic seconds) were faulted or
    slow within one lease of each other: renewals come every third of the lease and each failure can cost up to
    two store timeouts (the write, then the read that checks the record), so two such failures let a live
    attempt's lease lapse, and the retry that then takes the run over runs the job again, by design
    (docs/failures.md, "renewals fail")."""
    times = sorted(t for t, step, _ in result.faults if step == "renewal" and since <= t <= until)
    return any(later - earlier <= lease_seconds for earlier, later in zip(times, times[1:]))


def check(result: ScenarioResult, cfg: CampaignConfig) -> list[str]:
    """The invariants, checked on everything one scenario did. Returns the violations (empty: all held).

    1. At most one execution per run: every execution after the first must follow an attempt
       that was SIGKILLed (before it started), that failed retryably (its claim is released
       on purpose), or whose renewals the store failed twice within one lease
       (:func:`renewals_failed_within_a_lease`). Those re-runs are counted apart.
    2. A run whose deliveries continue ends ``completed`` or ``failed``: the simulated Scheduler
       retries until an answer is 2xx within its attempt deadline, and its retry budget
       (``max_deliveries``, far beyond a lease) is never used up; an acknowledged run's record is
       ``completed`` or ``failed``. The record tells the truth: ``completed`` only if an
       execution ended well, ``failed`` only if one failed permanently.
    3. No ``fenced`` answer unless another attempt really took the run over: no more ``fenced``
       answers than attempts that a later attempt took over while they were alive. Likewise no
       ``duplicate`` unless an execution ended well, no ``failed`` unless one failed permanently.
    4. Every answer is the JSON contract: a JSON object with a ``status`` field.
    5. The attempt that ran the job answers what it did (``processed`` 200, ``failed`` 200,
       ``released`` 500), unless the store was unreachable for that run longer than the store
       timeout while the outcome was being recorded (a ``delay`` fault held a completion, failure,
       release or read call beyond the timeout, or the emulator itself took that long: ``slow``):
       then ``store_error`` may stand in for it. No answer claims an execution that did not happen.
       An attempt whose process was SIGKILLed may or may not have answered.
    """
    v: list[str] = []
    starts = [e for e in result.events if e["event"] == "start"]
    ends = {e["attempt_id"]: e for e in result.events if e["event"] == "end"}
    killed = result.killed_at

    # 1. one execution, except re-runs after a killed attempt, a retryable failure, or a lease the store did not
    #    let its live holder renew (the lease's promise: one failed renewal per lease is survived, two are not)
    for index, start in enumerate(starts[1:], 1):
        excused = sum(1 for earlier in starts[:index]
                      if killed.get(earlier["attempt_id"], float("inf")) <= start["seen"]
                      or (earlier["attempt_id"] in ends and ends[earlier["attempt_id"]]["outcome"] == "retryable"
                          and result.events.index(ends[earlier["attempt_id"]]) < result.events.index(start))
                      or renewals_failed_within_a_lease(result, earlier["seen"], start["seen"], cfg.lease_seconds))
        if excused < index:
            v.append(f"execution {index + 1} started while {index - excused} earlier attempt(s) were neither "
                     f"killed nor released ({len(starts)} executions, {len(killed)} killed)")
            break

    # 2. the run ends completed or failed, and the record says what is true
    status = (result.record or {}).get("status")
    if not result.acknowledged:
        v.append(f"not acknowledged after {len(result.answers)} deliveries; record {status or 'missing'}")
    elif status not in ("completed", "failed"):
        v.append(f"acknowledged, but the record is {status or 'missing'}")
    outcomes_ended = Counter(e["outcome"] for e in ends.values())
    if status == "completed" and not outcomes_ended["ok"]:
        v.append("record completed, but no execution ended well")
    if status == "failed" and not outcomes_ended["permanent"]:
        v.append("record failed, but no execution failed permanently")

    answered = [a for a in result.answers if a.status]
    outcomes = Counter(a.outcome for a in answered)

    # 3. fenced only after a real takeover: by a later attempt, of an attempt that was not dead by then
    fenced = outcomes["fenced"]
    taken_over = sum(1 for i, a in enumerate(starts) if any(
        killed.get(a["attempt_id"], float("inf")) > b["seen"] for b in starts[i + 1:]))
    if fenced > taken_over:
        v.append(f"{fenced} fenced answer(s), but {taken_over} attempt(s) were taken over by a later one")
    if outcomes["duplicate"] and not outcomes_ended["ok"]:
        v.append("answered duplicate, but no execution ended well")
    if outcomes["failed"] and not outcomes_ended["permanent"]:
        v.append("answered failed, but no execution failed permanently")

    # 4. the JSON contract
    for a in answered:
        if a.body is None or "status" not in a.body:
            v.append(f"answer {a.status} is not the JSON contract: {a.text[:120]!r}")

    # 5. the attempt that ran the job answers what it did
    # The store was unreachable for the recording of an outcome: a call of a recording step (or its
    # re-read) held beyond the timeout after an execution ended (its end is logged just before).
    first_end = min((e["seen"] for e in ends.values()), default=float("inf"))
    unreachable = any(kind in ("delay", "slow") and step in ("completion", "failure", "release", "read")
                      and t >= first_end - 1.0 for t, step, kind in result.faults)
    for name, ended, code in (("processed", "ok", 200), ("released", "retryable", 500), ("failed", "permanent", 200)):
        most = sum(1 for e in ends.values() if e["outcome"] == ended)
        least = sum(1 for a, e in ends.items() if e["outcome"] == ended and a not in killed)
        got = outcomes[name]
        if name != "failed" and got > most:  # duplicates of a failed run answer failed too
            v.append(f"{got} {name} answer(s) for {most} execution(s) that ended {ended}")
        if got < least and not (unreachable and got + outcomes["store_error"] >= least):
            v.append(f"{least} execution(s) ended {ended} but {got} answered {name} {code} "
                     f"(answers {dict(outcomes)}; store unreachable beyond its timeout: {unreachable})")
    said_ran = sum(1 for a in answered if a.outcome == "store_error" and a.body and a.body.get("executed") is True)
    if said_ran > len(ends):
        v.append(f"{said_ran} store_error answer(s) say the job ran, but {len(ends)} execution(s) ended")
    for a in answered:
        if a.outcome in ("processed", "duplicate", "failed") and a.status != 200:
            v.append(f"{a.outcome} answered {a.status}")
    return v


@dataclass
class CampaignReport:
    """What a campaign did: per-step fault counts, tallies and the violations by scenario seed."""

    config: CampaignConfig
    results: list[ScenarioResult]
    faults: Counter[tuple[str, str]]
    calls: Counter[str]
    kills: int
    seconds: float

    @property
    def violations(self) -> list[tuple[int, str]]:
        return [(r.scenario.seed, v) for r in self.results for v in r.violations]


def run_campaign(cfg: CampaignConfig, console: Console | None = None,
                 server: StoreServer | None = None) -> CampaignReport:
    """Start the fault proxy and the handler processes, and play ``cfg.scenarios`` scenarios.

    Args:
        cfg: the campaign.
        console: where progress and violations are printed.
        server: a running store server of ``cfg.store`` to use (its ``campaign_runs`` collection); None starts one.

    Raises:
        EmulatorNotFoundError, EmulatorStartError: the store server cannot run.
        RuntimeError: a handler process did not start.
    """
    if cfg.instances < 2:
        raise ValueError(f"instances={cfg.instances}: the campaign needs at least 2 handler processes")
    console = console or Console()
    with contextlib.ExitStack() as stack:
        if server is None:
            server = stack.enter_context(store_server(cfg.store))
        return _run(cfg, console, server)
    raise AssertionError("unreachable")


def _run(cfg: CampaignConfig, console: Console, server: StoreServer) -> CampaignReport:
    started = time.monotonic()
    scenarios = [Scenario.generate(cfg.seed + i, cfg.lease_seconds) for i in range(cfg.scenarios)]
    workdir = Path(tempfile.mkdtemp(prefix="scheduler-dedup-campaign-"))
    plan_file, executions = workdir / "plan.json", workdir / "executions.jsonl"
    plan_file.write_text(json.dumps({s.job_name: s.plan() for s in scenarios}))
    results: list[ScenarioResult] = []
    server.prepare(COLLECTION)
    with server.fault_proxy(max_workers=128) as proxy:
        env = {**server.endpoint_env(proxy.host), "DEDUP_JOB": _JOB, "DEDUP_COLLECTION": COLLECTION, "DEMO_JOB_PLAN": str(plan_file),
               "DEMO_EXECUTIONS_LOG": str(executions), "DEDUP_LEASE_SECONDS": str(cfg.lease_seconds),
               "DEDUP_STORE_TIMEOUT_SECONDS": str(cfg.store_timeout_seconds)}
        console.print(f"{server.display_name} {server.host}, fault proxy {proxy.host}; starting {cfg.instances} "
                      f"handler processes (lease {cfg.lease_seconds:g} s, store timeout "
                      f"{cfg.store_timeout_seconds:g} s)...")
        fleet = _Fleet(env, cfg.instances, cfg.baseline)
        log = _ExecutionsLog(executions)
        records = server.connect(COLLECTION)  # reads the server itself, not through the proxy
        fault_log = _FaultLog(proxy, slow_seconds=0.9 * cfg.store_timeout_seconds)
        proxy.observe(fault_log)
        proxy.set_random(rate=cfg.fault_rate, seed=0, kinds=cfg.kinds, steps=PROTOCOL_STEPS,
                         delay_seconds=cfg.delay_seconds)
        try:
            with futures.ThreadPoolExecutor(cfg.concurrency, thread_name_prefix="scenario") as pool:
                pending = [pool.submit(play, s, cfg, fleet, log, fault_log, records) for s in scenarios]
                for done, fut in enumerate(futures.as_completed(pending), 1):
                    result = fut.result()
                    result.violations = check(result, cfg)
                    results.append(result)
                    if result.violations:
                        console.print(f"[red]violation[/red] seed {result.scenario.seed} ({result.run_id[:12]}): "
                                      + "; ".join(result.violations), soft_wrap=True)
                    if done % 50 == 0:
                        console.print(f"  {done}/{len(scenarios)} scenarios, "
                                      f"{sum(len(r.violations) for r in results)} violations")
        finally:
            log.close()
            fleet.close()
        faults: Counter[tuple[str, str]] = Counter()
        calls: Counter[str] = Counter()
        for r in results:  # counted now, so calls still held when a scenario was checked count too
            for _, step, kind in fault_log.of(r.run_id):
                faults[(step, kind)] += 1
            calls.update(fault_log.calls.get(r.run_id, Counter()))
    shutil.rmtree(workdir, ignore_errors=True)
    results.sort(key=lambda r: r.scenario.seed)
    return CampaignReport(cfg, results, faults, calls, fleet.kills, time.monotonic() - started)


def tables(report: CampaignReport) -> Iterator[Table]:
    """The report as rich tables: faults per step and kind, then the tallies."""
    cfg = report.config
    faults = Table(title=f"Faults injected per store call (rate {cfg.fault_rate:.0%}, seeds {cfg.seed}.."
                         f"{cfg.seed + cfg.scenarios - 1})")
    faults.add_column("step")
    faults.add_column("calls", justify="right")
    for kind in cfg.kinds:
        faults.add_column(kind, justify="right")
    faults.add_column("faults", justify="right")
    faults.add_column("slow*", justify="right")
    faults.caption = "* calls the store server itself answered slower than 90% of the store timeout (not injected)"
    for step in [*PROTOCOL_STEPS, None]:
        steps = PROTOCOL_STEPS if step is None else (step,)
        row = [sum(report.faults.get((s, k), 0) for s in steps) for k in cfg.kinds]
        faults.add_row(step or "all", str(sum(report.calls.get(s, 0) for s in steps)), *map(str, row), str(sum(row)),
                       str(sum(report.faults.get((s, "slow"), 0) for s in steps)),
                       style="bold" if step is None else None)
    yield faults

    summary = Table(title="Campaign")
    summary.add_column("")
    summary.add_column("count", justify="right")
    rs = report.results
    answers = Counter(a.outcome for r in rs for a in r.answers)
    starts = [(r, e) for r in rs for e in r.events if e["event"] == "start"]
    ends = {e["attempt_id"]: e["outcome"] for r in rs for e in r.events if e["event"] == "end"}
    killed = sum(1 for r, e in starts if e["attempt_id"] in r.killed_at)
    statuses = Counter((r.record or {}).get("status", "missing") for r in rs)
    rows = [
        ("scenarios", len(rs)),
        ("with a job longer than the lease", sum(1 for r in rs if r.scenario.job_seconds > cfg.lease_seconds)),
        ("with concurrent duplicate deliveries", sum(1 for r in rs if r.scenario.wave > 1)),
        ("deliveries", sum(len(r.answers) for r in rs)),
        ("answers " + ", ".join(f"{k} {n}" for k, n in sorted(answers.items())), sum(answers.values())),
        ("executions (job starts)", len(starts)),
        ("  attempts SIGKILLed (their runs may run again)", killed),
        ("  re-runs after a retryable failure", sum(1 for o in ends.values() if o == "retryable")),
        ("SIGKILLs of a handler process", report.kills),
        ("runs completed / failed", f"{statuses.get('completed', 0)} / {statuses.get('failed', 0)}"),
        ("faults injected", sum(n for (_, kind), n in report.faults.items() if kind != "slow")),
        ("violations", len(report.violations)),
        ("seconds", f"{report.seconds:.0f}"),
    ]
    for label, value in rows:
        summary.add_row(label, str(value), style="bold red" if label == "violations" and value else None)
    yield summary


def run_cli(cfg: CampaignConfig, traces: int = 5) -> int:
    """Run a campaign, print its tables, each violation with its seed and the traces of the first
    ``traces`` violating scenarios (of the one scenario, violating or not, when the campaign has one:
    that is how a seed is replayed); returns 1 if any invariant was violated, else 0."""
    console = Console(width=max(Console().width, 120))
    report = run_campaign(cfg, console)
    traced = report.results if len(report.results) == 1 else [r for r in report.results if r.violations][:traces]
    for result in traced:
        console.print(f"[bold]seed {result.scenario.seed}[/bold] {result.scenario}", soft_wrap=True)
        for line in result.trace():
            console.print("  " + line, soft_wrap=True, highlight=False)
    for table in tables(report):
        console.print(table)
    if report.violations:
        for seed, violation in report.violations:
            console.print(f"[red]seed {seed}[/red]: {violation}", soft_wrap=True)
        console.print(f"Replay one with `scheduler-dedup campaign --seed SEED --scenarios 1 --fault-rate {cfg.fault_rate}`")
        return 1
    console.print(f"[green bold]OK[/green bold]: every invariant held over {len(report.results)} scenarios.")
    return 0

