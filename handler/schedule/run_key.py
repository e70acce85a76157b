"""The run key: which scheduled run a request belongs to, and its run id.

Cloud Scheduler sends, on every delivery of one run, ``X-CloudScheduler-JobName`` and
``X-CloudScheduler-ScheduleTime`` (RFC 3339; the same value on every retry of that run; sent only for
unix-cron schedules). See https://cloud.google.com/scheduler/docs/reference/rpc/google.cloud.scheduler.v1#httptarget
(the ``headers`` field). Our component adds ``X-Dedup-Project`` and ``X-Dedup-Location`` so that one job
id in two projects or regions gives two runs.

**One run, one identity.** Google's pages describe ``X-CloudScheduler-JobName`` as the job's short id in
some places and as its full resource name (``projects/P/locations/L/jobs/J``) in others, so both reach
real handlers. A full name is split into project, location and job id, and the run is keyed on those. When
``X-Dedup-Project`` / ``X-Dedup-Location`` are sent as well they must agree with the full name, or the
request is refused (400) naming both headers; without them the full name's project and location are used.
A short id is keyed on the project and location the request or the settings give: ``X-Dedup-*`` headers
(the component sends them), else ``DEDUP_SCHEDULER_JOB``'s. So ``n-two`` and
``projects/P/locations/L/jobs/n-two`` key the same run whenever the location is known; a short id with no
location known at all (no header, no ``DEDUP_SCHEDULER_JOB``) is keyed without one, and then differs from the
full name's run: set ``DEDUP_SCHEDULER_JOB`` (or send ``X-Dedup-Location``) where both forms may arrive.

**The handler's own job.** With ``own_job`` (``DEDUP_SCHEDULER_JOB``), a delivery whose job id, project or
location differs from it is refused with :class:`~scheduler_dedup.handler.core.errors.OtherJobError` (403, naming both),
and the run is keyed on ``own_job``'s parts, never on the headers: run ids of two handlers serving two jobs
cannot collide, whatever a caller sends.

**Repeated headers.** A header sent twice with the same value is one value. WSGI servers (gunicorn,
werkzeug) join repeated header lines with commas (PEP 3333, RFC 9110 section 5.3), so a value is split on
commas. Parts that are each a valid value and differ are "sent N times with different values"; a value whose
parts are not each valid (``Tue, 01 Dec 2026 10:00:00 GMT``) was one value containing a comma, and is judged
whole: here, not an RFC 3339 date-time.
"""

from __future__ import annotations

import hashlib
import re
import zoneinfo
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Protocol

from scheduler_dedup.handler.core.errors import OtherJobError, RequestHeaderError

JOB_NAME_HEADER = "X-CloudScheduler-JobName"
SCHEDULE_TIME_HEADER = "X-CloudScheduler-ScheduleTime"
PROJECT_HEADER = "X-Dedup-Project"
LOCATION_HEADER = "X-Dedup-Location"

# Job ids: letters, digits, hyphens, underscores, at most 500 characters
# (https://cloud.google.com/scheduler/docs/reference/rest/v1/projects.locations.jobs#Job.FIELDS.name).
JOB_ID_RE = re.compile(r"^[A-Za-z0-9_-]{1,500}$")


def job_id_problem(job_id: str) -> str | None:
    """Why ``job_id`` is not a Cloud Scheduler job id (:data:`JOB_ID_RE`: letters, digits, '-' or '_', 1-500
    characters; Job.name on the REST reference), in words naming the fix, or None."""
    if JOB_ID_RE.match(job_id):
        return None
    bad = sorted({c for c in job_id if not re.match(r"[A-Za-z0-9_-]", c)})
    what = f"has {', '.join(repr(c) for c in bad)}" if bad else f"is {len(job_id)} characters long"
    suggestion = re.sub(r"[^A-Za-z0-9_-]+", "-", job_id)[:500].strip("-") or "nightly-report"
    return (f"{job_id[:80]!r} {what}: a Scheduler job id is 1-500 letters, digits, '-' or '_' "
            f"(e.g. {suggestion[:80]!r})")
