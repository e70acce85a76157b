"""``scheduler-dedup campaign``: seeded fault scenarios against real handler processes, checked by invariants.

A fault proxy between the handler processes and a real local store server hits each store call of every protocol step
with probability ``fault_rate`` (fail it before sending, apply it and lose the answer, or hold it beyond the store
timeout), while each scenario plays at-least-once delivery (:mod:`.delivery`). After each scenario the invariants
(:mod:`.invariants`) are checked on what happened. A scenario is fully described by its seed (:mod:`.scenarios`).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
import time
from collections import Counter
from concurrent import futures
from pathlib import Path

from rich.console import Console

from scheduler_dedup.local.campaigns.delivery import play
from scheduler_dedup.local.campaigns.fleet import Fleet
from scheduler_dedup.local.campaigns.invariants import check
from scheduler_dedup.local.campaigns.observers import ExecutionsLog, FaultLog
from scheduler_dedup.local.campaigns.report import CampaignReport, tables
from scheduler_dedup.local.campaigns.results import ScenarioResult
from scheduler_dedup.local.campaigns.scenarios import CampaignConfig, Scenario
from scheduler_dedup.local.faults.grpc_proxy import PROTOCOL_STEPS
from scheduler_dedup.local.servers.store_servers import StoreServer, store_server

COLLECTION = "campaign_runs"
_JOB = "scheduler_dedup.local.demo.recording_job:run"


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
        fleet = Fleet(env, cfg.instances, cfg.baseline)
        log = ExecutionsLog(executions)
        records = server.connect(COLLECTION)  # reads the server itself, not through the proxy
        fault_log = FaultLog(proxy, slow_seconds=0.9 * cfg.store_timeout_seconds)
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
