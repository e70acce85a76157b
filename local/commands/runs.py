"""``scheduler-dedup runs``: a job's run history from its run records, and expected against actual runs.

Read-only, on any run store (``--store``, default ``DEDUP_STORE`` else ``firestore``) through the store
contract. On Firestore it talks to the emulator when ``FIRESTORE_EMULATOR_HOST`` is set, else to real Firestore
with Application Default Credentials (``gcloud auth application-default login``); ``roles/datastore.viewer``
on the project is all it needs, and the query needs the composite index of
:data:`scheduler_dedup.handler.stores.firestore.schema.RUN_HISTORY_INDEXES` (the component creates it).
"""

from __future__ import annotations

import json
import re
import sys
import zoneinfo
from collections.abc import Iterator
from contextlib import nullcontext
from datetime import date, datetime, timedelta, timezone
from typing import Any

import click
from rich import box
from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from scheduler_dedup.handler.config.settings import DEFAULT_COLLECTION, DEFAULT_STORE
from scheduler_dedup.handler.core.errors import ConfigError, StoreCallError, StoreUnavailableError
from scheduler_dedup.handler.schedule.cron.accepted import unix_cron_problem
from scheduler_dedup.handler.schedule.time_zones import DEFAULT_TIME_ZONE, is_iana_time_zone, time_zone_suggestion
from scheduler_dedup.handler.monitoring.comparison import DEFAULT_GRACE_SECONDS, compare
from scheduler_dedup.handler.monitoring.findings import KINDS, SINCE_SCHEDULE_CHANGE, Finding, Report
from scheduler_dedup.handler.monitoring.run_history import JobScope, RunHistory
from scheduler_dedup.handler.monitoring.run_view import STATES, HistoryRun, rfc3339
from scheduler_dedup.local.commands.console import make_console
from scheduler_dedup.local.commands.rerun import previous_attempts
from scheduler_dedup.local.commands.store_option import StoreName

#: Rows per printed table chunk: rows appear as pages arrive instead of after the whole scan.
CHUNK_ROWS = 50
_RELATIVE = re.compile(r"^(\d+(?:\.\d+)?)\s*([smhdw])$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_STYLE = {"completed": "green", "failed": "red", "stuck": "red", "in_progress": "yellow", "running_downstream": "cyan",
          "cancelled": "magenta", "missed": "red",
          "late": "yellow", "repeated": "yellow", "unexpected": "magenta", "skipped": "cyan", "dst_repeated": "yellow",
          "paused": "cyan", "released": "red", "retrying": "yellow"}
_EXIT_PROBLEMS, _EXIT_ERROR = 1, 2


def parse_when(text: str, now: datetime, time_zone: str) -> datetime:
    """A ``--since``/``--until`` value: ``7d``/``36h``/``90m``/``2w`` ago, RFC 3339, or a date or
    date-time without offset (read in ``time_zone``). Returns aware UTC.

    Raises:
        click.BadParameter: none of those forms.
    """
    value = text.strip()
    match = _RELATIVE.match(value)
    if match:
        return now - timedelta(seconds=float(match.group(1)) * _UNITS[match.group(2)])
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        try:
            parsed = datetime.combine(date.fromisoformat(value), datetime.min.time())
        except ValueError:
            raise click.BadParameter(
                f"{text!r} is not a time: use e.g. 7d, 36h, 90m (ago), 2026-11-01 or 2026-11-01T06:00:00Z"
            ) from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=zoneinfo.ZoneInfo(time_zone))
    return parsed.astimezone(timezone.utc)


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return ""
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:.1f} s"
    if seconds < 3600:
        return f"{int(seconds // 60)} min {int(seconds % 60):02d} s"
    return f"{int(seconds // 3600)} h {int(seconds % 3600 // 60):02d} min"


def _size(n: int | None) -> str:
    if n is None:
        return ""
    return f"{n} B" if n < 1024 else f"{n / 1024:.1f} KiB"


def _local(t: datetime, time_zone: str) -> str:
    return t.astimezone(zoneinfo.ZoneInfo(time_zone)).strftime("%Y-%m-%d %H:%M:%S %Z")


def _utc_text(t: datetime) -> str:
    return t.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ")


#: Characters of a run id the tables show: enough to be unique among a job's runs, and what ``runs show`` and
#: ``runs rerun`` accept as a prefix (:func:`_by_run_id`).
RUN_ID_CHARS = 12
_FULL_RUN_ID = re.compile(r"\b[0-9a-f]{64}\b")