# The full resource name, projects/PROJECT_ID/locations/LOCATION_ID/jobs/JOB_ID (same page).
_FULL_NAME_RE = re.compile(r"^projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)/jobs/(?P<job>[^/]+)$")
# Project ids: https://cloud.google.com/resource-manager/docs/creating-managing-projects#before_you_begin
# (6-30 characters; older ids may carry a domain prefix such as example.com:my-project).
PROJECT_ID_RE = re.compile(r"^[a-z]([a-z0-9.:-]{0,98}[a-z0-9])?$")
# Schedule times outside these years are not real runs, and would overflow the record's
# timestamps (Firestore stores years 1 to 9999; expire_at adds the retention).
MIN_YEAR, MAX_YEAR = 1970, 9000
_LOCATION_RE = re.compile(r"^[a-z][a-z0-9-]{0,62}$")
_RFC3339_RE = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})$")


class HeaderSource(Protocol):
    """Anything with ``items()`` of header names and values: a dict, or Flask's ``request.headers``."""

    def items(self) -> Iterable[tuple[str, str]]: ...


@dataclass(frozen=True)
class RunKey:
    """What identifies one scheduled run.

    Attributes:
        project: project id from ``X-Dedup-Project`` or the full job name (else the handler's own project).
        location: Scheduler region from ``X-Dedup-Location`` or the full job name, or ``""`` when neither
            names one.
        job_name: the Scheduler job's short id (``X-CloudScheduler-JobName``, or the last part of a full
            resource name).
        schedule_time: the run's schedule time, an aware datetime in UTC.
        manual: True for a forced run (schedule time in the future): keyed apart from the
            scheduled run of the same time, so it cannot swallow that run later.
        wall_clock: for a job keyed on local time (``DEDUP_KEY_LOCAL_TIME``), the scheduled run's
            wall-clock time and zone, e.g. ``2026-11-01T01:30:00 America/New_York``; None: keyed on the
            UTC instant (the default).
    """

    project: str
    location: str
    job_name: str
    schedule_time: datetime
    manual: bool = False
    wall_clock: str | None = None

    @property
    def schedule_time_rfc3339(self) -> str:
        """The schedule time as RFC 3339 in UTC with microseconds, e.g. ``2026-10-16T12:00:00.000000Z``."""
        t = self.schedule_time.astimezone(timezone.utc)
        return f"{t.year:04d}-{t:%m-%dT%H:%M:%S.%f}Z"

    @property
    def run_id(self) -> str:
        """The run id: 64 lower-case hex characters, SHA-256 of the key's canonical form.

        The schedule time is normalised to a UTC instant first, so ``2026-10-16T12:00:00Z`` and
        ``2026-10-16T05:00:00-07:00`` give the same run id. A run keyed on its wall-clock time
        (:attr:`wall_clock`) hashes that instead, under a kind of its own, so it never equals a run id of the
        default keying.
        """
        if self.wall_clock is not None and not self.manual:
            kind, when = "scheduled-wall-clock", self.wall_clock
        else:
            kind, when = ("manual" if self.manual else "scheduled"), self.schedule_time_rfc3339
        canonical = "\x1f".join(("scheduler-dedup/v1", kind, self.project, self.location, self.job_name, when))
        return hashlib.sha256(canonical.encode()).hexdigest()


def location_problem(location: str) -> str | None:
    """Why ``location`` is not a Scheduler location id such as ``us-central1`` (in words naming the fix), or None."""
    if _LOCATION_RE.match(location):
        return None
    return f"is {location[:80]!r}, not a region such as us-central1"


def keyed_location(location: str, key_location: str | None) -> str:
    """The location a run key is made with: ``key_location`` (``DEDUP_RUN_KEY_LOCATION``, pinned across a region
    move) when set, else the delivery's or the handler's own job's ``location``. The delivery and the run check
    both key by it."""
    return key_location or location


