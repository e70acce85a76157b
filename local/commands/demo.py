"""``scheduler-dedup demo``: at-least-once Scheduler traffic with faults, with and without dedup, side by side.

Starts a real local store server (the Firestore emulator by default; ``--store`` picks another store of
:mod:`scheduler_dedup.local.servers.store_servers`), two dedup handler instances and two no-dedup baseline
instances under functions-framework on 127.0.0.1, plays the same faulty deliveries of a
unix-cron schedule's runs against each, reads what the job recorded, prints tables and exits
1 if any run did not execute exactly once with dedup (a crashed or failed attempt may be re-run:
that is counted apart).
"""

from __future__ import annotations

import json
import random
from collections import Counter
from contextlib import ExitStack
import tempfile
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import requests
from rich.console import Console
from rich.markup import escape
from rich.progress import Progress
from rich.table import Table

from scheduler_dedup.handler.monitoring.comparison import DEFAULT_GRACE_SECONDS, compare
from scheduler_dedup.handler.monitoring.findings import FAILED_RUN, MISSED, STUCK_RUN, Report
from scheduler_dedup.handler.monitoring.run_history import RunHistory
from scheduler_dedup.handler.monitoring.run_view import rfc3339
from scheduler_dedup.handler.schedule.run_key import RunKey
from scheduler_dedup.local.commands.console import make_console, runs_command_line
from scheduler_dedup.local.servers.store_servers import (EmulatorNotFoundError, EmulatorStartError, StoreServer, running,
                                                         store_server)
from scheduler_dedup.local.demo.recording_job import read_events
from scheduler_dedup.local.commands.runs import add_run_row, report_summary, report_table, runs_table
from scheduler_dedup.local.servers.handlers import HandlerServer
from scheduler_dedup.local.servers.held_signals import signals_held
from scheduler_dedup.local.demo.simulator import FAULT_TITLES, FAULTS, RetryConfig, RunReport, Scheduler, schedule_times

JOB_NAME = "nightly-report"
LEASE_SECONDS = 3
_FAULT_PLAN: dict[str, dict[str, Any]] = {
    "clean": {"sleep": 0.1},
    "deadline": {"sleep": 3.0},
    "lost_response": {"sleep": 0.3},
    "concurrent": {"sleep": 0.5},
    "crash": {"sleep": 2.0},
    "failure": {"sleep": 0.1, "fail": "retryable", "fail_times": 1},
}


@dataclass
class RunTally:
    """What one run's deliveries and executions came to, on one side."""

    report: RunReport
    starts: int
    completions: int
    crashed: int
    failed: int

    @property
    def unexplained_reruns(self) -> int:
        """Executions beyond the first that no crash or failure of an earlier attempt explains."""
        return max(0, self.starts - self.crashed - self.failed - 1)

    @property
    def exactly_once(self) -> bool:
        return self.completions == 1 and self.unexplained_reruns == 0


class _Side:
    """Two instances of one handler kind, their shared executions log, and crash-and-replace."""

    def __init__(self, name: str, env: dict[str, str], baseline: bool, workdir: Path):
        self.name = name
        self.log = workdir / f"{name}-executions.jsonl"
        self.env = {**env, "DEMO_EXECUTIONS_LOG": str(self.log)}
        self.baseline = baseline
        self.replaced: list[HandlerServer] = []  # every instance started (crashed ones too), stopped on close
        self.servers: list[HandlerServer] = []
        self.lock = threading.Lock()

    def __enter__(self) -> "_Side":
        try:
            for _ in range(2):
                self.servers.append(self._start())
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _start(self) -> HandlerServer:
        with signals_held():  # its log file is in self.replaced (which close() removes) before Ctrl-C acts
            server = HandlerServer(self.env, baseline=self.baseline, threads=16)
            self.replaced.append(server)  # owned (stopped and its log removed on close) from before it starts
        server.start()
        # Warm the instance (store connection, imports) with a run of its own, as Cloud Run's startup
        # probe would, so the first scheduled delivery is not slowed past the attempt deadline.
        warm_up = {"X-CloudScheduler-JobName": f"warm-up-{server.port}",
                   "X-CloudScheduler-ScheduleTime": "2000-01-01T00:00:00Z"}
        requests.post(server.url, headers=warm_up, timeout=60)
        return server

    def urls(self) -> list[str]:
        with self.lock:
            return [s.url for s in self.servers]

    def crash(self, url: str, run_id: str) -> None:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if any(e["event"] == "start" and e["run_id"] == run_id for e in read_events(self.log)):
                break
            time.sleep(0.02)
        with self.lock:
            (victim,) = [s for s in self.servers if s.url == url]
            victim.kill()
            self.servers[self.servers.index(victim)] = self._start()
        victim.stop()

    def close(self) -> None:
        """Stop every instance ever started (crashed ones included) and remove its log; one that fails to stop
        still has its log removed, and the others are still stopped."""
        with ExitStack() as cleanup:
            for server in self.replaced:
                cleanup.callback(server.remove_log)
                cleanup.callback(server.stop)