def runs_table(*, header: bool = True, title: str | None = None) -> Table:
    """An empty run table with fixed column widths, so chunks printed one after another line up."""
    table = Table(box=box.SIMPLE_HEAD, show_header=header, show_edge=False, pad_edge=False, title=title,
                  title_justify="left")
    table.add_column("schedule time (job)", width=26, no_wrap=True)
    table.add_column("UTC", width=20, no_wrap=True)
    table.add_column("run id", width=RUN_ID_CHARS, no_wrap=True)
    table.add_column("status", width=max(map(len, STATES)), overflow="fold")  # " (forced)" wraps under it
    table.add_column("attempts", width=8, justify="right", no_wrap=True)
    table.add_column("takeover", width=8, no_wrap=True)
    table.add_column("duration", width=12, justify="right", no_wrap=True)
    table.add_column("result", width=24, overflow="fold")
    table.add_column("error", min_width=20, overflow="fold")
    return table


def add_run_row(table: Table, run: HistoryRun, time_zone: str) -> None:
    """One run's row: schedule time in the job's zone and in UTC, state, attempts, takeover, duration,
    result size or why it was dropped, error."""
    state = run.state + (" (forced)" if run.manual else "")
    result = f"dropped: {run.result_dropped}" if run.result_dropped else _size(run.result_bytes)
    table.add_row(_local(run.schedule_time, time_zone), _utc_text(run.schedule_time), run.run_id[:RUN_ID_CHARS],
                  f"[{_STYLE.get(run.state, '')}]{state}[/]" if run.state in _STYLE else state,
                  str(run.attempts), "yes" if run.took_over else "", _duration(run.duration_seconds), result,
                  _short_run_ids(run.error or ""))


def _short_run_ids(text: str) -> str:
    """``text`` with each full run id (64 hex characters) cut to the table's short run id, which ``runs show``
    accepts; ``runs show`` prints the error whole."""
    return _FULL_RUN_ID.sub(lambda m: m.group(0)[:RUN_ID_CHARS], text)


def report_table(report: Report, findings: list[Finding]) -> Table:
    """The findings of a report, newest first."""
    what = (f"Expected against actual: {report.schedule!r} in {report.time_zone}" if report.missed_checked
            else "Problems in the records (no schedule: missed runs not checked)")
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, title_justify="left",
                  title=f"{what}, {_utc_text(report.since)} to {_utc_text(report.until)}")
    table.add_column("finding", width=10, no_wrap=True)
    table.add_column("schedule time (job)", width=26, no_wrap=True)
    table.add_column("UTC", width=20, no_wrap=True)
    table.add_column("run id", width=RUN_ID_CHARS, no_wrap=True)
    table.add_column("why", min_width=30, overflow="fold")
    for f in findings:
        table.add_row(f"[{_STYLE[f.kind]}]{f.kind}[/]", _local(f.schedule_time, report.time_zone),
                      _utc_text(f.schedule_time), f.run.run_id[:RUN_ID_CHARS] if f.run else "", f.detail)
    return table


def report_summary(report: Report) -> str:
    """One line: expected, recorded and the count of each finding; OK or FAIL. Without a schedule:
    the runs recorded, failed and stuck counts, and that missed runs were not checked."""
    counts = ", ".join(f"{n} {kind}" for kind, n in report.counts().items() if n)
    verdict = "[green bold]OK[/]" if report.ok else "[red bold]FAIL[/]"
    if not report.missed_checked:
        return (f"{verdict} {report.job_name}: {report.runs} runs recorded"
                f"{'; ' + counts if counts else '; nothing failed or stuck'}; missed runs not checked: the records "
                "carry no schedule (set DEDUP_SCHEDULE on the handler) and --schedule was not given")
    bound = ""
    if report.active_since is not None and report.active_since > report.since:
        why = ("the job got its schedule then" if report.active_since_source == SINCE_SCHEDULE_CHANGE
               else "its earliest run record; the records do not say when the job was created")
        bound = f"; fire times before {_utc_text(report.active_since)} not expected ({why})"
    return (f"{verdict} {report.job_name}: {report.recorded}/{report.expected} expected runs recorded"
            f"{'; ' + counts if counts else '; nothing missed, failed or stuck'}{bound} "
            f"(grace {report.grace_seconds:g} s)")