def parse_schedule_time(value: str) -> datetime:
    """Parse an RFC 3339 timestamp with an explicit offset (``Z`` or ``±HH:MM``) into aware UTC.

    Raises:
        RequestHeaderError: the value is not RFC 3339 date-time with an offset.
    """
    text = value.strip()
    if not _RFC3339_RE.match(text):
        raise RequestHeaderError(
            SCHEDULE_TIME_HEADER,
            f"is {value[:80]!r}, not an RFC 3339 date-time with an offset such as 2026-10-16T12:00:00Z",
        )
    # Python's fromisoformat takes at most 6 fractional digits; RFC 3339 allows more.
    text = re.sub(r"(\.\d{6})\d+", r"\1", text.replace("z", "Z").replace("t", "T"))
    try:
        parsed = datetime.fromisoformat(text).astimezone(timezone.utc)
    except (ValueError, OverflowError) as exc:
        raise RequestHeaderError(SCHEDULE_TIME_HEADER, f"is {value!r}, not a valid date-time: {exc}") from None
    if not MIN_YEAR <= parsed.year <= MAX_YEAR:
        raise RequestHeaderError(SCHEDULE_TIME_HEADER,
                                 f"is {value!r}, outside the years {MIN_YEAR} to {MAX_YEAR} a schedule can have")
    return parsed


def run_key_from_headers(headers: HeaderSource, *, default_project: str, server_now: datetime,
                         manual_tolerance_seconds: float, wall_clock_zone: str | None = None,
                         own_job: str | None = None, key_location: str | None = None) -> RunKey:
    """Build the run key of a request from its headers (looked up case-insensitively).

    Args:
        headers: request headers (a dict or Flask's headers), names compared case-insensitively
            (HTTP/2 sends them lower-case).
        default_project: project used when ``X-Dedup-Project`` is absent.
        server_now: the current time (aware, UTC) by the clock the handler trusts.
        manual_tolerance_seconds: a schedule time later than ``server_now`` by more than this is
            a forced run.
        wall_clock_zone: key scheduled runs on their wall-clock time in this tz database zone
            (``DEDUP_KEY_LOCAL_TIME``); None keys them on the UTC instant.
        own_job: the one job this handler serves, ``projects/P/locations/L/jobs/J`` (``DEDUP_SCHEDULER_JOB``), or
            None to take the job from the headers.
        key_location: the location the key is made with whatever the delivery's (``DEDUP_RUN_KEY_LOCATION``,
            :func:`keyed_location`), or None.

    Raises:
        OtherJobError: the headers name another job than ``own_job`` (its id, project or location).
        RequestHeaderError: a header is missing or malformed; ``.header`` names it.
    """
    lowered: dict[str, list[str]] = {}
    for name, value in headers.items():
        lowered.setdefault(name.lower(), []).append(value)

    def header(name: str, valid: Callable[[str], bool]) -> str | None:
        sent = lowered.get(name.lower(), [])
        parts = [part.strip() for value in sent for part in value.split(",")]
        values = {part for part in parts if part} if len(parts) > 1 else set(parts)
        if len(values) > 1:
            if not all(valid(value) for value in values):
                return ",".join(value.strip() for value in sent)  # one value with a comma in it: judged whole
            raise RequestHeaderError(name, f"is sent {len(values)} times with different values; send it once")
        return values.pop() if values else None

    job_name = header(JOB_NAME_HEADER, lambda v: bool(JOB_ID_RE.match(v) or _FULL_NAME_RE.match(v)))
    if not job_name:
        raise RequestHeaderError(JOB_NAME_HEADER, "is missing or empty: the request did not come from a Cloud "
                                 "Scheduler HTTP job")
    project = header(PROJECT_HEADER, lambda v: bool(PROJECT_ID_RE.match(v)))
    location = header(LOCATION_HEADER, lambda v: bool(_LOCATION_RE.match(v)))
    full = _FULL_NAME_RE.match(job_name)
    if full is not None:
        job_name = _job_name_parts(job_name, full, project, location)
        project, location = full["project"], full["location"]
    if not JOB_ID_RE.match(job_name):
        raise RequestHeaderError(
            JOB_NAME_HEADER, f"is {job_name[:80]!r}: a job id is 1-500 letters, digits, '-' or '_' (or a full name "
                             "projects/P/locations/L/jobs/J)"
        )
    if own_job is not None:
        project, location, job_name = _own_job_parts(own_job, project, location, job_name)
    raw_time = header(SCHEDULE_TIME_HEADER, lambda v: bool(_RFC3339_RE.match(v)))
    if not raw_time:
        raise RequestHeaderError(
            SCHEDULE_TIME_HEADER,
            "is missing: Cloud Scheduler sends it only for unix-cron schedules; give the job a unix-cron "
            "schedule such as '*/5 * * * *' (forced runs of a job with no next run time also omit it)",
        )
    schedule_time = parse_schedule_time(raw_time)
    project = project or default_project
    if not PROJECT_ID_RE.match(project):
        raise RequestHeaderError(PROJECT_HEADER, f"is {project[:80]!r}, not a project id")
    location = location or ""
    if location and location_problem(location):
        raise RequestHeaderError(LOCATION_HEADER, str(location_problem(location)))
    location = keyed_location(location, key_location)
    manual = (schedule_time - server_now).total_seconds() > manual_tolerance_seconds
    wall_clock = None
    if wall_clock_zone is not None:
        local = schedule_time.astimezone(zoneinfo.ZoneInfo(wall_clock_zone))
        wall_clock = f"{local.replace(tzinfo=None).isoformat()} {wall_clock_zone}"
    return RunKey(project=project, location=location, job_name=job_name, schedule_time=schedule_time, manual=manual,
                  wall_clock=wall_clock)


