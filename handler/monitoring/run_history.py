"""Reading one job's run records, newest first, a page at a time (flat memory), through the store contract's one
history query (:meth:`~scheduler_dedup.handler.stores.base.RunStore.job_run_pages`); a state filter is applied
here, so no second index is needed. :class:`JobScope` narrows a job id to one project and region.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta

from scheduler_dedup.handler.config.settings import SCHEDULER_JOB_RE
from scheduler_dedup.handler.core.record import RunRecord
from scheduler_dedup.handler.monitoring.run_view import STATES, HistoryRun
from scheduler_dedup.handler.stores.base import RunStore

DEFAULT_PAGE_SIZE = 300


class RunHistory:
    """Reads run records of one job from a run store, newest first, a page at a time.

    Args:
        store: the run store (any store of :mod:`scheduler_dedup.handler.stores`; on Firestore,
            ``roles/datastore.viewer`` suffices to read).
        page_size: records per page; memory holds one page at a time.
        timeout_seconds: how long one page's call may take, retries of transient errors included.
        first_call_timeout_seconds: the same bound for the reader's first call, until the store has
            answered once: an unreachable endpoint (a wrong emulator variable, a refused connection) fails
            within it instead of retrying for ``timeout_seconds``.

    Methods raise the store contract's errors (:class:`~scheduler_dedup.handler.core.errors.StoreUnavailableError`,
    :class:`~scheduler_dedup.handler.core.errors.StoreRefusedError`, whose ``hint`` says what to check: on real
    Firestore a missing composite index is refused with a link that creates it; the component creates it).
    """

    def __init__(self, store: RunStore, page_size: int = DEFAULT_PAGE_SIZE, timeout_seconds: float = 60.0,
                 first_call_timeout_seconds: float = 10.0):
        if page_size < 1:
            raise ValueError(f"page_size={page_size} must be at least 1")
        self.store = store
        self.page_size = page_size
        self._answered = False
        self._timeouts = (min(first_call_timeout_seconds, timeout_seconds), timeout_seconds)

    @property
    def collection(self) -> str:
        """The run records' collection."""
        return self.store.collection

    @property
    def _timeout(self) -> float:
        """The bound for the next call: short until the store has answered once."""
        return self._timeouts[1] if self._answered else self._timeouts[0]

    def runs(self, job_name: str, *, since: datetime | None = None, until: datetime | None = None,
             states: Iterable[str] | None = None,
             on_page: Callable[[int], None] | None = None) -> Iterator[HistoryRun]:
        """One job's runs with ``since <= schedule_time < until``, newest first.

        Args:
            job_name: the Scheduler job id (``X-CloudScheduler-JobName``).
            since: inclusive lower bound (aware), or None.
            until: exclusive upper bound (aware), or None.
            states: keep only runs in these :data:`STATES` (filtered client-side).
            on_page: called after each page with the number of records scanned so far.

        Raises:
            ValueError: an unknown state.
        """
        wanted = None if states is None else set(states)
        if wanted is not None and wanted - set(STATES):
            raise ValueError(f"unknown state(s) {sorted(wanted - set(STATES))}: use {', '.join(STATES)}")
        scanned = 0
        pages = self.store.job_run_pages(job_name, since=since, until=until, page_size=self.page_size,
                                         timeout_seconds=self._timeout)
        for page in pages:
            self._answered = True
            scanned += len(page)
            for record in page:
                run = HistoryRun.from_record(record)
                if wanted is None or run.state in wanted:
                    yield run
            if on_page is not None:
                on_page(scanned)

    def latest(self, job_name: str) -> HistoryRun | None:
        """The job's newest run record, or None."""
        pages = self.store.job_run_pages(job_name, since=None, until=None, page_size=1, timeout_seconds=self._timeout)
        first = next(iter(pages), [])
        self._answered = True
        return HistoryRun.from_record(first[0]) if first else None

    def record(self, run_id: str) -> RunRecord | None:
        """The raw record with this run id (every stored field, the result included), or None."""
        record = self.store.get(run_id, timeout_seconds=self._timeout)
        self._answered = True
        return record

    def get(self, run_id: str) -> HistoryRun | None:
        """The run with this run id, or None (also None for a record that is not a scheduled run's)."""
        record = self.record(run_id)
        if record is None:
            return None
        try:
            return HistoryRun.from_record(record)
        except ValueError:
            return None

    def with_id_prefix(self, prefix: str, limit: int = 2) -> list[HistoryRun]:
        """Runs whose run id starts with ``prefix`` (lower-case hex, as the report prints the first 12
        characters), at most ``limit``, in run id order, reading at most ``limit`` records however large the
        collection. Ask for 2 to tell a unique prefix from an ambiguous one.

        Raises:
            ValueError: ``prefix`` is not 1 to 64 lower-case hex characters.
        """
        if not re.fullmatch(r"[0-9a-f]{1,64}", prefix):
            raise ValueError(f"{prefix!r} is not a run id or its prefix: run ids are lower-case hex")
        records = self.store.runs_with_id_prefix(prefix, limit, timeout_seconds=self._timeout)
        self._answered = True
        found = []
        for record in records:
            try:
                found.append(HistoryRun.from_record(record))
            except ValueError:
                continue  # not a scheduled run's record
        return found

    def has_runs_before(self, job_name: str, until: datetime) -> bool:
        """True if the job has a run record with a schedule time before ``until`` (one query of one record)."""
        pages = self.store.job_run_pages(job_name, since=None, until=until, page_size=1, timeout_seconds=self._timeout)
        first = next(iter(pages), [])
        self._answered = True
        return bool(first)

    def at(self, job_name: str, schedule_time: datetime) -> list[HistoryRun]:
        """The job's runs whose schedule time is ``schedule_time`` (a scheduled run, a forced run, or
        runs keyed on other projects or regions), newest first."""
        return list(self.runs(job_name, since=schedule_time, until=schedule_time + timedelta(microseconds=1)))