def _tally(report: RunReport, events: list[dict[str, Any]], run_id: str) -> RunTally:
    mine = [e for e in events if e["run_id"] == run_id]
    started = {e["attempt_id"] for e in mine if e["event"] == "start"}
    ended = {e["attempt_id"]: e["outcome"] for e in mine if e["event"] == "end"}
    return RunTally(report=report, starts=len(started), completions=sum(1 for o in ended.values() if o == "ok"),
                    crashed=len(started - set(ended)), failed=sum(1 for o in ended.values() if o != "ok"))


def _play(side: _Side, project: str, times: list[datetime], faults: list[str], retry: RetryConfig,
          progress: Progress, task: Any) -> list[RunTally]:
    current: dict[str, str] = {}
    scheduler = Scheduler(side.urls, JOB_NAME, retry, crash=lambda url: side.crash(url, current["run_id"]))
    reports = []
    for when, fault in zip(times, faults):
        current["run_id"] = RunKey(project, "", JOB_NAME, when).run_id
        progress.update(task, description=f"[{side.name}] {when:%H:%M} {FAULT_TITLES[fault]}")
        reports.append((scheduler.play(when, fault), current["run_id"]))
        progress.advance(task)
    time.sleep(0.5)  # let abandoned attempts (deadline exceeded) finish recording
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:  # wait for jobs still running after their delivery timed out
        events = read_events(side.log)
        open_attempts = {e["attempt_id"] for e in events if e["event"] == "start"} - \
            {e["attempt_id"] for e in events if e["event"] == "end"}
        if len(open_attempts) <= sum(1 for f in faults if f == "crash"):
            break
        time.sleep(0.2)
    events = read_events(side.log)
    return [_tally(report, events, run_id) for report, run_id in reports]


def _summary(dedup: list[RunTally], baseline: list[RunTally]) -> Table:
    table = Table(title="Same at-least-once traffic, with and without scheduler-dedup")
    table.add_column("")
    table.add_column("with scheduler-dedup", justify="right")
    table.add_column("without dedup", justify="right")

    def both(fn: Any) -> None:
        table.add_row(fn.__doc__, str(fn(dedup)), str(fn(baseline)))

    def runs(t: list[RunTally]) -> int:
        """scheduled runs"""
        return len(t)

    def deliveries(t: list[RunTally]) -> int:
        """deliveries (incl. retries, duplicates)"""
        return sum(len(x.report.deliveries) for x in t)

    def executions(t: list[RunTally]) -> str:
        """job executions (per run)"""
        total = sum(x.starts for x in t)
        return f"{total} ({total / len(t):.2f})"

    def once(t: list[RunTally]) -> str:
        """runs completed exactly once"""
        return f"{sum(1 for x in t if x.exactly_once)}/{len(t)}"

    def suppressed(t: list[RunTally]) -> int:
        """duplicates suppressed (200 duplicate + 409)"""
        return sum(1 for x in t for d in x.report.deliveries if d.outcome in ("duplicate", "in_progress"))

    def conflicts(t: list[RunTally]) -> int:
        """409 in_progress answers"""
        return sum(1 for x in t for d in x.report.deliveries if d.status == 409)

    def failures(t: list[RunTally]) -> int:
        """5xx answers"""
        return sum(1 for x in t for d in x.report.deliveries if d.status >= 500)

    def reruns(t: list[RunTally]) -> int:
        """re-runs after a crash or failure (by design)"""
        return sum(min(x.starts - 1, x.crashed + x.failed) for x in t if x.starts > 1)

    def extra(t: list[RunTally]) -> int:
        """unexplained extra executions"""
        return sum(x.unexplained_reruns for x in t)

    for fn in (runs, deliveries, executions, once, suppressed, conflicts, failures, reruns, extra):
        both(fn)
    return table


