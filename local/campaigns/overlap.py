"""``scheduler-dedup campaign --overlap skip``: seeded scenarios of one job whose runs come faster than they finish,
against real handler processes behind the fault proxy, checked by the overlap invariants.

Each scenario is one job (``DEDUP_OVERLAP=skip``) with a few fire times delivered at least once each, as Cloud
Scheduler would (duplicate waves, retries after the attempt deadline), while earlier ones still run; the fault
proxy hits every protocol step of every record, the job's overlap lease included, as
:mod:`scheduler_dedup.local.campaigns.campaign` does. The invariants (:func:`check_overlap`):

* **no overlap**: no two executions of the job run at once (a start never falls between another's start and
  end in the executions log), unless the lease's documented limit explains it: two renewals of the overlap lease
  faulted or slow within one lease (the holder's lease lapsed while its job ran);
* **decided**: every fire time acknowledged (2xx in time) has a final record, ``completed`` or
  ``skipped_overlap``, and the acknowledged answer says the same;
* **skipped never runs**: a fire time recorded ``skipped_overlap`` has no execution.
"""

from __future__ import annotations

import json
import random
import shutil
import tempfile
import threading
import time
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from scheduler_dedup.handler.protocol.overlap_lease import lease_id
from scheduler_dedup.handler.schedule.run_key import RunKey, parse_schedule_time
from scheduler_dedup.handler.stores.base import RunStore
from scheduler_dedup.local.campaigns.delivery import deliver
from scheduler_dedup.local.campaigns.fleet import Fleet
from scheduler_dedup.local.campaigns.observers import ExecutionsLog, FaultLog
from scheduler_dedup.local.campaigns.results import Answer
from scheduler_dedup.local.campaigns.scenarios import CAMPAIGN_KINDS, CampaignConfig
from scheduler_dedup.local.faults.grpc_proxy import PROTOCOL_STEPS
from scheduler_dedup.local.servers.store_servers import StoreServer

COLLECTION = "overlap_campaign_runs"
_JOB = "scheduler_dedup.local.demo.recording_job:run"


@dataclass(frozen=True)
class OverlapScenario:
    """One job's fire times, drawn from its seed: when each is first delivered (seconds from the scenario's
    start), how long its job runs, and how many duplicates its first wave has."""

    seed: int
    job_name: str
    schedule_times: tuple[str, ...]
    offsets: tuple[float, ...]
    job_seconds: tuple[float, ...]
    waves: tuple[int, ...]

    @classmethod
    def generate(cls, seed: int) -> "OverlapScenario":
        rng = random.Random(f"overlap:{seed}")
        n = rng.randint(3, 5)
        base = 1735689600 + 600 * (seed % 50000)  # past fire times (2025), ten minutes apart per seed
        return cls(seed=seed, job_name=f"overlap-{seed}",
                   schedule_times=tuple(time.strftime("%Y-%m-%dT%H:%M:00Z", time.gmtime(base + 60 * i))
                                        for i in range(n)),
                   offsets=tuple(sorted(round(rng.uniform(0, 1.5), 3) for _ in range(n))),
                   job_seconds=tuple(round(rng.uniform(0.2, 1.6), 3) for _ in range(n)),
                   waves=tuple(rng.choices([1, 2, 3], weights=[60, 30, 10])[0] for _ in range(n)))


@dataclass
class OverlapResult:
    scenario: OverlapScenario
    answers: dict[str, list[Answer]]
    events: list[dict[str, Any]]
    records: dict[str, dict[str, Any] | None]  # schedule time -> record
    run_ids: dict[str, str]  # schedule time -> run id
    lease_faults: list[tuple[float, str, str]]
    violations: list[str] = field(default_factory=list)