def _own_job_parts(own_job: str, project: str | None, location: str | None, job_id: str) -> tuple[str, str, str]:
    """``(project, location, job id)`` of ``own_job``, after checking that the delivery names that job.

    ``project`` / ``location`` are what the headers (or the full job name) gave, None when nothing did.

    Raises:
        OtherJobError: the job id, project or location differs from ``own_job``'s (naming both).
    """
    own = _FULL_NAME_RE.match(own_job)
    if own is None:
        raise ValueError(f"own_job {own_job!r} is not projects/P/locations/L/jobs/J")
    for header_name, sent, mine, what in ((JOB_NAME_HEADER, job_id, own["job"], "job"),
                                           (PROJECT_HEADER, project, own["project"], "project"),
                                           (LOCATION_HEADER, location, own["location"], "location")):
        if sent is not None and sent != mine:
            raise OtherJobError(header_name, f"names {what} {sent[:120]!r}, but this handler serves only {own_job} "
                                "(DEDUP_SCHEDULER_JOB): send this job's deliveries to its own handler", own_job)
    return own["project"], own["location"], own["job"]


def _job_name_parts(name: str, full: re.Match[str], project: str | None, location: str | None) -> str:
    """The job id of a full resource name, after checking its project and location against the X-Dedup-* headers.

    Raises:
        RequestHeaderError: a part is malformed, or a header disagrees with the name (naming both).
    """
    if not PROJECT_ID_RE.match(full["project"]) or not _LOCATION_RE.match(full["location"]):
        raise RequestHeaderError(JOB_NAME_HEADER, f"is {name[:120]!r}: a full name is projects/PROJECT_ID/"
                                 "locations/REGION/jobs/JOB_ID")
    for header_name, sent, named, what in ((PROJECT_HEADER, project, full["project"], "project"),
                                            (LOCATION_HEADER, location, full["location"], "location")):
        if sent and sent != named:
            raise RequestHeaderError(header_name, f"is {sent[:80]!r} but {JOB_NAME_HEADER} {name[:120]!r} names "
                                     f"{what} {named!r}: send the {what} the job name has, or only one of them")
    return full["job"]