def _per_run(dedup: list[RunTally], baseline: list[RunTally]) -> Table:
    table = Table(title="Per run (executions: with dedup / without)", expand=True)
    for column in ("schedule time (UTC)", "fault", "deliveries", "answers with dedup", "executions"):
        table.add_column(column)
    for d, b in zip(dedup, baseline):
        counts = Counter(f"{x.status or 'no answer'} {x.outcome}" for x in d.report.deliveries)
        answers = ", ".join(f"{n}× {what}" if n > 1 else what for what, n in counts.items())
        mark = "" if d.exactly_once or d.report.fault == "skipped" else " [red]✗[/red]"
        table.add_row(f"{d.report.schedule_time:%Y-%m-%d %H:%M}", FAULT_TITLES[d.report.fault],
                      str(len(d.report.deliveries)), answers, f"{d.starts} / {b.starts}{mark}")
    return table


def _history(server: StoreServer, schedule: str, time_zone: str, times: list[datetime], console: Console) -> Report:
    """Print the dedup side's run history and the expected-against-actual report, as ``scheduler-dedup runs`` does."""
    history = RunHistory(server.connect())
    since, until = times[0], times[-1] + timedelta(seconds=1)
    runs = list(history.runs(JOB_NAME, since=since, until=until))
    table = runs_table(title=f"Run history of {JOB_NAME} from its run records (job times in {time_zone})")
    for run in runs:
        add_run_row(table, run, time_zone)
    console.print(table)
    # Every delivery has been answered by now, so no grace period: an undelivered fire time is missed.
    report = compare(runs, job_name=JOB_NAME, schedule=schedule, time_zone=time_zone, since=since, until=until,
                     grace_seconds=0)
    if report.findings:
        console.print(report_table(report, list(report.findings)))
    console.print(report_summary(report))
    return report


def runs_command(server: StoreServer, times: list[datetime], skipped: int) -> str:
    """The ``scheduler-dedup runs`` command line that reads the demo's records over the demo's own window
    (its first fire time to just after its last), so its report finds exactly the skipped fire time missed;
    ``--grace 0`` when that fire time is more recent than the default grace period."""
    since, until = rfc3339(times[0]), rfc3339(times[-1] + timedelta(seconds=1))
    recent = datetime.now(timezone.utc) - times[skipped] < timedelta(seconds=DEFAULT_GRACE_SECONDS)
    return runs_command_line(server.shell_env(), JOB_NAME, since, until, grace_zero=recent)


