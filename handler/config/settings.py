"""The handler's settings: one immutable object, read from the environment (:mod:`.environment`) by
:meth:`Settings.from_env`; each store's own settings are its registered ``config`` class's."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone

from scheduler_dedup.handler.schedule.cron.accepted import unix_cron_problem
from scheduler_dedup.handler.schedule.time_zones import DEFAULT_TIME_ZONE, is_iana_time_zone
from scheduler_dedup.handler.core.errors import ConfigError
from scheduler_dedup.handler.schedule.run_key import PROJECT_ID_RE, location_problem
from scheduler_dedup.handler.stores.registry import (DEFAULT_STORE as _DEFAULT_STORE, STORES, find, named,
                                                     store_ids, store_name_problem)
from scheduler_dedup.handler.stores.kind import StoreConfig, StoreKind, load
from scheduler_dedup.handler.config.environment import read_environment
from scheduler_dedup.handler.schedule.catch_up_budget import DEFAULT_ATTEMPT_DEADLINE_SECONDS
from scheduler_dedup.handler.schedule.overlap_policy import (DEFAULT_OVERLAP, catch_up_window_problem,
                                                          overlap_policy_problem)

#: Longest record retention, seconds (10 years; Firestore timestamps end in year 9999).
MAX_RETENTION_SECONDS = 10 * 365 * 86400

# Defaults of the handler's settings; the component and the policy pack use these same names.
DEFAULT_COLLECTION = "scheduler_runs"
DEFAULT_LEASE_SECONDS = 300  # Cloud Run's default request timeout
DEFAULT_RETENTION_SECONDS = 604_800  # 7 days
DEFAULT_MANUAL_TOLERANCE_SECONDS = 5
DEFAULT_STORE_TIMEOUT_SECONDS = 20
#: ``DEDUP_STORE`` values when this module was imported, from the one list of stores
#: (:data:`scheduler_dedup.handler.stores.registry.STORES`).
STORE_KINDS = store_ids()
DEFAULT_STORE = _DEFAULT_STORE

# Firestore limits: https://firebase.google.com/docs/firestore/quotas#collections_documents_and_fields
_COLLECTION_RE = re.compile(r"^[^/\x00]{1,1500}$")
# Full resource names (https://cloud.google.com/run/docs/reference/rest/v2/projects.locations.services and
# https://cloud.google.com/scheduler/docs/reference/rest/v1/projects.locations.jobs#Job.FIELDS.name).
_SERVICE_RE = re.compile(r"^projects/(?P<project>[a-z](?:[a-z0-9.:-]{0,98}[a-z0-9])?)/locations/(?P<location>[a-z][a-z0-9-]*)/"
                         r"services/(?P<name>[a-z][a-z0-9-]{0,62})$")
SCHEDULER_JOB_RE = re.compile(r"^projects/(?P<project>[a-z](?:[a-z0-9.:-]{0,98}[a-z0-9])?)/locations/(?P<location>[a-z][a-z0-9-]*)/"
                              r"jobs/(?P<job>[A-Za-z0-9_-]{1,500})$")


@dataclass(frozen=True)
class Settings:
    """Settings of the dedup handler and of the ``idempotent`` primitive.

    Attributes:
        project: Google Cloud project id of the run store (``GOOGLE_CLOUD_PROJECT``).
        store: the run store (``DEDUP_STORE``), a registered store's kind id
            (:data:`scheduler_dedup.handler.stores.registry.STORES`: ``firestore``, the default, ``redis`` or
            ``spanner``).
        collection: collection of run records (``DEDUP_COLLECTION``, default ``scheduler_runs``); on Spanner the
            table's name.
        lease_seconds: how long a claim stays live without renewal (``DEDUP_LEASE_SECONDS``,
            default 300, the Cloud Run request timeout's default). The lease is renewed every
            ``lease_seconds / 3`` while the job runs; a crashed attempt's lease expires this long
            after its last renewal, and only then may another delivery take the run over.
        retention_seconds: how long a finished record is kept before the TTL policy may delete
            it (``DEDUP_RETENTION_SECONDS``, default 604800 = 7 days). Must outlast the Scheduler
            job's retry window, or a late retry would run the job again.
        manual_tolerance_seconds: a schedule time more than this many seconds ahead of now is a
            forced run (``gcloud scheduler jobs run``), deduplicated on a key of its own
            (``DEDUP_MANUAL_TOLERANCE_SECONDS``, default 5: it only absorbs clock skew).
        store_timeout_seconds: how long one store operation may take, retries of transient errors
            included (``DEDUP_STORE_TIMEOUT_SECONDS``, default 20); keep it well under the attempt
            deadline so a store outage answers 500 in time.
        schedule: the Scheduler job's unix-cron schedule (``DEDUP_SCHEDULE``, optional; the component
            sets it). Stored on every run record, so run history can tell missed runs without being
            told the schedule.
        time_zone: the schedule's tz database time zone (``DEDUP_TIME_ZONE``, default ``Etc/UTC``,
            Cloud Scheduler's default), stored beside it.
        schedule_since: when the Scheduler job got its current schedule (created, or its schedule or time
            zone last changed), aware UTC (``DEDUP_SCHEDULE_SINCE``, RFC 3339; the component sets it). Stored
            on every run record; no fire time before it is expected, so a fresh deploy reports nothing missed.
            None when unknown: run history then bounds its windows by the job's earliest record.
        paused_since: when the Scheduler job was paused, aware UTC (``DEDUP_PAUSED_SINCE``, RFC 3339; the component
            sets it while its ``paused`` input is true, and keeps it, the start of the last pause, after a resume),
            or None: not paused by the stack. The run check reports the fire times from then on (until
            ``resumed_at``) as ``paused``, not missed; a fire time before it is expected as ever.
        resumed_at: when that pause ended, aware UTC (``DEDUP_RESUMED_AT``, RFC 3339; the component sets it while
            the job runs), or None: the pause since ``paused_since`` goes on. Equal to ``paused_since`` for a job
            never paused (an empty pause).
        scheduler_api: the Cloud Scheduler API the run check reads its job's state from, to recognise a pause made
            outside the stack (``DEDUP_SCHEDULER_API``, e.g. ``https://cloudscheduler.googleapis.com``; needs
            ``scheduler_job``), or None: not read (:mod:`scheduler_dedup.handler.monitoring.job_state`).
        run_key_location: the location run keys are made with in place of the Scheduler job's region
            (``DEDUP_RUN_KEY_LOCATION``; the component pins the region of the job's first deploy), or None: the
            delivery's own. Kept across a region move, it keys one fire time delivered by the old and the new job to
            one run; the run check reads the records keyed on it.
        key_local_time: key each scheduled run on its wall-clock time in ``time_zone`` instead of its UTC
            instant (``DEDUP_KEY_LOCAL_TIME``, default false). On the day clocks go back, Scheduler may
            deliver a time of the repeated hour at both instants (its cron page warns of "execution anomalies"
            there); keyed on the wall clock, the second delivery is a duplicate. The trade-off: a schedule that
            fires more than once an hour then runs each repeated wall-clock time once, not twice.
        scheduler_job: the one Cloud Scheduler job this handler serves, its full resource name
            ``projects/P/locations/L/jobs/J`` (``DEDUP_SCHEDULER_JOB``, optional; the component sets it). With it,
            a delivery naming another job is refused with 403, the run is keyed on this name (project, location
            and job id) whatever the ``X-Dedup-*`` headers say, and the run check checks only this job. Without
            it, the headers name the job, and every caller the handler admits can name any job of the store.
        service: this Cloud Run service's full resource name ``projects/P/locations/L/services/S``
            (``DEDUP_SERVICE``; the component sets it). Required with ``DEDUP_TRUST_CLOUD_RUN_IAM=true``: the handler
            reads the service's IAM policy and ``invokerIamDisabled`` through the Cloud Run Admin API
            (``DEDUP_RUN_API``) to prove that Cloud Run IAM guards it (:mod:`scheduler_dedup.handler.callers.trust_premise`).
        store_config: the store's own settings, an instance of its registered ``config`` class
            (:class:`~scheduler_dedup.handler.stores.firestore.config.FirestoreConfig`: ``DEDUP_DATABASE``;
            :class:`~scheduler_dedup.handler.stores.redis.config.RedisConfig`,
            :class:`~scheduler_dedup.handler.stores.spanner.config.SpannerConfig`), read from the store's own
            variables by that class; None for a store without one. Left None for a store with one, it is that
            class's empty settings (so the store's check names what is missing).
        overlap: the job's overlap policy (``DEDUP_OVERLAP``, default ``allow``): ``allow``, ``skip``,
            ``buffer_one`` or ``replace`` (:mod:`scheduler_dedup.handler.protocol.overlap_lease`).
        catch_up_window_seconds: the catch-up window (``DEDUP_CATCH_UP_WINDOW_SECONDS``, default 0: off), seconds
            (:mod:`scheduler_dedup.handler.protocol.catch_up`).
        attempt_deadline_seconds: the Scheduler job's attempt deadline (``DEDUP_ATTEMPT_DEADLINE_SECONDS``, 15 to
            86400; the component sets it; default 180, Scheduler's default for HTTP targets), seconds. A delivery's
            catch-up spends at most a share of it (:mod:`scheduler_dedup.handler.schedule.catch_up_budget`).
    """

    project: str
    store: str = DEFAULT_STORE
    collection: str = DEFAULT_COLLECTION
    lease_seconds: float = DEFAULT_LEASE_SECONDS
    retention_seconds: float = DEFAULT_RETENTION_SECONDS
    manual_tolerance_seconds: float = DEFAULT_MANUAL_TOLERANCE_SECONDS
    store_timeout_seconds: float = DEFAULT_STORE_TIMEOUT_SECONDS
    schedule: str | None = None
    time_zone: str = DEFAULT_TIME_ZONE
    schedule_since: datetime | None = None
    paused_since: datetime | None = None
    resumed_at: datetime | None = None
    key_local_time: bool = False
    run_key_location: str | None = None
    scheduler_job: str | None = None
    scheduler_api: str | None = None
    service: str | None = None
    store_config: StoreConfig | None = None
    overlap: str = DEFAULT_OVERLAP
    catch_up_window_seconds: float = 0.0
    attempt_deadline_seconds: float = DEFAULT_ATTEMPT_DEADLINE_SECONDS

    def __post_init__(self) -> None:
        if not self.project:
            raise ConfigError("GOOGLE_CLOUD_PROJECT is empty: set it to the project id that holds the run store")
        kind = _store_kind(self.store)
        if not PROJECT_ID_RE.match(self.project):
            raise ConfigError(
                f"GOOGLE_CLOUD_PROJECT={self.project!r} is not a project id: use lower-case letters, digits and '-', "
                "e.g. my-project-123"
            )
        if not _COLLECTION_RE.match(self.collection) or self.collection.startswith("__"):
            raise ConfigError(
                f"DEDUP_COLLECTION={self.collection!r} is not a top-level collection id: use a name without '/' "
                "that does not start with '__'"
            )
        if not 1 <= self.lease_seconds <= 86400:
            raise ConfigError(f"DEDUP_LEASE_SECONDS={self.lease_seconds:g} is out of range: use 1 to 86400 seconds")
        if self.retention_seconds > MAX_RETENTION_SECONDS:
            raise ConfigError(
                f"DEDUP_RETENTION_SECONDS={self.retention_seconds:g} is over {MAX_RETENTION_SECONDS} (10 years): "
                "use a week to a few months; it only has to outlast the job's retry window"
            )
        if self.retention_seconds < self.lease_seconds:
            raise ConfigError(
                f"DEDUP_RETENTION_SECONDS={self.retention_seconds:g} is shorter than DEDUP_LEASE_SECONDS="
                f"{self.lease_seconds:g}: keep records at least as long as a lease (a week is usual)"
            )
        if not 0 <= self.manual_tolerance_seconds <= 3600:
            raise ConfigError(
                f"DEDUP_MANUAL_TOLERANCE_SECONDS={self.manual_tolerance_seconds:g} is out of range: use 0 to 3600 "
                "seconds (a few seconds absorb clock skew)"
            )

        if not 0.5 <= self.store_timeout_seconds <= 600:
            raise ConfigError(
                f"DEDUP_STORE_TIMEOUT_SECONDS={self.store_timeout_seconds:g} is out of range: use 0.5 to 600 "
                "seconds, well under the attempt deadline"
            )
        if self.schedule is not None:
            problem = unix_cron_problem(self.schedule)
            if problem:
                raise ConfigError(f"DEDUP_SCHEDULE is {problem}")
        if self.scheduler_job is not None and not SCHEDULER_JOB_RE.match(self.scheduler_job):
            raise ConfigError(
                f"DEDUP_SCHEDULER_JOB={self.scheduler_job[:200]!r} is not a Scheduler job's full name: use "
                "projects/PROJECT_ID/locations/REGION/jobs/JOB_ID (the job this handler serves)"
            )
        if self.run_key_location is not None and location_problem(self.run_key_location):
            raise ConfigError(f"DEDUP_RUN_KEY_LOCATION {location_problem(self.run_key_location)}")
        if self.service is not None and not _SERVICE_RE.match(self.service):
            raise ConfigError(
                f"DEDUP_SERVICE={self.service[:200]!r} is not a Cloud Run service's full name: use "
                "projects/PROJECT_ID/locations/REGION/services/SERVICE (this service's own name)"
            )
        overlap_problem = overlap_policy_problem(self.overlap)
        if overlap_problem:
            raise ConfigError(overlap_problem)
        catch_up_problem = catch_up_window_problem(self.catch_up_window_seconds)
        if catch_up_problem:
            raise ConfigError(catch_up_problem)
        if not 15 <= self.attempt_deadline_seconds <= 86400:
            raise ConfigError(f"DEDUP_ATTEMPT_DEADLINE_SECONDS={self.attempt_deadline_seconds:g} is out of range: use "
                              "the Scheduler job's attempt deadline, 15 to 86400 seconds (the component sets it)")
        if self.catch_up_window_seconds and self.schedule is None:
            raise ConfigError("DEDUP_CATCH_UP_WINDOW_SECONDS is set but DEDUP_SCHEDULE is not: the handler needs the "
                              "schedule to know the missed fire times; set DEDUP_SCHEDULE or drop the window")
        if self.resumed_at is not None and (self.paused_since is None or self.resumed_at < self.paused_since):
            raise ConfigError(
                f"DEDUP_RESUMED_AT={self.resumed_at.isoformat()} ends a pause that "
                + ("has no start: set DEDUP_PAUSED_SINCE too" if self.paused_since is None else
                   f"starts later (DEDUP_PAUSED_SINCE={self.paused_since.isoformat()}): swap them")
                + " (the component sets both)")
        if not is_iana_time_zone(self.time_zone):
            raise ConfigError(
                f"DEDUP_TIME_ZONE={self.time_zone!r} is not a tz database time zone: use the Scheduler job's time "
                f"zone, e.g. {DEFAULT_TIME_ZONE} or Europe/Berlin"
            )
        self._check_store_config(kind)

    @property
    def pause(self) -> tuple[datetime, datetime | None] | None:
        """The stack's pause of the job as ``(since, until)``: until None while it lasts; None when the stack never
        said (``DEDUP_PAUSED_SINCE`` unset). A fire time in it without a record is paused, not missed."""
        return None if self.paused_since is None else (self.paused_since, self.resumed_at)

    def _check_store_config(self, kind: StoreKind) -> None:
        """The store's own settings: of its config class (its empty settings when None), checked by that class."""
        if kind.config is None:
            if self.store_config is not None:
                raise ConfigError(f"DEDUP_STORE={self.store} has no settings of its own, but store_config is "
                                  f"{type(self.store_config).__name__}: leave store_config None")
            return
        config_class = load(kind.config)
        config = config_class() if self.store_config is None else self.store_config
        if not isinstance(config, config_class):
            raise ConfigError(f"DEDUP_STORE={self.store} takes a {config_class.__name__} as store_config, not "
                              f"{type(config).__name__}")
        object.__setattr__(self, "store_config", config)
        config.check(self)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> "Settings":
        """Read settings from ``environ`` (default this process's environment, :func:`.environment.read_environment`).

        Raises:
            ConfigError: a variable is missing or invalid; the message names it and the fix.
        """
        env = read_environment(environ)
        project = env.get("GOOGLE_CLOUD_PROJECT") or env.get("GCLOUD_PROJECT") or ""
        if not project:
            raise ConfigError(
                "GOOGLE_CLOUD_PROJECT is not set: set it to the project id that holds the run store "
                "(Cloud Run does not set it by itself)"
            )
        if "DEDUP_FIRESTORE_TIMEOUT_SECONDS" in env:
            raise ConfigError("DEDUP_FIRESTORE_TIMEOUT_SECONDS was renamed DEDUP_STORE_TIMEOUT_SECONDS (it bounds "
                              "every store's calls): rename the variable, keeping its value")
        kind = _store_kind(env.get("DEDUP_STORE", "").strip() or DEFAULT_STORE)
        store = kind.id  # memorystore is redis: one name from here on
        for other in STORES:  # each store refuses its own variables set for another store
            problem = load(other.config).env_problem(env, store) if other.config else None
            if problem:
                raise ConfigError(problem)
        return cls(
            project=project,
            store=store,
            collection=env.get("DEDUP_COLLECTION", DEFAULT_COLLECTION),
            lease_seconds=_seconds(env, "DEDUP_LEASE_SECONDS", DEFAULT_LEASE_SECONDS),
            retention_seconds=_seconds(env, "DEDUP_RETENTION_SECONDS", DEFAULT_RETENTION_SECONDS),
            manual_tolerance_seconds=_seconds(env, "DEDUP_MANUAL_TOLERANCE_SECONDS", DEFAULT_MANUAL_TOLERANCE_SECONDS),
            store_timeout_seconds=_seconds(env, "DEDUP_STORE_TIMEOUT_SECONDS", DEFAULT_STORE_TIMEOUT_SECONDS),
            schedule=" ".join(env.get("DEDUP_SCHEDULE", "").split()) or None,
            time_zone=env.get("DEDUP_TIME_ZONE", "").strip() or DEFAULT_TIME_ZONE,
            schedule_since=_instant(env, "DEDUP_SCHEDULE_SINCE"),
            paused_since=_instant(env, "DEDUP_PAUSED_SINCE"),
            resumed_at=_instant(env, "DEDUP_RESUMED_AT"),
            key_local_time=_flag(env, "DEDUP_KEY_LOCAL_TIME"),
            run_key_location=env.get("DEDUP_RUN_KEY_LOCATION", "").strip() or None,
            scheduler_job=env.get("DEDUP_SCHEDULER_JOB", "").strip() or None,
            scheduler_api=env.get("DEDUP_SCHEDULER_API", "").strip().rstrip("/") or None,
            service=env.get("DEDUP_SERVICE", "").strip() or None,
            store_config=load(kind.config).from_env(env) if kind.config else None,
            overlap=env.get("DEDUP_OVERLAP", "").strip() or DEFAULT_OVERLAP,
            catch_up_window_seconds=_seconds(env, "DEDUP_CATCH_UP_WINDOW_SECONDS", 0),
            attempt_deadline_seconds=_seconds(env, "DEDUP_ATTEMPT_DEADLINE_SECONDS", DEFAULT_ATTEMPT_DEADLINE_SECONDS),
        )