def _overlaps(events: list[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    running: dict[str, dict[str, Any]] = {}
    pairs: list[tuple[dict[str, Any], dict[str, Any]]] = []
    for event in events:
        if event["event"] == "start":
            pairs.extend((other, event) for other in running.values())
            running[event["attempt_id"]] = event
        else:
            running.pop(event["attempt_id"], None)
    return pairs


def check_overlap(result: OverlapResult, lease_seconds: float) -> list[str]:
    """The overlap invariants of the module docstring; returns the violations."""
    violations = []
    renewals = sorted(t for t, step, _ in result.lease_faults if step == "renewal")
    lapsed = any(b - a <= lease_seconds for a, b in zip(renewals, renewals[1:]))
    for first, second in _overlaps(result.events):
        if not lapsed:
            violations.append(f"attempt {second['attempt_id'][:8]} (run {second['run_id'][:12]}) started while "
                              f"attempt {first['attempt_id'][:8]} (run {first['run_id'][:12]}) ran")
    executed = {e["run_id"] for e in result.events if e["event"] == "start"}
    for t, answers in result.answers.items():
        record = result.records.get(t)
        status = record.get("status") if record else None
        acked = [a for a in answers if a.in_time and 200 <= a.status < 300]
        if acked and status not in ("completed", "skipped_overlap"):
            violations.append(f"{t} acknowledged ({acked[0].outcome}) but its record is {status}")
        for a in acked:
            expected = {"completed": ("processed", "duplicate"), "skipped_overlap": ("skipped_overlap",)}.get(
                status or "", ())
            if a.outcome not in expected:
                violations.append(f"{t} answered {a.outcome} but its record is {status}")
        if status == "skipped_overlap" and result.run_ids[t] in executed:
            violations.append(f"{t} is recorded skipped_overlap but executed")
    return violations


def play_overlap(scenario: OverlapScenario, cfg: CampaignConfig, fleet: Fleet, log: ExecutionsLog,
                 faults: FaultLog, records: RunStore, project: str) -> OverlapResult:
    """Deliver each fire time at least once, from its offset on, as Scheduler would; gather what happened."""
    rng = random.Random(f"overlap-deliveries:{scenario.seed}")
    answers: dict[str, list[Answer]] = {t: [] for t in scenario.schedule_times}
    lock = threading.Lock()

    def one_fire_time(index: int) -> None:
        t = scenario.schedule_times[index]
        time.sleep(scenario.offsets[index])
        headers = {"X-CloudScheduler-JobName": scenario.job_name, "X-CloudScheduler-ScheduleTime": t,
                   "User-Agent": "Google-Cloud-Scheduler"}
        threads: list[threading.Thread] = []

        def send() -> Answer:
            with lock:
                answer = Answer(instance=rng.randrange(cfg.instances))
            answers[t].append(answer)
            thread = threading.Thread(target=deliver, args=(fleet.url(answer.instance), headers, answer,
                                                             cfg.attempt_deadline), daemon=True)
            thread.start()
            threads.append(thread)
            return answer

        current = [send() for _ in range(scenario.waves[index])][-1]
        backoff = 0.25
        while not any(a.in_time and 200 <= a.status < 300 for a in answers[t]) and \
                len(answers[t]) < cfg.max_deliveries:
            current.done.wait(cfg.attempt_deadline)
            if any(a.in_time and 200 <= a.status < 300 for a in answers[t]):
                break
            time.sleep(backoff)
            backoff = min(backoff * 2, 2.0)
            current = send()
        for thread in threads:
            thread.join(timeout=120)

    with futures.ThreadPoolExecutor(len(scenario.schedule_times)) as pool:
        list(pool.map(one_fire_time, range(len(scenario.schedule_times))))

    def settled() -> bool:
        events = log.events(scenario.job_name)
        started = {e["attempt_id"] for e in events if e["event"] == "start"}
        return started <= {e["attempt_id"] for e in events if e["event"] == "end"}

    log.wait(settled, timeout=60)
    log.sync()
    run_ids = {t: RunKey(project, "", scenario.job_name, parse_schedule_time(t)).run_id
               for t in scenario.schedule_times}
    found = {}
    for t, run_id in run_ids.items():
        record = records.get(run_id)
        found[t] = dict(record.data) if record is not None else None
    return OverlapResult(scenario, answers, log.events(scenario.job_name), found, run_ids,
                         faults.of(lease_id(project, "", scenario.job_name)))


@dataclass
class OverlapReport:
    results: list[OverlapResult]
    lease_faults: int
    seconds: float

    @property
    def violations(self) -> list[tuple[int, str]]:
        return [(r.scenario.seed, v) for r in self.results for v in r.violations]


def run_overlap_campaign(cfg: CampaignConfig, server: StoreServer, console: Console | None = None,
                         policy: str = "skip") -> OverlapReport:
    """Play ``cfg.scenarios`` overlap scenarios on ``server`` behind its fault proxy.

    Args:
        policy: the handlers' ``DEDUP_OVERLAP``; ``allow`` shows what the invariants catch.
    """
    console = console or Console()
    started = time.monotonic()
    scenarios = [OverlapScenario.generate(cfg.seed + i) for i in range(cfg.scenarios)]
    workdir = Path(tempfile.mkdtemp(prefix="scheduler-dedup-overlap-campaign-"))
    plan_file, executions = workdir / "plan.json", workdir / "executions.jsonl"
    plan_file.write_text(json.dumps({f"{s.job_name}@{t}": {"sleep": seconds} for s in scenarios
                                     for t, seconds in zip(s.schedule_times, s.job_seconds)}))
    server.prepare(COLLECTION)
    results: list[OverlapResult] = []
    with server.fault_proxy(max_workers=128) as proxy:
        env = {**server.endpoint_env(proxy.host), "DEDUP_JOB": _JOB, "DEDUP_COLLECTION": COLLECTION,
               "DEMO_JOB_PLAN": str(plan_file), "DEMO_EXECUTIONS_LOG": str(executions), "DEDUP_OVERLAP": policy,
               "DEDUP_LEASE_SECONDS": str(cfg.lease_seconds),
               "DEDUP_STORE_TIMEOUT_SECONDS": str(cfg.store_timeout_seconds)}
        console.print(f"{server.display_name}: {cfg.scenarios} overlap scenarios (DEDUP_OVERLAP={policy}), fault rate "
                      f"{cfg.fault_rate:g}, {cfg.instances} handler processes")
        fleet = Fleet(env, cfg.instances)
        log = ExecutionsLog(executions)
        records = server.connect(COLLECTION)
        fault_log = FaultLog(proxy, slow_seconds=0.9 * cfg.store_timeout_seconds)
        proxy.observe(fault_log)
        proxy.set_random(rate=cfg.fault_rate, seed=cfg.seed, kinds=cfg.kinds or CAMPAIGN_KINDS, steps=PROTOCOL_STEPS,
                         delay_seconds=cfg.delay_seconds)
        try:
            with futures.ThreadPoolExecutor(cfg.concurrency) as pool:
                pending = [pool.submit(play_overlap, s, cfg, fleet, log, fault_log, records, server.project)
                           for s in scenarios]
                for fut in futures.as_completed(pending):
                    result = fut.result()
                    result.violations = check_overlap(result, cfg.lease_seconds)
                    results.append(result)
                    for violation in result.violations:
                        console.print(f"[red]violation[/red] seed {result.scenario.seed}: {violation}",
                                      soft_wrap=True)
        finally:
            log.close()
            fleet.close()
            records.close()
    shutil.rmtree(workdir, ignore_errors=True)
    results.sort(key=lambda r: r.scenario.seed)
    lease_faults = sum(len([f for f in r.lease_faults if f[2] != "slow"]) for r in results)
    return OverlapReport(results, lease_faults, time.monotonic() - started)
