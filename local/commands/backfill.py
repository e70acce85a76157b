"""``scheduler-dedup backfill`` and ``scheduler-dedup runs rerun``: deliver fire times that never ran (or failed)
to the handler, through the normal claim.

Each fire time is one POST to the handler with Cloud Scheduler's headers and its own schedule time, so it is keyed
and claimed exactly as Scheduler's delivery of it would be: a concurrent Scheduler delivery, a second backfill or a
catch-up of the same fire time meets the same claim and cannot run it twice. Deliveries go oldest first, one at a
time, at most ``--rate`` per second. A deployed Cloud Run handler gets an OIDC identity token for ``--audience``
from Application Default Credentials (:func:`google.oauth2.id_token.fetch_id_token`; the handler admits only its
allowed callers, so use the Scheduler service account's identity), sent only where
:mod:`~scheduler_dedup.local.commands.token_destination` allows; a loopback URL gets none.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any
from urllib.parse import urlsplit

import click
import requests
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from scheduler_dedup.handler.core.errors import StoreCallError
from scheduler_dedup.handler.core.record import FAILED, RELEASED
from scheduler_dedup.handler.monitoring.run_history import JobScope, RunHistory
from scheduler_dedup.handler.monitoring.run_view import HistoryRun, rfc3339
from scheduler_dedup.handler.schedule.cron.fire_times import fire_times
from scheduler_dedup.local.commands.console import make_console
from scheduler_dedup.local.commands.rerun import RerunPlan, RerunRefused, plan_rerun, reset
from scheduler_dedup.local.commands.setting_options import option_problems
from scheduler_dedup.local.commands.token_destination import Destination, DestinationRefused, token_destination
from scheduler_dedup.local.commands.runs import _by_run_id, _common, _history, _read_failed, parse_when

#: Answers after which a fire time is decided (Scheduler stops on 2xx).
_DECIDED = ("processed", "duplicate", "failed", "skipped_overlap")
_EXIT_PROBLEMS, _EXIT_ERROR = 1, 2


@dataclass(frozen=True)
class Pending:
    """One fire time to deliver: its schedule time (aware UTC) and its record's status (None: no record)."""

    schedule_time: datetime
    status: str | None
    run_id: str | None = None


def to_backfill(runs: list[HistoryRun], schedule: str, time_zone: str, since: datetime, until: datetime,
                reprocess_failed: bool) -> list[Pending]:
    """The fire times of ``[since, until)`` with no scheduled run recorded (and, if asked, those recorded failed or
    released: every attempt failed retryably), oldest first."""
    by_time: dict[datetime, HistoryRun] = {r.schedule_time: r for r in runs if not r.manual}
    pending = []
    for fire in fire_times(schedule, time_zone, since, until):
        found = [by_time[t] for t in fire.candidates if t in by_time]
        if not found:
            if fire.required:
                pending.append(Pending(fire.first, None))
        elif reprocess_failed and all(r.status in (FAILED, RELEASED) for r in found):
            pending.append(Pending(found[0].schedule_time, found[0].status, found[0].run_id))
    return pending


def token_source(destination: Destination) -> Callable[[], str | None]:
    """A function giving the ``Authorization`` bearer token for ``destination`` (already judged by
    :func:`~scheduler_dedup.local.commands.token_destination.token_destination`): none for a loopback handler, else
    a Google OIDC identity token for its audience, fetched on first use and reused."""
    audience = destination.audience
    if audience is None:
        return lambda: None
    cached: list[str] = []

    def get() -> str | None:
        if not cached:
            import google.auth.transport.requests
            import google.oauth2.id_token

            cached.append(google.oauth2.id_token.fetch_id_token(google.auth.transport.requests.Request(), audience))
        return cached[0]

    return get


def judged_destination(url: str, audience: str | None, token_origin: str | None) -> Destination:
    """:func:`~scheduler_dedup.local.commands.token_destination.token_destination`, its refusal as a usage error
    (exit 2) before anything is read, written, minted or sent."""
    try:
        return token_destination(url, audience, token_origin)
    except DestinationRefused as exc:
        raise click.UsageError(str(exc)) from None


def deliver(url: str, job: str, schedule_time: datetime, token: Callable[[], str | None], *,
            project: str | None = None, location: str | None = None, timeout: float = 180.0,
            tries: int = 4) -> dict[str, Any]:
    """POST one fire time to the handler as Cloud Scheduler would; retry a 5xx or no answer (at most ``tries``).

    Returns:
        The answer's JSON body with ``http_status`` added (``{"status": "no_answer", ...}`` when none came).
    """
    headers = {"X-CloudScheduler-JobName": job, "User-Agent": "Google-Cloud-Scheduler (scheduler-dedup backfill)",
               "X-CloudScheduler-ScheduleTime": rfc3339(schedule_time) or ""}
    if project:
        headers["X-Dedup-Project"] = project
    if location:
        headers["X-Dedup-Location"] = location
    body: dict[str, Any] = {"status": "no_answer"}
    for attempt in range(tries):
        bearer = token()
        if bearer:
            headers["Authorization"] = f"Bearer {bearer}"
        try:
            # No redirect is followed: the token goes to the judged origin only.
            response = requests.post(url, headers=headers, data=b"", timeout=timeout, allow_redirects=False)
            try:
                body = dict(response.json())
            except ValueError:
                body = {"status": "non_json", "error": response.text[:200]}
            body["http_status"] = response.status_code
            if response.status_code < 500 and body.get("status") != "in_progress":
                return body
        except requests.RequestException as exc:
            body = {"status": "no_answer", "error": f"{type(exc).__name__}: {exc}"}
        if attempt + 1 < tries:
            time.sleep(min(float(body.get("retry_after_seconds") or 2 ** attempt), 30.0))
    return body