@dataclass(frozen=True)
class JobScope:
    """Which run records are one job's: records are keyed and queried by the job's short id, and jobs with one id in
    two projects or Scheduler regions may share a store, so a job known by its full name
    (``projects/P/locations/L/jobs/J``) owns only the records of its project and region.

    Attributes:
        job_id: the short id (``X-CloudScheduler-JobName``'s last part), what the history queries by.
        project, location: the job's project and region, or None where not known (every record of ``job_id``).
    """

    job_id: str
    project: str | None = None
    location: str | None = None

    @classmethod
    def parse(cls, job: str) -> "JobScope":
        """A short id (every record of it) or a full name ``projects/P/locations/L/jobs/J`` (only P's, in L)."""
        match = SCHEDULER_JOB_RE.match(job)
        return cls(match["job"], match["project"], match["location"]) if match else cls(job)

    @property
    def narrowed(self) -> bool:
        return self.project is not None or self.location is not None

    def owns(self, run: HistoryRun) -> bool:
        return (self.project is None or run.project == self.project) and \
            (self.location is None or run.location == self.location)

    def runs(self, history: RunHistory, *, since: datetime | None = None, until: datetime | None = None,
             on_page: Callable[[int], None] | None = None) -> Iterator[HistoryRun]:
        """This job's runs, newest first (:meth:`RunHistory.runs` filtered by :meth:`owns`)."""
        return (run for run in history.runs(self.job_id, since=since, until=until, on_page=on_page) if self.owns(run))

    def latest(self, history: RunHistory) -> HistoryRun | None:
        """This job's newest run, or None."""
        return history.latest(self.job_id) if not self.narrowed else next(self.runs(history), None)

    def has_runs_before(self, history: RunHistory, until: datetime) -> bool:
        """True if this job has a run with a schedule time before ``until``."""
        if not self.narrowed:
            return history.has_runs_before(self.job_id, until)
        return next(self.runs(history, until=until), None) is not None