class _Output:
    """Prints runs as they stream: table chunks with fixed widths, or JSON lines."""

    def __init__(self, console: Console, as_json: bool, job: str, time_zone: str):
        self.console, self.as_json, self.job, self.time_zone = console, as_json, job, time_zone
        self._rows: list[HistoryRun] = []
        self.printed = 0

    def run(self, run: HistoryRun) -> None:
        if self.as_json:
            click.echo(json.dumps({"record": "run", **run.to_json(self.time_zone)}))
            self.printed += 1
            return
        self._rows.append(run)
        if len(self._rows) >= CHUNK_ROWS:
            self.flush()

    def flush(self) -> None:
        if not self._rows:
            return
        title = f"Runs of {self.job}, newest first (job times in {self.time_zone})" if self.printed == 0 else None
        table = runs_table(header=self.printed == 0, title=title)
        for run in self._rows:
            add_run_row(table, run, self.time_zone)
        self.console.print(table)
        self.printed += len(self._rows)
        self._rows = []


def _history(store: str, project: str | None, database: str | None, instance: str | None,
             collection: str) -> RunHistory:
    """A reader on the run store; exits 2 with what to do when there is no project or no credentials.

    ``database`` and ``instance`` set the store's variables of those names (:func:`_where_variables`: the Firestore
    database id; the Spanner instance and database ids), else the environment's; the other stores' are left out.
    """
    import os

    from scheduler_dedup.handler.config.settings import Settings
    from scheduler_dedup.handler.stores import EMULATOR_VARIABLES, open_store

    emulator = EMULATOR_VARIABLES.get(store)
    if project is None and emulator and os.environ.get(emulator):
        raise click.UsageError("give --project (or set GOOGLE_CLOUD_PROJECT): the emulator keeps each project's "
                               "records apart, e.g. --project demo-scheduler-dedup")
    err = make_console(stderr=True)
    try:
        variables = _where_variables()
        others = {name for kind, names in variables.items() if kind != store for name in names.values()}
        given = {"database": database, "instance": instance}
        where = {name: value for what, name in variables.get(store, {}).items() if (value := given.get(what))}
        env = {name: value for name, value in os.environ.items() if name not in others}
        settings = Settings.from_env({**env, "GOOGLE_CLOUD_PROJECT": project or _default_project(),
                                      "DEDUP_STORE": store, **where, "DEDUP_COLLECTION": collection})
        return RunHistory(open_store(settings))
    except ConfigError as exc:
        err.print(f"[red]error:[/] {exc}" + _options_for(str(exc)), highlight=False)
    except StoreCallError as exc:
        hint = f"\n{exc.hint}" if exc.hint else ""
        err.print(f"[red]error:[/] {exc}{hint}" + _options_for(f"{exc}{hint}"), highlight=False)
    sys.exit(_EXIT_ERROR)


def _where_variables() -> dict[str, dict[str, str]]:
    """Store id -> its variables that say where its records are, by the option that sets each here (``database``,
    ``instance``): its registered config's :attr:`~scheduler_dedup.handler.stores.kind.StoreConfig.where`."""
    from scheduler_dedup.handler.stores.kind import load
    from scheduler_dedup.handler.stores.registry import STORES

    return {kind.id: dict(load(kind.config).where) if kind.config else {} for kind in STORES}


def _options_for(message: str) -> str:
    """`` (on this command: --instance sets DEDUP_SPANNER_INSTANCE, ...)`` for each variable ``message`` names
    that an option of ``runs`` sets, so the error's fix is one the reader can type here; else ""."""
    option_of = {"GOOGLE_CLOUD_PROJECT": "--project",
                 **{name: f"--{what}" for names in _where_variables().values() for what, name in names.items()},
                 "DEDUP_COLLECTION": "--collection"}
    named = [f"{option} sets {name}" for name, option in option_of.items() if re.search(rf"\b{name}\b", message)]
    return f" (on this command: {', '.join(named)})" if named else ""


def _default_project() -> str:
    """The project of Application Default Credentials, or "" (the settings then say what to set); exits 2
    saying how to log in when there are no credentials."""
    import google.auth
    from google.auth.exceptions import DefaultCredentialsError

    try:
        return google.auth.default()[1] or ""
    except DefaultCredentialsError:
        make_console(stderr=True).print(
            "[red]error:[/] no Google credentials: run `gcloud auth application-default login` (on Firestore an "
            "account with roles/datastore.viewer is enough), or give --project and set the store's emulator "
            "variable (FIRESTORE_EMULATOR_HOST...) to read an emulator")
        sys.exit(_EXIT_ERROR)