def _store_kind(store: str) -> StoreKind:
    """The registered store ``DEDUP_STORE`` names.

    Raises:
        ConfigError: it names none.
    """
    kind = named(store)
    if kind is None:
        raise ConfigError(store_name_problem(store, "DEDUP_STORE") or store)
    return kind


def store_timeout_for(attempt_deadline_seconds: int) -> int:
    """``DEDUP_STORE_TIMEOUT_SECONDS`` for a Scheduler job's attempt deadline (both in whole seconds).

    A quarter of the deadline, kept to 2..20 s: a store outage is then answered (500, claim
    released) while Scheduler still listens, and a cold instance's first call still has time.
    """
    return max(2, min(20, attempt_deadline_seconds // 4))


def _instant(env: Mapping[str, str], name: str) -> datetime | None:
    """An RFC 3339 date-time with an offset, as aware UTC; None when unset or empty."""
    raw = env.get(name, "").strip()
    if not raw:
        return None
    try:
        value = datetime.fromisoformat(raw.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        value = None
    if value is None or value.tzinfo is None:
        raise ConfigError(f"{name}={raw!r} is not an RFC 3339 date-time with an offset: use e.g. "
                          f"{name}=2026-12-01T09:30:00Z (the component sets it)")
    return value.astimezone(timezone.utc)


def _flag(env: Mapping[str, str], name: str) -> bool:
    """A boolean setting, ``true`` or ``false``; unset or empty is false."""
    raw = env.get(name, "").strip().lower()
    if raw not in ("", "true", "false"):
        raise ConfigError(f"{name}={env.get(name)!r} is not true or false: use {name}=true or {name}=false")
    return raw == "true"


def _seconds(env: Mapping[str, str], name: str, default: float) -> float:
    default = float(default)
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not a number of seconds: use e.g. {name}={default:g}") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise ConfigError(f"{name}={raw!r} is not a finite number of seconds: use e.g. {name}={default:g}")
    return value