def reset_once_reached(store: Any, plan: RerunPlan, url: str, token: Callable[[], str | None]) -> None:
    """Reset a failed run for its re-run (:func:`~scheduler_dedup.local.commands.rerun.reset`) only once a delivery
    of its fire time is known to reach the handler and be read there: the handler answers ``failed`` for this very
    run id, which runs and writes nothing. A released run is not reset at all (the delivery claims it as it is).

    Raises:
        RerunRefused: the probe got no answer, or not the handler's answer for this run: nothing was changed.
        StoreUnavailableError, StoreRefusedError: from the reset.
    """
    if plan.copy_id:
        data = plan.record.data
        probe = deliver(url, str(data.get("job_name")), data["schedule_time"], token, project=data.get("project"),
                        location=data.get("location"), tries=1)
        if probe.get("status") != FAILED or probe.get("run_id") != plan.record.run_id:
            raise RerunRefused(f"the handler at {url} did not answer for run {plan.record.run_id} (got "
                               f"{probe.get('http_status', 'no answer')} {probe.get('status')}: "
                               f"{str(probe.get('error') or '')[:200]}): nothing was changed")
    reset(store, plan)


@click.command()
@click.option("--job", required=True, help="Scheduler job id (X-CloudScheduler-JobName), or its full name "
                                           "projects/P/locations/L/jobs/J.")
@click.option("--since", required=True, help="oldest fire time: 7d/36h/90m ago, a date, or RFC 3339.")
@click.option("--until", default=None, help="newest fire time (exclusive) [default: now].")
@click.option("--dry-run", is_flag=True, help="list what would be delivered; deliver nothing, write nothing.")
@click.option("--reprocess", type=click.Choice(["failed"]), default=None,
              help="also re-run fire times recorded failed or released (each as `runs rerun` does).")
@click.option("--url", default=None, help="the handler's URL (the Cloud Run service's, or a local one).")
@click.option("--audience", default=None, help="OIDC audience of the identity token for a deployed handler "
                                                "(its DEDUP_OIDC_AUDIENCE) [default: the URL's origin].")
@click.option("--token-origin", default=None, help="the handler's https origin, to send it a token for an "
                                                    "--audience of another origin (the component's custom audience).")
@click.option("--rate", default=1.0, show_default=True, type=click.FloatRange(0.01, 100),
              help="most deliveries per second.")
