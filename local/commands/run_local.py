"""``scheduler-dedup run-local``: run your own job the way it runs in production, on this machine.

It starts a real local store server (the Firestore emulator by default; ``store`` picks another), serves the dedup handler under functions-framework with
``DEDUP_JOB`` and a ``PYTHONPATH`` that makes your job importable (as Cloud Run does with the deploy
archive), and lets the Cloud Scheduler simulator fire your schedule in your time zone: in real time,
or the last ``--runs`` fire times replayed faster. Optional faults: the simulator's delivery faults
(lost 2xx, concurrent duplicates, a SIGKILLed instance, a skipped fire time) and store faults
injected between the handler and the store server by the fault proxy. Each run's row of the run
history table is printed as it lands, and the expected-against-actual report at the end.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from contextlib import ExitStack
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from scheduler_dedup.handler.config.settings import store_timeout_for
from scheduler_dedup.handler.core.env_names import env_name_problem
from scheduler_dedup.handler.core.errors import ConfigError
from scheduler_dedup.handler.core.job_spec import job_spec_problem
from scheduler_dedup.handler.schedule.cron.fire_times import fire_times
from scheduler_dedup.handler.schedule.overlap_policy import (BUFFER_ONE, DEFAULT_OVERLAP, OVERLAP_POLICIES,
                                                            replace_problem)
from scheduler_dedup.handler.core.record import COMPLETED, FAILED, RELEASED, SKIPPED_OVERLAP
from scheduler_dedup.handler.monitoring.comparison import compare
from scheduler_dedup.handler.monitoring.findings import FAILED_RUN, MISSED, Report
from scheduler_dedup.handler.monitoring.run_history import RunHistory
from scheduler_dedup.handler.monitoring.run_view import HistoryRun, rfc3339
from scheduler_dedup.handler.schedule.run_key import RunKey
from scheduler_dedup.local.commands.console import in_words, make_console, runs_command_line
from scheduler_dedup.local.commands.setting_options import option_problems, print_advisories
from scheduler_dedup.local.servers.store_servers import (EmulatorNotFoundError, EmulatorStartError, StoreServer, running,
                                                         store_server)
from scheduler_dedup.local.commands.runs import RUN_ID_CHARS, add_run_row, report_summary, report_table, runs_table
from scheduler_dedup.local.servers.handlers import HandlerServer
from scheduler_dedup.local.servers.held_signals import signals_held
from scheduler_dedup.local.demo.simulator import (FAULT_TITLES, Delivery, RetryConfig, RunReport, Scheduler,
                                                  schedule_times)

#: Delivery faults that work with any job (the others of the demo need its scripted job).
DELIVERY_FAULTS = ("clean", "lost_response", "concurrent", "crash", "skipped")
#: The run records' collection.
COLLECTION = "scheduler_runs"


class LocalRunError(Exception):
    """Bad input or a handler that does not start; the message says what to change."""


#: The handler settings run-local sets from its own options, and those options.
_OPTION_OF = {"DEDUP_JOB": "--job", "DEDUP_SCHEDULE": "--schedule", "DEDUP_TIME_ZONE": "--time-zone",
              "DEDUP_OVERLAP": "--overlap", "DEDUP_CATCH_UP_WINDOW_SECONDS": "--catch-up-window",
              "DEDUP_LEASE_SECONDS": "--lease", "DEDUP_STORE": "--store"}


def env_pairs_env(pairs: Sequence[str]) -> dict[str, str]:
    """``--env KEY=VALUE`` as environment, each KEY a name the job's own variable may have on Cloud Run
    (:func:`~scheduler_dedup.handler.core.env_names.env_name_problem`, the component's check of ``env``).

    Raises:
        LocalRunError: one line per pair that is not KEY=VALUE or whose KEY Cloud Run or the handler would refuse.
    """
    env, problems = {}, []
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            problems.append(f"{pair!r} is not KEY=VALUE: use e.g. --env REPORT_BUCKET=acme-reports")
            continue
        problem = env_name_problem(key)
        if problem:
            option = _OPTION_OF.get(key)
            problems.append(f"--env {key}: {problem}" + (f"; run-local sets it from {option}" if option else ""))
            continue
        env[key] = value
    if problems:
        raise LocalRunError("\n".join(problems))
    return env


def secret_file_env(pairs: Sequence[str]) -> dict[str, str]:
    """``--secret-file NAME=path`` as environment: NAME holds the file's text, as Cloud Run's ``secret_env`` puts a
    Secret Manager version's value in NAME, so a local file stands in for Secret Manager.

    Raises:
        LocalRunError: one line per pair that is not NAME=path of a readable UTF-8 file, or whose NAME Cloud Run or
            the handler would refuse (:func:`~scheduler_dedup.handler.core.env_names.env_name_problem`), naming it.
    """
    env, problems = {}, []
    for pair in pairs:
        name, sep, path = pair.partition("=")
        if not sep or not name or not path:
            problems.append(f"--secret-file {pair!r} is not NAME=path: use e.g. --secret-file DB_PASSWORD=./db-password.txt")
            continue
        problem = env_name_problem(name)
        if problem:
            problems.append(f"--secret-file {name}: {problem}")
            continue
        try:
            env[name] = Path(path).expanduser().read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            problems.append(f"--secret-file {name}: cannot read {path} ({exc}): give a readable text file")
    if problems:
        raise LocalRunError("\n".join(problems))
    return env


def check_inputs(source: Path, job: str, schedule: str, time_zone: str, faults: Sequence[str],
                 store_faults: Sequence[str] = (), speed: float = 1.0, overlap: str = DEFAULT_OVERLAP,
                 catch_up_window: float = 0) -> None:
    """Validate the command's inputs before anything starts, and name every bad one at once; the job's settings
    (schedule, time zone, overlap, catch-up window) as ``check`` and ``pulumi preview`` read them
    (:func:`~scheduler_dedup.local.commands.setting_options.option_problems`).

    Raises:
        LocalRunError: one line per bad option, each naming the option and the fix.
    """
    from scheduler_dedup.local.faults.grpc_proxy import KINDS, STEPS

    problems = []
    module = job.split(":")[0].replace(".", "/")
    spec_problem = job_spec_problem(job)
    if spec_problem:
        problems.append(f"--job {job!r} is not module:function ({spec_problem}): use e.g. --job jobs:run")
    if not source.is_dir():
        problems.append(f"--source {source} is not a directory: give the folder that holds your job module")
    elif not spec_problem and not ((source / f"{module}.py").is_file()
                                      or (source / module / "__init__.py").is_file()):
        problems.append(f"--job {job!r}: no {module}.py or {module}/__init__.py in --source {source}")
    problems += option_problems(schedule, time_zone, overlap, catch_up_window)
    replace = replace_problem(overlap, "python", "--overlap", "--job (run-local's target type)")
    if replace:  # its job is a Python function, which replace cannot cancel: refused as preview refuses it
        problems.append(replace)
    unknown = [f for f in faults if f not in DELIVERY_FAULTS]
    if unknown:
        problems.append(f"--delivery-faults {','.join(unknown)}: use any of {', '.join(DELIVERY_FAULTS)}")
    for text in store_faults:
        step, _, kind = text.partition(":")
        if step not in STEPS or kind not in KINDS:
            problems.append(f"--store-fault {text!r} is not step:kind: steps {', '.join(STEPS)}; "
                            f"kinds {', '.join(KINDS)} (e.g. completion:lose_answer)")
    if speed < 1:
        problems.append(f"--speed {speed:g}: use 1 (real time) or more (replay faster)")
    if problems:
        raise LocalRunError("\n".join(problems))


def job_name_for(job: str) -> str:
    """A Scheduler job id derived from ``module:function`` (letters, digits, '-' and '_')."""
    return re.sub(r"[^A-Za-z0-9_-]+", "-", job).strip("-")[:100] or "local-job"


#: The last line of a handler that stopped at start-up on a :class:`ConfigError`.
_CONFIG_ERROR_RE = re.compile(rf"^{re.escape(ConfigError.__module__)}\.ConfigError: (.+)$", re.M)


class _Instances:
    """The handler's instances (one at a time): started, and replaced after a crash fault; their logs are
    deleted when they are closed."""

    def __init__(self, env: Mapping[str, str]):
        self.env = dict(env)
        self.started: list[HandlerServer] = []

    def start(self) -> "_Instances":
        """Start the first instance."""
        self.server = self._start()
        return self

    def _start(self) -> HandlerServer:
        with signals_held():  # its log file is in self.started (which close() removes) before Ctrl-C acts
            server = HandlerServer(self.env, threads=8)
            self.started.append(server)
        try:
            return server.start()
        except RuntimeError as exc:
            refused = _CONFIG_ERROR_RE.findall(str(exc))
            if refused:  # the handler's own start-up check: its message names the setting, a traceback adds nothing
                raise LocalRunError(f"the handler refused its settings: {refused[-1]} (run-local sets DEDUP_JOB "
                                    f"from --job, and your own variables from --env)") from None
            raise LocalRunError(f"the handler did not start; its output:\n{exc}") from None

    def urls(self) -> list[str]:
        return [self.server.url]

    def crash(self, history: RunHistory, run_id: str) -> None:
        """SIGKILL the instance once the run is claimed (mid-job, if the job is still running; a fast job may
        have finished: the printed line says which, from the record), then replace it."""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            record = history.record(run_id)
            if record is not None:  # claimed: mid-job if it still runs, else a crash right after it finished
                break
            time.sleep(0.05)
        victim = self.server
        victim.kill()
        self.server = self._start()
        victim.stop()

    def close(self) -> None:
        """Stop every instance started and remove its log; one that fails to stop still has its log removed, and
        the others are still stopped."""
        with ExitStack() as cleanup:
            for server in self.started:
                cleanup.callback(server.remove_log)
                cleanup.callback(server.stop)


def _fire_plan(schedule: str, time_zone: str, runs: int | None, speed: float,
               now: datetime) -> Iterator[tuple[datetime, float]]:
    """``(schedule time, when to deliver it on the monotonic clock)`` pairs.

    Real time (``speed`` 1): upcoming fire times, each delivered when it comes. Faster: the last
    ``runs`` fire times (schedule times in the past, as Scheduler's are), delivered with their gaps
    divided by ``speed``.
    """
    start = time.monotonic()
    if speed == 1:
        upcoming = (f.first for f in fire_times(schedule, time_zone, now, now + timedelta(days=3660)) if f.required)
        for n, when in enumerate(upcoming):
            if runs is not None and n >= runs:
                return
            yield when, start + (when - now).total_seconds()
        return
    times = schedule_times(schedule, runs or 10, now=now, time_zone=time_zone)
    for when in times:
        yield when, start + (when - times[0]).total_seconds() / speed


def run_local(source: Path, job: str, schedule: str, *, time_zone: str = "Etc/UTC", runs: int | None = None,
              speed: float = 1.0, job_name: str | None = None, delivery_faults: Sequence[str] = (),
              store_faults: Sequence[str] = (), store_fault_rate: float = 0.0, seed: int = 1,
              lease_seconds: float = 10.0, attempt_deadline: float = 10.0, extra_env: Mapping[str, str] | None = None,
              console: Console | None = None, status: Console | None = None, store: str = "firestore",
              keep_emulator: bool = False, overlap: str = DEFAULT_OVERLAP, catch_up_window: float = 0) -> int:
    """Run ``job`` from ``source`` under the dedup handler with the Scheduler simulator firing ``schedule``.

    Args:
        source: folder of the job module (put on the handler's ``PYTHONPATH``).
        job: ``module:function`` (``DEDUP_JOB``).
        schedule, time_zone: the Scheduler job's unix-cron schedule and tz database zone.
        runs: fire times to deliver (None: real time until interrupted; faster replay: 10).
        speed: 1 for real time; N > 1 replays the last ``runs`` fire times N times faster.
        job_name: the Scheduler job id sent (default derived from ``job``).
        delivery_faults: simulator faults applied to runs in turn (:data:`DELIVERY_FAULTS`).
        store_faults: planned store faults as ``step:kind`` (fault proxy steps and kinds).
        store_fault_rate: probability of a random store fault per protocol call (seeded).
        seed: seed of the random store faults.
        lease_seconds: ``DEDUP_LEASE_SECONDS`` of the handler.
        attempt_deadline: the simulated job's attempt deadline, seconds.
        extra_env: more environment for the handler (your job's own settings).
        console: where runs and the report are printed (default stdout).
        status: where set-up lines (store server, handler URL and log) are printed (default: ``console``).
        store: the run store (``DEDUP_STORE``) whose local server the handler uses.
        keep_emulator: leave the store server running afterwards, so the printed ``runs`` command keeps
            working; the closing lines say its PID and how to stop it.
        overlap: the job's overlap policy (``DEDUP_OVERLAP``: one of
            :data:`~scheduler_dedup.handler.schedule.overlap_policy.OVERLAP_POLICIES`).
        catch_up_window: the job's catch-up window, seconds (``DEDUP_CATCH_UP_WINDOW_SECONDS``; 0: off).

    Returns:
        0 if nothing was missed, failed or stuck; 1 otherwise (a ``skipped`` fault makes a missed run).

    Raises:
        LocalRunError: invalid input, or the store server or the handler would not start.
        KeyboardInterrupt: Ctrl-C, at any step, after every server and temporary file it started is gone (and,
            while firing, after the report of the fire times delivered so far); the command exits 130.
    """
    console = console or make_console()
    status = status or console
    source = source.expanduser().resolve()
    check_inputs(source, job, schedule, time_zone, delivery_faults, store_faults, speed, overlap, catch_up_window)
    print_advisories(status, schedule, time_zone)
    name = job_name or job_name_for(job)
    now = datetime.now(timezone.utc)
    server = store_server(store)
    # Everything started below belongs to this stack and ends with the command: on success, on an error and on
    # Ctrl-C or SIGTERM (ends_on_signals); only --keep-emulator keeps the store server, after a normal end.
    with ExitStack() as owned:
        try:
            owned.enter_context(running(server, keep=keep_emulator))
            server.prepare(COLLECTION)
        except (EmulatorNotFoundError, EmulatorStartError) as exc:
            raise LocalRunError(str(exc)) from None
        code, runs_command = _serve_and_fire(owned, server, source, job, name, schedule, time_zone, runs, speed,
                                             now, delivery_faults, store_faults, store_fault_rate, seed,
                                             lease_seconds, attempt_deadline,
                                             {**(extra_env or {}), "DEDUP_OVERLAP": overlap,
                                              "DEDUP_CATCH_UP_WINDOW_SECONDS": f"{catch_up_window:g}"},
                                             console, status, keep_emulator)
    if keep_emulator:
        status.print(f"The {server.display_name} keeps running (pid {server.pid}; stop it, and remove its files, "
                     f"with `{server.stop_command()}`). Its run history, from another shell:\n  {runs_command}",
                     soft_wrap=True)
    return code


def _serve_and_fire(owned: ExitStack, server: StoreServer, source: Path, job: str, name: str, schedule: str,
                    time_zone: str, runs: int | None, speed: float, now: datetime, delivery_faults: Sequence[str],
                    store_faults: Sequence[str], store_fault_rate: float, seed: int, lease_seconds: float,
                    attempt_deadline: float, extra_env: Mapping[str, str] | None, console: Console, status: Console,
                    keep_emulator: bool) -> tuple[int, str]:
    """Start the fault proxy and the handler (owned by ``owned``), fire the schedule, print the report.

    Returns:
        ``(exit code, the runs command line)``.
    """
    store_host = server.host
    proxy: Any = None
    if store_faults or store_fault_rate:
        proxy = _fault_proxy(server, store_faults, store_fault_rate, seed)
        owned.callback(proxy.stop)
        store_host = proxy.host
    pythonpath = os.pathsep.join(p for p in (str(source), os.environ.get("PYTHONPATH", "")) if p)
    env = {**(extra_env or {}), **server.endpoint_env(store_host), "DEDUP_COLLECTION": COLLECTION,
           "DEDUP_JOB": job, "PYTHONPATH": pythonpath, "DEDUP_SCHEDULE": schedule, "DEDUP_TIME_ZONE": time_zone,
           "DEDUP_LEASE_SECONDS": f"{lease_seconds:g}",
           "DEDUP_STORE_TIMEOUT_SECONDS": str(store_timeout_for(int(attempt_deadline)))}
    status.print(f"{server.display_name} on {server.host}" + (f", store faults through {proxy.host}" if proxy
                                                              else "") + f"; starting the handler with {job} ...")
    instances = _Instances(env)
    owned.callback(instances.close)
    instances.start()
    history = RunHistory(server.connect(COLLECTION))  # this process reads the history without faults
    runs_command = runs_command_line(server.shell_env(), name)
    status.print(f"Handler on {instances.server.url} (its log, removed when this ends: {instances.server.log_path}; "
                 "a failing job's traceback is in the report). From another shell"
                 + (":" if keep_emulator else ", while this runs (--keep-emulator keeps it readable after):")
                 + f"\n  {runs_command}", soft_wrap=True)
    mode = "real time" if speed == 1 else f"the last {runs or 10} fire times, {speed:g} times faster"
    console.print(f"Firing [bold]{schedule}[/bold] in {time_zone} as job {name}: {mode}"
                  + (f"; delivery faults in turn: {', '.join(delivery_faults)}" if delivery_faults else ""),
                  highlight=False)
    delivered: list[datetime] = []
    this_run = threading.local()  # the run a delivery thread plays, for the crash fault it may apply
    scheduler = Scheduler(instances.urls, name, RetryConfig(attempt_deadline, 5, 1.0, 10.0),
                          crash=lambda url: instances.crash(history, this_run.run_id))
    rows = _Rows(console, history, name, time_zone)
    interrupted = False
    try:
        for n, (when, at) in enumerate(_fire_plan(schedule, time_zone, runs, speed, now)):
            if at - time.monotonic() >= 1:
                console.print(f"[dim]next fire time {when:%Y-%m-%d %H:%M:%S}Z in {in_words(at - time.monotonic())}[/]")
            rows.print_until(at)
            fault = delivery_faults[n % len(delivery_faults)] if delivery_faults else "clean"

            def play(when: datetime = when, fault: str = fault) -> RunReport:
                this_run.run_id = RunKey(server.project, "", name, when).run_id
                return scheduler.play(when, fault)

            # Scheduler delivers each fire time when it comes, whether or not the one before has been answered
            rows.add(when, fault, _in_background(play))
            delivered.append(when)
        rows.print_until(None)
    except KeyboardInterrupt:  # Ctrl-C ends the command (exit 130) once the report of what was delivered is out
        interrupted = True
        if delivered:
            console.print(f"Ctrl-C: the report of the {len(delivered)} fire time(s) delivered so far")
    if not delivered:
        if interrupted:
            raise KeyboardInterrupt
        return 0, runs_command
    # what was delivered is all there will be: the kept server's command checks exactly that window
    runs_command = runs_command_line(server.shell_env(), name, rfc3339(delivered[0]),
                                     rfc3339(delivered[-1] + timedelta(seconds=1)), grace_zero=True)
    time.sleep(0.5)
    result = _report(console, history, name, schedule, time_zone, delivered, env.get("DEDUP_OVERLAP", DEFAULT_OVERLAP))
    if proxy is not None and proxy.injected:
        kinds = Counter(f"{i['step']} {i['kind']}" for i in proxy.injected)
        console.print("Store faults injected: " + ", ".join(f"{n}× {k}" for k, n in sorted(kinds.items())))
    skipped = [f for f in delivery_faults if f == "skipped"]
    if skipped and not result.ok and {f.kind for f in result.problems} == {MISSED}:
        console.print(f"[dim]The missed run{'s are' if len(skipped) > 1 else ' is'} the fire time the "
                      "`skipped` delivery fault left out on purpose: the report finds it, and exits 1, as a check "
                      "in CI or cron should.[/]", highlight=False)
    if interrupted:
        raise KeyboardInterrupt
    return (0 if result.ok else 1), runs_command


def _in_background(play: Callable[[], RunReport]) -> "Future[RunReport]":
    """Run ``play`` in a daemon thread (one that cannot hold the command open after Ctrl-C); its future."""
    future: Future[RunReport] = Future()

    def run() -> None:
        try:
            future.set_result(play())
        except BaseException as exc:  # noqa: BLE001 (handed to the reader of the future)
            future.set_exception(exc)

    threading.Thread(target=run, name="delivery", daemon=True).start()
    return future


class _Rows:
    """The fire times delivered, printed in order as each one's deliveries end; a fire time still being delivered
    is said to be, every :data:`STILL_GOING_SECONDS`, so a slow or failing run is never silent."""

    STILL_GOING_SECONDS = 5.0

    def __init__(self, console: Console, history: RunHistory, name: str, time_zone: str):
        self.console, self.history, self.name, self.time_zone = console, history, name, time_zone
        self.pending: list[tuple[datetime, str, Future[RunReport], float]] = []
        self.printed = 0
        self._said = 0.0

    def add(self, when: datetime, fault: str, future: "Future[RunReport]") -> None:
        self.pending.append((when, fault, future, time.monotonic()))

    def print_until(self, deadline: float | None) -> None:
        """Print the rows of the fire times whose deliveries have ended, oldest first, until the monotonic
        ``deadline`` (None: until every fire time's deliveries have ended)."""
        while True:
            while self.pending and self.pending[0][2].done():
                when, fault, future, _ = self.pending.pop(0)
                self.printed += _print_run(self.console, self.history, self.name, when, self.time_zone, fault,
                                           future.result().deliveries, self.printed)
            now = time.monotonic()
            if (deadline is None and not self.pending) or (deadline is not None and now >= deadline):
                return
            if self.pending and now - max(self.pending[0][3], self._said) >= self.STILL_GOING_SECONDS:
                self._said = now
                going = ", ".join(f"{w:%H:%M:%S}Z" for w, *_ in self.pending)
                self.console.print(f"[dim]  still delivering {going}: {in_words(now - self.pending[0][3])} since "
                                   f"{self.pending[0][0]:%H:%M:%S}Z was sent (Scheduler retries until it is "
                                   "answered 2xx or its retries run out)[/]", highlight=False)
            time.sleep(min(0.05, deadline - now) if deadline is not None else 0.05)


def _fault_proxy(server: StoreServer, planned: Sequence[str], rate: float, seed: int) -> Any:
    from scheduler_dedup.local.faults.grpc_proxy import Fault

    faults = []
    for text in planned:  # check_inputs has checked each is step:kind
        step, _, kind = text.partition(":")
        faults.append(Fault(kind=kind, step=step))
    try:
        proxy = server.fault_proxy()
    except NotImplementedError as exc:
        raise LocalRunError(f"--store-fault and --store-fault-rate: {exc}") from None
    for fault in faults:
        proxy.add(fault)
    if rate:
        proxy.set_random(rate=rate, seed=seed, kinds=("unavailable", "deadline", "lose_answer"))
    return proxy


def _print_run(console: Console, history: RunHistory, name: str, when: datetime, time_zone: str, fault: str,
               deliveries: Sequence[Delivery], printed: int) -> int:
    """Print the run's row (or why there is none) as it lands, and under a failed or released row the tail of the
    job's output that its record keeps; returns rows printed."""
    answers = Counter(f"{d.status or 'no answer'} {d.outcome}" for d in deliveries)
    summary = ", ".join(f"{n}× {what}" if n > 1 else what for what, n in answers.items()) or "no delivery"
    rows = history.at(name, when)
    table = runs_table(header=printed == 0,
                       title=f"Runs of {name} (job times in {time_zone})" if printed == 0 else None)
    for run in rows:
        add_run_row(table, run, time_zone)
    if rows:
        console.print(table)
    title = _crash_title(rows) if fault == "crash" else FAULT_TITLES[fault]
    console.print(f"[dim]  {when:%H:%M:%S}Z {title}: {summary}" + ("" if rows else " (no run record)") + "[/]",
                  highlight=False)
    for run in rows:
        if run.status not in (FAILED, RELEASED):
            continue
        how = ("recorded failed, not retried" if run.status == FAILED else
               f"{run.releases} of {run.attempts} attempt{'s' if run.attempts != 1 else ''} failed, each released "
               "for a retry")
        console.print(f"  [red bold]failed[/] {when:%H:%M:%S}Z ({how}): [red]{escape(run.error or '')}[/]",
                      highlight=False, soft_wrap=True)
        if run.output:
            console.print("  [dim]the job's output (tail):[/]")
            console.print("\n".join("    " + line for line in run.output.splitlines()), markup=False,
                          highlight=False, soft_wrap=True)
    return len(rows)


def _crash_title(rows: Sequence[HistoryRun]) -> str:
    """What the ``crash`` fault really did, read from the run's record: the kill is timed by the claim, so
    with a fast job it can land after the job finished. A takeover means it landed while the attempt held
    the run (mid-job); one attempt and a finished record mean the job had finished first."""
    if any(run.took_over for run in rows):
        return FAULT_TITLES["crash"] + " (taken over after the lease expired)"
    if rows and all(run.state in (COMPLETED, FAILED) for run in rows):
        return "instance SIGKILLed after the job had finished (1 attempt, no takeover needed)"
    return "instance SIGKILLed mid-job; not taken over yet"


def _report(console: Console, history: RunHistory, name: str, schedule: str, time_zone: str,
            delivered: list[datetime], overlap: str) -> Report:
    """Expected against actual over the delivered fire times, with no grace: every delivery is over, so a run
    whose every attempt failed is reported failed with its error."""
    since, until = delivered[0], delivered[-1] + timedelta(seconds=1)
    runs = list(history.runs(name, since=since, until=until))
    report = compare(runs, job_name=name, schedule=schedule, time_zone=time_zone, since=since, until=until,
                     grace_seconds=0)
    if report.findings:
        console.print(report_table(report, list(report.findings)))
    console.print(report_summary(report))
    for line in (overlap_line(runs, overlap), *dropped_result_lines(runs)):
        if line:
            console.print(line, highlight=False, soft_wrap=True)
    return report


def overlap_line(runs: Sequence[HistoryRun], policy: str) -> str:
    """What the overlap policy did over ``runs``: how many were skipped (``skipped_overlap``), and how many executed
    while another run of the job was executing, from their claim and finish times.

    A record keeps when its run was claimed, not when it began to execute. Under ``buffer_one`` a run claimed while
    another executes waits for the job's overlap lease, which that run gives up only after recording its finish
    (:mod:`scheduler_dedup.handler.protocol.overlap_lease`): its execution starts after that finish, and the line
    counts it as having waited, not as executing beside it. (A lost lease, which the handler logs as an error, is
    the one way it could have executed beside it.)
    """
    skipped = sum(run.status == SKIPPED_OVERLAP for run in runs)
    now = datetime.now(timezone.utc)
    spans: list[tuple[datetime, datetime]] = []
    waited = 0
    for run in sorted((r for r in runs if r.status != SKIPPED_OVERLAP and r.claimed_at is not None),
                      key=lambda r: r.claimed_at or now):
        assert run.claimed_at is not None
        start, end = run.claimed_at, run.finished_at or now
        if policy == BUFFER_ONE:
            start = max([start, *(b for a, b in spans if a <= start < b)])
            waited += start > run.claimed_at
        spans.append((start, max(start, end)))
    together = sum(any(a < end and start < b for j, (a, b) in enumerate(spans) if j != i)
                   for i, (start, end) in enumerate(spans))
    wait = (f", {waited} waited for the run before it to finish (claimed while it executed; buffer_one)"
            if policy == BUFFER_ONE else "")
    return (f"Overlap policy {policy}: {skipped} of {len(runs)} run(s) skipped (skipped_overlap: a run of the job "
            f"was still executing){wait}, {together} executed while another run of the job executed")


def dropped_result_lines(runs: Sequence[HistoryRun]) -> list[str]:
    """A finding per run whose result was not stored (too large, not JSON): the run completed, but whoever reads its
    result gets none. Not a failure; never silent."""
    return [f"result dropped: the run of {run.schedule_time:%Y-%m-%d %H:%M:%S}Z ({run.run_id[:RUN_ID_CHARS]}) "
            f"completed, but its result was not stored: {run.result_dropped}" for run in runs if run.result_dropped]
