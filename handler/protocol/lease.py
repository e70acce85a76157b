"""Lease renewal in the background while a job runs, and what the job may ask of its lease."""

from __future__ import annotations

import contextvars
import logging
import math
import os
import threading
from collections.abc import Callable
from datetime import datetime, timedelta

from scheduler_dedup.handler.core.logs import LogField
from scheduler_dedup.handler.core.record import IN_PROGRESS
from scheduler_dedup.handler.stores.base import SERVER_TIME, STORE_ERRORS, RunStore


def held_lease_fields(now: datetime, attempt_id: str, lease_seconds: float) -> dict[str, object]:
    """The fields of a record that ``attempt_id`` holds under a lease of ``lease_seconds`` (seconds) from ``now``
    (the store's clock, UTC): status ``in_progress``, the attempt id, the lease and its expiry, and claim and
    heartbeat times the store sets on commit. A run claim and the overlap lease both write these."""
    return {
        "status": IN_PROGRESS,
        "attempt_id": attempt_id,
        "lease_seconds": lease_seconds,
        "lease_expires": now + timedelta(seconds=lease_seconds),
        "claimed_at": SERVER_TIME,
        "heartbeat_at": SERVER_TIME,
    }

log = logging.getLogger("scheduler_dedup")

#: Shortest wait before a renewal that did not extend the lease is tried again, seconds.
MIN_RETRY_SECONDS = 0.05
#: The fraction of the lease left, by the store's clock as this instance observes it, at which a holder whose
#: renewals have not extended the lease declares it lost and stops its job (:class:`LeaseKeeper`'s ``on_lost``):
#: strictly before the lease expires, so no other attempt can take the run over while the job still runs.
LOSS_MARGIN_FRACTION = 0.25
#: With a loss action, :meth:`LeaseKeeper.holds` turns False once this fraction of the lease is all that is left
#: (renewals at a third have failed for a sixth more), so a job that asks stops by itself, a quarter of the lease
#: before the loss action would stop it. Healthy renewals keep at least two thirds of it.
HOLD_MARGIN_FRACTION = 0.5
#: Exit code of a worker process ended because its lease was lost (:func:`end_worker`).
LEASE_LOST_EXIT_CODE = 75
#: What a holder does once it knows its lease is lost; called once, with the reason, from the keeper's thread.
LossAction = Callable[[str], None]


def lost_lease_advisory(target_type: str) -> str | None:
    """Why a lost lease cannot stop this target's job, or None when it can (a Python job: :func:`end_worker`).

    The handler only starts or calls a downstream execution (Workflows, a Cloud Run job, a Cloud Build trigger, an
    HTTP target); ending its worker stops nothing there, so after a lease lost to failing renewals a retry may start
    a second execution beside the first. Warned at preview by the component (docs/failures.md, "Renewals fail").
    """
    if target_type == "python":
        return None
    return (f"target {target_type}: a lost lease cannot stop a downstream execution (the handler stops only a "
            "Python job, by ending its worker); if renewals fail past the lease, a retry may start a second "
            "execution beside the first. Make the downstream job idempotent on the run id it receives")


def end_worker(reason: str) -> None:
    """End this process at once (``os._exit``): the only sure way to stop a Python job that never asks its lease,
    which runs in a thread of this worker. The server starts a new worker; every delivery this worker was serving
    gets no answer, and Scheduler retries it once its lease has expired. Logged as CRITICAL first."""
    log.critical("ending this worker process: %s; the job must stop before another attempt may take the run over",
                 reason)
    for handler in logging.getLogger().handlers + log.handlers:
        try:
            handler.flush()
        except Exception:  # noqa: BLE001 - nothing may keep this process alive
            pass
    os._exit(LEASE_LOST_EXIT_CODE)
#: The lease of the work running in this context (set by the protocol around the job, read by ``ScheduledRun``).
current_lease: contextvars.ContextVar["LeaseKeeper | None"] = contextvars.ContextVar("current_lease", default=None)