@click.option("--schedule", default=None, help="the job's unix-cron schedule [default: the newest record's].")
@click.option("--time-zone", default=None, help="the schedule's time zone [default: the newest record's].")
@_common
def backfill(job: str, since: str, until: str | None, dry_run: bool, reprocess: str | None, url: str | None,
             audience: str | None, token_origin: str | None, rate: float, schedule: str | None,
             time_zone: str | None, store: str,
             project: str | None, database: str | None, instance: str | None, collection: str, as_json: bool) -> None:
    """Deliver the job's fire times of [--since, --until) that have no record (or failed, with --reprocess failed)
    to the handler, oldest first, at most --rate a second, each through the normal claim.

    Exits 0 when every one was decided, 1 when some were not (in progress elsewhere, or the handler failed), 2 on
    bad input or an unreadable store.
    """
    if not dry_run and not url:
        raise click.UsageError("give --url (the handler's URL) to deliver, or --dry-run to list")
    problems = option_problems(schedule, time_zone)  # as check and preview read them; a record's are the handler's
    if problems:
        raise click.UsageError("\n".join(problems))
    destination = judged_destination(url, audience, token_origin) if url and not dry_run else None
    console, err = make_console(), make_console(stderr=True)
    history = _history(store, project, database, instance, collection)
    scope = JobScope.parse(job)
    try:
        newest = scope.latest(history)
        tz = time_zone or (newest.time_zone if newest else None) or "Etc/UTC"
        cron = schedule or (newest.schedule if newest else None)
        if not cron:
            raise click.UsageError(f"job {job!r} has no record naming its schedule: give --schedule")
        now = datetime.now(timezone.utc)
        start, end = parse_when(since, now, tz), parse_when(until, now, tz) if until else now
        runs = list(scope.runs(history, since=start, until=end))
        pending = to_backfill(runs, cron, tz, start, end, reprocess == "failed")
    except StoreCallError as exc:
        _read_failed(err, collection, exc)
        sys.exit(_EXIT_ERROR)
    key_project = scope.project or (newest.project if newest else None)
    key_location = scope.location or (newest.location if newest else None)
    if dry_run or not pending:
        table = Table(title=f"{len(pending)} fire times to deliver" + (" (dry run)" if dry_run else ""),
                      title_justify="left")
        table.add_column("schedule time (UTC)")
        table.add_column("record")
        for item in pending:
            table.add_row(rfc3339(item.schedule_time) or "", item.status or "none")
        console.print(table)
        return
    assert url is not None and destination is not None
    token = token_source(destination)
    outcomes: list[tuple[Pending, dict[str, Any]]] = []
    with Progress(TextColumn("backfill {task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                  console=console, disable=as_json) as progress:
        task = progress.add_task(scope.job_id, total=len(pending))
        for item in pending:
            began = time.monotonic()
            if item.status in (FAILED, RELEASED) and item.run_id:
                try:
                    reset_once_reached(history.store, plan_rerun(history.store, item.run_id), url, token)
                except RerunRefused as exc:
                    outcomes.append((item, {"status": "not_rerun", "error": str(exc)}))
                    progress.advance(task)
                    continue
            outcomes.append((item, deliver(url, scope.job_id if scope.narrowed else job, item.schedule_time, token,
                                           project=key_project, location=key_location)))
            progress.advance(task)
            time.sleep(max(0.0, 1.0 / rate - (time.monotonic() - began)))
    table = Table(title=f"backfill of {job}", title_justify="left")
    for column in ("schedule time (UTC)", "was", "answer", "run id"):
        table.add_column(column)
    for item, body in outcomes:
        table.add_row(rfc3339(item.schedule_time) or "", item.status or "none", str(body.get("status")),
                      str(body.get("run_id", ""))[:12])
    console.print(table)
    sys.exit(0 if all(body.get("status") in _DECIDED for _, body in outcomes) else _EXIT_PROBLEMS)


@click.command("rerun")
@click.argument("run_id", metavar="RUN_ID")
@click.option("--dry-run", is_flag=True, help="say exactly what would change; write and deliver nothing.")
@click.option("--url", default=None, help="the handler's URL to deliver the fire time to once reset.")
@click.option("--audience", default=None, help="OIDC audience for a deployed handler [default: the URL's origin].")
@click.option("--token-origin", default=None, help="the handler's https origin, to send it a token for an "
                                                    "--audience of another origin (the component's custom audience).")
@_common
def rerun(run_id: str, dry_run: bool, url: str | None, audience: str | None, token_origin: str | None, store: str,
          project: str | None, database: str | None, instance: str | None, collection: str, as_json: bool) -> None:
    """Re-run a failed run through the fence, keeping the failed attempt as a previous attempt record (a released
    run, whose every attempt failed retryably, is delivered as it is: the claim takes it as a retry).

    RUN_ID is a run id or a unique prefix (at least 4 hex characters). Exits 1 if the run is neither failed nor
    released or changed meanwhile, 2 on bad input or an unreadable store.
    """
    if not dry_run and not url:
        raise click.UsageError("give --url (the handler's URL) to run it again, or --dry-run to see the plan")
    destination = judged_destination(url, audience, token_origin) if url and not dry_run else None
    token = token_source(destination) if destination else (lambda: None)
    console, err = make_console(), make_console(stderr=True)
    history = _history(store, project, database, instance, collection)
    try:
        found = _by_run_id(history, run_id)
        if not found:
            raise RerunRefused(f"no run with run id {run_id!r}")
        plan = plan_rerun(history.store, found[0].run_id)
        if dry_run:
            console.print(f"dry run: re-running {plan.record.run_id} would")
            for step in plan.describe():
                console.print(f"  - {step}")
            return
        assert url is not None
        reset_once_reached(history.store, plan, url, token)
    except RerunRefused as exc:
        err.print(f"[red]not re-run:[/] {exc}", highlight=False)
        sys.exit(_EXIT_PROBLEMS)
    except StoreCallError as exc:
        _read_failed(err, collection, exc)
        sys.exit(_EXIT_ERROR)
    assert url is not None
    data = plan.record.data
    body = deliver(url, str(data.get("job_name")), data["schedule_time"], token,
                   project=data.get("project"), location=data.get("location"))
    kept = (f"kept failed attempt {plan.record.attempt_id} as previous attempt #{plan.rank}" if plan.copy_id else
            f"released run (last attempt {plan.record.attempt_id}), claimed as a retry")
    console.print(f"{kept}; delivered again: {body.get('status')}", highlight=False)
    if body.get("status") not in _DECIDED and plan.copy_id:
        why = body.get("error") or body.get("status")
        err.print(f"the run record was reset but the delivery was not decided ({why}): the fire time "
                  f"{plan.schedule_time} now has no record; deliver it again with `scheduler-dedup backfill "
                  f"--job {data.get('job_name')} --since {plan.schedule_time} --url ...`", highlight=False)
    sys.exit(0 if body.get("status") in _DECIDED else _EXIT_PROBLEMS)