def _read_failed(err: Console, collection: str, exc: StoreCallError) -> None:
    """Print why reading failed and what to check (the store's hint: the endpoint and credentials when it did
    not answer, the composite index when the query needs it)."""
    err.print(f"[red]error:[/] reading {collection!r} failed: {exc}", highlight=False)
    if exc.hint:
        what = f"{exc.store} did not answer: " if isinstance(exc, StoreUnavailableError) else ""
        err.print(what + exc.hint + _options_for(exc.hint), highlight=False)


def _progress(console: Console) -> Any:
    if not console.is_terminal:
        return nullcontext(None)
    return Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=console,
                    transient=True)


_COMMON = [
    click.option("--store", envvar="DEDUP_STORE", default=DEFAULT_STORE, show_default=True,
                 type=StoreName(), help="the run store [env DEDUP_STORE]."),
    click.option("--project", envvar="GOOGLE_CLOUD_PROJECT", default=None,
                 help="project id of the run store [env GOOGLE_CLOUD_PROJECT; else from ADC]."),
    click.option("--database", default=None,
                 help="the store's database: the Firestore database id [env DEDUP_DATABASE, default: (default)], "
                      "or the Spanner database id [env DEDUP_SPANNER_DATABASE]."),
    click.option("--instance", envvar="DEDUP_SPANNER_INSTANCE", default=None,
                 help="the Spanner instance id, with --store spanner [env DEDUP_SPANNER_INSTANCE]."),
    click.option("--collection", default=DEFAULT_COLLECTION, show_default=True,
                 help="collection (on Spanner: table) of run records."),
    click.option("--json", "as_json", is_flag=True, help="one JSON object per line (stable field names)."),
]


def _common(fn: Any) -> Any:
    for option in reversed(_COMMON):
        fn = option(fn)
    return fn


@click.group(invoke_without_command=True)
@click.option("--job", help="Cloud Scheduler job id (X-CloudScheduler-JobName) whose runs to list, or its full name "
                            "projects/P/locations/L/jobs/J for only that project's and region's runs (jobs with one "
                            "id elsewhere may share the store).")
@click.option("--since", default="7d", show_default=True,
              help="oldest schedule time: 7d/36h/90m ago, a date, or RFC 3339.")
@click.option("--until", default=None, help="newest schedule time (exclusive) [default: now].")
@click.option("--status", "statuses", multiple=True, type=click.Choice(STATES + KINDS),
              help="show only runs in these states, or only report findings of these kinds; repeatable.")
@click.option("--schedule", default=None,
              help="unix-cron schedule to compare with [default: the one the handler stored on the records].")
@click.option("--time-zone", default=None, help="the schedule's tz database time zone [default: stored, else Etc/UTC].")
@click.option("--grace", "grace_seconds", default=DEFAULT_GRACE_SECONDS, show_default=True, type=float,
              help="seconds after a fire time before a run with no record counts as missed.")
@click.option("--paused-since", default=None,
              help="when the job was paused (the handler's DEDUP_PAUSED_SINCE, or `gcloud scheduler jobs describe`: "
                   "state PAUSED, userUpdateTime): fire times since are one paused span, not missed runs.")
@click.option("--resumed-at", default=None,
              help="when that pause ended (the handler's DEDUP_RESUMED_AT): fire times from then on are expected "
                   "again [default: the pause goes on].")
@click.option("--no-report", is_flag=True, help="list runs only; do not compare with the schedule.")
@_common
@click.pass_context
def runs(ctx: click.Context, job: str | None, since: str, until: str | None, statuses: tuple[str, ...],
         schedule: str | None, time_zone: str | None, grace_seconds: float, paused_since: str | None,
         resumed_at: str | None, no_report: bool,
         store: str, project: str | None, database: str | None, instance: str | None, collection: str,
         as_json: bool) -> None:
    """One job's runs, newest first, then expected against actual fire times.

    Each run shows its schedule time in the job's time zone and in UTC, status, attempts, takeover,
    duration, result size (or why it was dropped) and error. With a schedule (given, or stored on the
    records by the handler) the fire times in the window are compared with the records: missed,
    late, failed, stuck, repeated and unexpected runs are listed, and the command exits 1 if any run
    was missed, failed or is stuck (2 if it could not check). With --paused-since, the fire times from the pause
    on (until --resumed-at) are one paused span, not missed. Without a schedule, failed and stuck
    runs still count (they are facts of the records) but missed runs cannot be checked: the summary
    says so. On Firestore it needs roles/datastore.viewer, on Spanner roles/spanner.databaseReader.

    \b
    Examples:
      scheduler-dedup runs --job nightly-report
      scheduler-dedup runs --job nightly-report --since 7d --status missed
      scheduler-dedup runs --job nightly-report --json | jq .
      scheduler-dedup runs show 2026-11-30T02:30:00Z --job nightly-report
      scheduler-dedup runs --job nightly-report --store spanner --instance I --database D
    """
    if ctx.invoked_subcommand is not None:
        return
    if not job:
        raise click.UsageError("give --job: the Cloud Scheduler job id whose runs to list")
    if time_zone is not None and not is_iana_time_zone(time_zone):
        raise click.BadParameter(f"{time_zone!r} is not a tz database time zone: {time_zone_suggestion(time_zone)}",
                                 param_hint="--time-zone")
    if schedule is not None and unix_cron_problem(schedule):
        raise click.BadParameter(str(unix_cron_problem(schedule)), param_hint="--schedule")
    if resumed_at is not None and paused_since is None:
        raise click.UsageError("--resumed-at ends a pause: give --paused-since too (the handler's DEDUP_PAUSED_SINCE)")
    sys.exit(_list_and_check(job, since, until, statuses, schedule, time_zone, grace_seconds, no_report, store,
                             project, database, instance, collection, as_json, paused_since, resumed_at))


