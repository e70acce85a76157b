"""Lease renewal in the background while a job runs."""

from __future__ import annotations

import logging
import threading
from datetime import datetime, timedelta

from scheduler_dedup.handler.core.logs import LogField
from scheduler_dedup.handler.stores.base import SERVER_TIME, STORE_ERRORS, RunStore

log = logging.getLogger("scheduler_dedup")


class LeaseKeeper:
    """Renews one attempt's lease every ``lease_seconds / 3`` seconds until stopped.

    Each renewal is a write fenced by the record's version (its last commit time). When it is refused or gets no
    answer, that does not prove the lease is lost: the renewal may have committed and only its answer was
    lost (the client library's retry then fails its precondition against our own write). So the keeper
    reads the record and decides by attempt id: while the record is ``in_progress`` under this attempt id
    the lease is ours, and the keeper adopts the record's commit time and goes on renewing. The lease is
    lost only when another attempt id holds the run or the record is gone; then ``lost`` becomes True and
    renewing stops. A tick whose read fails too is retried at the next tick: two missed ticks still leave
    a third of the lease.

    Args:
        store: the run store.
        run_id: the run id.
        attempt_id: this attempt's id.
        update_time: commit time of the claim.
        lease_seconds: lease length in seconds.
    """

    def __init__(self, store: RunStore, run_id: str, attempt_id: str, update_time: datetime,
                 lease_seconds: float):
        self._store = store
        self._run_id = run_id
        self._attempt_id = attempt_id
        self._lease_seconds = lease_seconds
        self._lock = threading.Lock()
        self._update_time = update_time
        self._lost = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"lease-{run_id[:12]}", daemon=True)

    @property
    def update_time(self) -> datetime:
        """Commit time of this attempt's last write (claim or renewal) as last confirmed."""
        with self._lock:
            return self._update_time

    @property
    def lost(self) -> bool:
        """True once another attempt id holds the run or the record is gone."""
        with self._lock:
            return self._lost

    def start(self) -> "LeaseKeeper":
        """Start renewing in a daemon thread."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop renewing and wait for an in-flight renewal to finish."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _loop(self) -> None:
        interval = self._lease_seconds / 3
        while not self._stop.wait(interval):
            if not self.renew():
                return

    def renew(self) -> bool:
        """Renew once; returns False if the lease is lost (another attempt id holds the run, or it is gone)."""
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
            with self._lock:
                self._update_time = new_time
            return True
        try:
            record = self._store.get(self._run_id)
        except STORE_ERRORS as exc:
            log.warning("lease renewal unconfirmed (%s; the read failed too: %s); retrying at next tick",
                        error or "refused", exc, extra=extra)
            return True
        if record is not None and record.held_by(self._attempt_id):
            # Still ours: the renewal committed and its answer was lost, or it never got through.
            with self._lock:
                self._update_time = record.update_time
            log.info("lease renewal unconfirmed (%s); the record is still this attempt's, renewing on",
                     error or "precondition failed", extra=extra)
            return True
        with self._lock:
            self._lost = True
        if record is None:
            log.warning("lease lost: the run record is gone (another attempt took the run over and released it)",
                        extra=extra)
        else:
            log.warning("lease lost: attempt %s holds the run (%s)", record.attempt_id, record.status,
                        extra={**extra, LogField.HOLDER_ATTEMPT_ID: record.attempt_id})
        return False