def run_demo(schedule: str = "*/15 * * * *", runs: int = 8, seed: int = 7, time_zone: str = "Europe/Berlin",
             keep_emulator: bool = False, store: str = "firestore") -> int:
    """Run the demo and print its tables.

    Args:
        schedule: unix-cron expression whose last fire times are delivered.
        runs: number of scheduled runs delivered (each fault appears at least once from 6 on); one
            more fire time among them is skipped on purpose, and the report must find it missed.
        seed: seed of the order of faults and of the skipped fire time.
        time_zone: the schedule's time zone (the handler stores it on each record).
        keep_emulator: leave the store server running afterwards, for ``scheduler-dedup runs`` to read.
        store: the run store (``DEDUP_STORE``) whose local server the handlers use.

    Returns:
        0 if every delivered run executed exactly once with dedup (re-runs after crashes and failures
        counted apart) and the report found exactly the skipped fire time missed and nothing failed or
        stuck; 1 otherwise; 2 if the store server, the schedule or the time zone is unusable.
    """
    console = make_console()
    try:
        times = schedule_times(schedule, runs + 1, time_zone=time_zone)
    except ValueError as exc:
        console.print(f"[red]error:[/red] {exc}")
        return 2
    rng = random.Random(seed)
    faults = list(FAULTS) + [FAULTS[i % len(FAULTS)] for i in range(runs - len(FAULTS))]
    rng.shuffle(faults)
    skipped = rng.randrange(1, runs)  # neither the oldest nor the newest fire time
    faults.insert(skipped, "skipped")
    retry = RetryConfig()
    console.print(f"Schedule [bold]{schedule}[/bold] in {time_zone}: {runs} runs from {times[0]:%Y-%m-%d %H:%M} to "
                  f"{times[-1]:%H:%M} UTC, and the one at {times[skipped]:%H:%M} UTC skipped on purpose; attempt "
                  f"deadline {retry.attempt_deadline} s, retry count {retry.retry_count}, lease {LEASE_SECONDS} s "
                  "(timings scaled down for the demo)")
    server = store_server(store)
    # Everything started below belongs to this stack and ends with the command: on success, on an error and on
    # Ctrl-C or SIGTERM (ends_on_signals); only --keep-emulator keeps the store server, after a normal end.
    with ExitStack() as owned:
        workdir = Path(owned.enter_context(tempfile.TemporaryDirectory(prefix="scheduler-dedup-demo-")))
        plan = {f"{JOB_NAME}@{t:%Y-%m-%dT%H:%M:%SZ}": _FAULT_PLAN[f] for t, f in zip(times, faults) if f != "skipped"}
        (workdir / "plan.json").write_text(json.dumps(plan))
        try:
            owned.enter_context(running(server, keep=keep_emulator))
            server.prepare("scheduler_runs")
        except (EmulatorNotFoundError, EmulatorStartError) as exc:
            console.print(f"[red]error:[/red] {escape(str(exc))}", soft_wrap=True)
            return 2
        console.print(f"{server.display_name} on {server.host}; starting 2 dedup and 2 baseline instances...")
        env = {**server.endpoint_env(), "DEDUP_JOB": "scheduler_dedup.local.demo.recording_job:run", "DEMO_JOB_PLAN": str(workdir / "plan.json"),
               "DEDUP_LEASE_SECONDS": str(LEASE_SECONDS), "DEDUP_SCHEDULE": schedule, "DEDUP_TIME_ZONE": time_zone}
        sides = [owned.enter_context(_Side(name, env, baseline, workdir))
                 for name, baseline in (("dedup", False), ("baseline", True))]
        with Progress(console=console, transient=True) as progress:
            task = progress.add_task("delivering", total=2 * len(times))
            dedup = _play(sides[0], server.project, times, faults, retry, progress, task)
            baseline = _play(sides[1], server.project, times, faults, retry, progress, task)
        for side in sides:
            side.close()
        console.print(_per_run(dedup, baseline))
        delivered = [(d, b) for d, b in zip(dedup, baseline) if d.report.fault != "skipped"]
        dedup, baseline = [d for d, _ in delivered], [b for _, b in delivered]
        console.print(_summary(dedup, baseline))
        report = _history(server, schedule, time_zone, times, console)
    bad = [t for t in dedup if not t.exactly_once]
    if bad:
        console.print(f"[red bold]FAIL[/red bold]: {len(bad)} run(s) did not execute exactly once with dedup")
        return 1
    missed = [f.schedule_time for f in report.of(MISSED)]
    if missed != [times[skipped]] or report.of(FAILED_RUN) or report.of(STUCK_RUN):
        console.print(f"[red bold]FAIL[/red bold]: the report should find exactly {times[skipped]:%H:%M} UTC missed "
                      f"and nothing failed or stuck; it found {report.counts()}")
        return 1
    console.print("[green bold]OK[/green bold]: every run executed exactly once with scheduler-dedup "
                  f"(crashed or failed attempts re-run by design); without it, "
                  f"{sum(1 for t in baseline if not t.exactly_once)} of {runs} runs did not (they completed more "
                  "than once, or ran again with no crash or failure to explain it). The "
                  "report's FAIL is the fire time skipped on purpose, found missed: `scheduler-dedup runs` exits 1 "
                  "on it, as a check in CI or cron should.")
    if keep_emulator:
        console.print(f"The {server.display_name} keeps running (pid {server.pid}; stop it, and remove its files, "
                      f"with `{server.stop_command()}`). "
                      "Its run history and report, from another shell (the demo's own window: a wider one finds "
                      f"every fire time before it missed):\n  {runs_command(server, times, skipped)}",
                      soft_wrap=True)  # one line however narrow the terminal, so it copies whole
    return 0