def _list_and_check(job: str, since_text: str, until_text: str | None, statuses: tuple[str, ...],
                    schedule: str | None, time_zone: str | None, grace_seconds: float, no_report: bool, store: str,
                    project: str | None, database: str | None, instance: str | None, collection: str,
                    as_json: bool, paused_text: str | None = None, resumed_text: str | None = None) -> int:
    console, err = make_console(), make_console(stderr=True)
    now = datetime.now(timezone.utc)
    run_states = {s for s in statuses if s in STATES}
    kinds = {s for s in statuses if s in KINDS}
    list_runs = bool(run_states) or not kinds
    try:
        history = _history(store, project, database, instance, collection)
        scope = JobScope.parse(job)
        latest = scope.latest(history) if (schedule is None or time_zone is None) else None
        time_zone = time_zone or (latest.time_zone if latest else None) or DEFAULT_TIME_ZONE
        schedule = schedule or (latest.schedule if latest else None)
        since = parse_when(since_text, now, time_zone)
        until = parse_when(until_text, now, time_zone) if until_text else now
        paused_since = parse_when(paused_text, now, time_zone) if paused_text else None
        resumed_at = parse_when(resumed_text, now, time_zone) if resumed_text else None
        if paused_since is not None and resumed_at is not None and resumed_at < paused_since:
            raise click.BadParameter(f"--resumed-at {_utc_text(resumed_at)} is before --paused-since "
                                     f"{_utc_text(paused_since)}")
        if until <= since:
            raise click.BadParameter(f"--until {_utc_text(until)} is not after --since {_utc_text(since)}")
        checking = not no_report
        out = _Output(console, as_json, job, time_zone)
        margin = timedelta(days=1) if checking else timedelta(0)
        with _progress(err) as progress:
            task = progress.add_task(f"reading runs of {job}", total=None) if progress else None

            def on_page(scanned: int) -> None:
                if progress is not None:
                    progress.update(task, description=f"reading runs of {job}: {scanned} records scanned")

            def stream() -> Iterator[HistoryRun]:
                for run in scope.runs(history, since=since - margin, until=until + margin, on_page=on_page):
                    if list_runs and since <= run.schedule_time < until and (not run_states or run.state in run_states):
                        out.run(run)
                    yield run

            if checking:
                older = scope.has_runs_before(history, since - margin)
                report: Report | None = compare(stream(), job_name=job, schedule=schedule, time_zone=time_zone,
                                                since=since, until=until, now=now, grace_seconds=grace_seconds,
                                                runs_before_window=older,
                                                pauses=[(paused_since, resumed_at)] if paused_since else [])
            else:
                for _ in stream():
                    pass
                report = None
        out.flush()
    except StoreCallError as exc:
        _read_failed(err, collection, exc)
        return _EXIT_ERROR
    except ValueError as exc:
        err.print(f"[red]error:[/] {exc}")
        return _EXIT_ERROR
    if list_runs and not as_json and out.printed == 0:
        console.print(f"No runs of {job!r} with schedule times from {_utc_text(since)} to {_utc_text(until)}"
                      f"{' in state ' + '/'.join(sorted(run_states)) if run_states else ''}.")
    if report is None:
        return 0
    shown = [f for f in report.findings if not kinds or f.kind in kinds]
    if as_json:
        for f in shown:
            click.echo(json.dumps({"record": "finding", "job_name": job, **f.to_json(report.time_zone)}))
        summary = report.to_json()
        summary.pop("findings")
        click.echo(json.dumps({"record": "summary", **summary}))
    else:
        if shown:
            console.print(report_table(report, shown))
        console.print(report_summary(report))
    return 0 if report.ok else _EXIT_PROBLEMS