class LeaseKeeper:
    """Renews one attempt's lease every ``lease_seconds / 3`` seconds until stopped.

    The lease lasts until the record's last commit time plus its ``lease_seconds``, by the store's clock
    (:attr:`RunRecord.lease_remaining_seconds`). Each renewal is a write fenced by the record's version (that
    commit time). **A renewal counts only once the lease's expiry has moved forward**: its answer gives the new
    commit time, or, when it is refused or gets no answer, the record is read back. The renewal may have
    committed with its answer lost (the client's retry then fails its precondition against our own write):
    the record is still ``in_progress`` under this attempt id with a later expiry, which the keeper adopts. A
    record still this attempt's but with the same expiry means the renewal did not commit (the store refused it:
    a full Redis, a revoked grant): that is no renewal, whatever the attempt id says. A renewal that did not
    extend the lease is tried again promptly (every quarter of what is left of the lease, at most every
    ``lease_seconds / 12``) rather than at the next tick, and on after the lease has lapsed: a renewal fenced on
    this attempt's last version commits only if nobody took the run over meanwhile. The lease is lost only when
    another attempt id holds the run or the record is gone; then :attr:`lost` becomes True and renewing stops.

    With ``on_lost``, a second thread watches the lease: once :data:`LOSS_MARGIN_FRACTION` of it is all that is
    left (renewals have not extended it) or it is lost, the holder knows it may lose the run, and ``on_lost`` stops
    the job, strictly before the lease expires by the store's clock (docs/failures.md, "Renewals fail").

    :meth:`remaining_seconds` and :meth:`holds` tell the job whether its lease still holds (by the store's clock
    as this instance last observed it), so a long job can stop between steps once it does not.

    Args:
        store: the run store.
        run_id: the run id.
        attempt_id: this attempt's id.
        update_time: commit time of the claim (aware UTC).
        lease_seconds: lease length in seconds.
        on_lost: what stops the job once the lease is (about to be) lost, e.g. :func:`end_worker`; None: nothing
            (the job must ask :meth:`holds`).
    """

    def __init__(self, store: RunStore, run_id: str, attempt_id: str, update_time: datetime,
                 lease_seconds: float, on_lost: LossAction | None = None):
        self._store = store
        self._run_id = run_id
        self._attempt_id = attempt_id
        self._lease_seconds = lease_seconds
        self._lock = threading.Lock()
        self._update_time = update_time
        self._expires = update_time + timedelta(seconds=lease_seconds)
        self._lost = False
        self._failing = False  # the last renewal did not extend the lease
        self._lapse_told = False  # the lapse under this live attempt was logged
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"lease-{run_id[:12]}", daemon=True)
        self._on_lost = on_lost
        self._stopped = False  # stop() was called: on_lost never fires after it
        self._watch = threading.Thread(target=self._watch_loss, name=f"lease-watch-{run_id[:12]}", daemon=True)

    @property
    def update_time(self) -> datetime:
        """Commit time of this attempt's last write (claim or renewal) as last confirmed."""
        with self._lock:
            return self._update_time

    @property
    def expires(self) -> datetime:
        """When the lease expires by the store's clock (aware UTC), as last confirmed: last commit + lease."""
        with self._lock:
            return self._expires

    @property
    def lost(self) -> bool:
        """True once another attempt id holds the run or the record is gone."""
        with self._lock:
            return self._lost

    def remaining_seconds(self) -> float:
        """Seconds left of the lease by the store's clock as this instance last observed it
        (:meth:`RunStore.server_now`); 0 or less once it lapsed, ``-inf`` once it is lost."""
        with self._lock:
            if self._lost:
                return -math.inf
            expires = self._expires
        return (expires - self._store.server_now()).total_seconds()

    def holds(self) -> bool:
        """True while the lease is this attempt's and has time left: :meth:`remaining_seconds` > 0, or, with
        ``on_lost``, more than :data:`HOLD_MARGIN_FRACTION` of the lease (so the job can stop before it is
        stopped)."""
        margin = self._lease_seconds * HOLD_MARGIN_FRACTION if self._on_lost is not None else 0.0
        return self.remaining_seconds() > margin

    def start(self) -> "LeaseKeeper":
        """Start renewing in a daemon thread (and watching for loss, with ``on_lost``, in another)."""
        self._thread.start()
        if self._on_lost is not None:
            self._watch.start()
        return self

    def stop(self) -> None:
        """Stop renewing and wait for an in-flight renewal to finish; ``on_lost`` does not fire from now on."""
        with self._lock:
            self._stopped = True
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _loop(self) -> None:
        interval = self._lease_seconds / 3
        wait = interval
        while not self._stop.wait(wait):
            extended = self.renew()
            if self.lost:
                return
            wait = interval if extended else self.retry_seconds()

    def _watch_loss(self) -> None:
        """Fire ``on_lost`` once no more than :data:`LOSS_MARGIN_FRACTION` of the lease is left, unless stopped."""
        assert self._on_lost is not None
        margin = self._lease_seconds * LOSS_MARGIN_FRACTION
        while True:
            left = self.remaining_seconds() - margin
            if left <= 0:
                break
            if self._stop.wait(min(left, self._lease_seconds / 12)):
                return
        with self._lock:
            if self._stopped:
                return
            lost = self._lost
        self._on_lost(f"the lease of run {self._run_id} (attempt {self._attempt_id}) is "
                      + ("held by another attempt" if lost else
                         f"{margin:.1f} s from expiry and renewals did not extend it"))

    def retry_seconds(self) -> float:
        """How long to wait before trying again a renewal that did not extend the lease, seconds: a quarter of
        what is left of the lease, at most ``lease_seconds / 12``, at least :data:`MIN_RETRY_SECONDS`."""
        remaining = self.remaining_seconds()
        most = self._lease_seconds / 12
        return max(MIN_RETRY_SECONDS, min(most, remaining / 4) if remaining > 0 else most)

    def renew(self) -> bool:
        """Renew once. Returns True if the lease's expiry moved forward (now, or by an earlier try whose answer
        was lost), False if it did not: refused, unanswered and not found in place, or lost (see :attr:`lost`)."""
        extra: dict[str, object] = {LogField.RUN_ID: self._run_id, LogField.ATTEMPT_ID: self._attempt_id}
        fields = {
            "heartbeat_at": SERVER_TIME,
            "lease_expires": self._store.server_now() + timedelta(seconds=self._lease_seconds),
        }
        error: Exception | None = None
        try:
            new_time = self._store.update_if_unchanged(self._run_id, fields, self.update_time)
        except STORE_ERRORS as exc:
            new_time, error = None, exc
        if new_time is not None:
            self._extended(new_time, self._lease_seconds, extra, None)
            return True
        try:
            record = self._store.get(self._run_id)
        except STORE_ERRORS as exc:
            self._not_extended(f"{error or 'refused'}; the read failed too: {exc}", extra)
            return False
        if record is not None and record.held_by(self._attempt_id):
            if record.update_time + timedelta(seconds=record.lease_seconds) > self.expires:
                # Our renewal committed and its answer was lost: the record's expiry moved forward.
                self._extended(record.update_time, record.lease_seconds, extra, error or "precondition failed")
                return True
            # Still ours, but its expiry did not move: the renewal never committed.
            self._not_extended(str(error or "precondition failed"), extra)
            return False
        with self._lock:
            self._lost = True
        if record is None:
            log.warning("lease lost: the run record is gone (another attempt took the run over and released it)",
                        extra=extra)
        else:
            log.warning("lease lost: attempt %s holds the run (%s)", record.attempt_id, record.status,
                        extra={**extra, LogField.HOLDER_ATTEMPT_ID: record.attempt_id})
        return False

    def _extended(self, update_time: datetime, lease_seconds: float, extra: dict[str, object],
                  unconfirmed: object) -> None:
        with self._lock:
            self._update_time = update_time
            self._expires = update_time + timedelta(seconds=lease_seconds)
            recovered, self._failing, self._lapse_told = self._failing, False, False
        if unconfirmed is not None:
            log.info("lease renewal unconfirmed (%s); the record shows it in place, renewing on", unconfirmed,
                     extra=extra)
        if recovered:
            log.info("lease renewed again after renewals that did not extend it", extra=extra)

    def _not_extended(self, why: str, extra: dict[str, object]) -> None:
        remaining = self.remaining_seconds()
        retry = self.retry_seconds()
        with self._lock:
            first, self._failing = not self._failing, True
            lapse_news = remaining <= 0 and not self._lapse_told
            self._lapse_told = self._lapse_told or lapse_news
        if lapse_news:
            log.warning("lease lapsed under this live attempt: renewals did not extend it (%s); a retry may take "
                        "the run over, so the job should stop between steps (ScheduledRun.lease_holds()); trying "
                        "again in %.2f s", why, retry, extra=extra)
        elif first:
            log.warning("lease renewal did not extend the lease (%s); %.1f s of it left, trying again in %.2f s",
                        why, remaining, retry, extra=extra)