def _is_run_id(text: str) -> bool:
    return re.fullmatch(r"[0-9a-f]{4,64}", text) is not None


def _by_run_id(history: RunHistory, run_id: str) -> list[HistoryRun]:
    """The run with this run id or unique run id prefix; exits 2 naming the candidates when the prefix is
    ambiguous."""
    if len(run_id) == 64:
        return [r for r in [history.get(run_id)] if r is not None]
    found = history.with_id_prefix(run_id, limit=2)
    if len(found) > 1:
        raise click.BadParameter(f"run id prefix {run_id!r} matches more than one run ({found[0].run_id[:16]}..., "
                                 f"{found[1].run_id[:16]}..., ...): give more characters", param_hint="RUN_ID")
    return found


@runs.command()
@click.argument("run", metavar="RUN_ID|SCHEDULE_TIME")
@click.option("--job", default=None, help="job id; needed when RUN is a schedule time.")
@click.option("--time-zone", default=None, help="time zone to show times in [default: the record's].")
@_common
def show(run: str, job: str | None, time_zone: str | None, store: str, project: str | None, database: str | None,
         instance: str | None, collection: str, as_json: bool) -> None:
    """One run in full: every field of its record, and its stored result.

    RUN is a run id (64 hex characters, or a unique prefix of at least 4, such as the 12 the report
    prints) or a schedule time (RFC 3339) with --job; a schedule time can match a scheduled and a forced
    run, both are shown. Exits 1 if there is no such run, 2 if the prefix matches several.
    """
    history = _history(store, project, database, instance, collection)
    try:
        found = _find(history, run, job, time_zone)
        records = {item.run_id: history.record(item.run_id) for item in found}
        earlier = {item.run_id: previous_attempts(history.store, item.run_id) for item in found}
    except StoreCallError as exc:
        _read_failed(make_console(stderr=True), collection, exc)
        sys.exit(_EXIT_ERROR)
    console = make_console()
    if not found:
        what = "with run id" + (" prefix" if len(run) < 64 else "") if _is_run_id(run) else "at"
        make_console(stderr=True).print(f"No run {what} {run!r}" + (f" of job {job!r}" if job else "") + ".")
        sys.exit(_EXIT_PROBLEMS)
    for item in found:
        record = records[item.run_id]
        fields = {**item.to_json(time_zone), "result": record.result if record else None}
        if earlier[item.run_id]:  # attempts kept by `runs rerun`, oldest first
            fields["previous_attempts"] = [{"attempt_id": r.attempt_id, "status": r.status, "error": r.error,
                                            "finished_at": rfc3339(r.data.get("finished_at"))}
                                           for r in earlier[item.run_id]]
        if as_json:
            click.echo(json.dumps({"record": "run", **fields}, default=str))
            continue
        table = Table(box=box.SIMPLE, show_header=False, title=f"run {item.run_id}", title_justify="left")
        table.add_column("field", style="bold", no_wrap=True)
        table.add_column("value", overflow="fold")
        for key, value in fields.items():
            text = json.dumps(value, indent=2, default=str) if isinstance(value, (dict, list)) else (
                "" if value is None else str(value))
            table.add_row(key, text)
        console.print(table)


def _find(history: RunHistory, run: str, job: str | None, time_zone: str | None) -> list[HistoryRun]:
    """The runs RUN names: by run id or prefix, or by schedule time with --job."""
    if _is_run_id(run):
        return _by_run_id(history, run)
    if not job:
        raise click.UsageError(f"{run!r} is not a run id (hex: the 12-character prefix the report prints is "
                               "enough); a schedule time needs --job: the job whose run to show")
    try:
        at = parse_when(run, datetime.now(timezone.utc), time_zone or DEFAULT_TIME_ZONE)
    except click.BadParameter:
        raise click.BadParameter(f"{run!r} is neither a run id (hex, e.g. the 12-character prefix the report "
                                 "prints) nor a schedule time (RFC 3339, e.g. 2026-11-02T01:00:00Z)",
                                 param_hint="RUN_ID|SCHEDULE_TIME") from None
    return history.at(job, at)
