"""Lease renewal in the background while a job runs."""

from __future__ import annotations

import logging
import threading
from datetime import datetime, timedelta

from google.api_core import exceptions as gexc
from google.cloud import firestore

from scheduler_dedup.handler.store import FirestoreRunStore

log = logging.getLogger("scheduler_dedup")


class LeaseKeeper:
    """Renews one attempt's lease every ``lease_seconds / 3`` seconds until stopped.

    Each renewal is a write fenced by the document's last commit time, so it also tells us
    whether the lease was lost: if another attempt took the run over, the renewal is refused,
    ``lost`` becomes True and renewing stops. A renewal that fails for a transient reason
    (Firestore unavailable) is retried at the next tick; two missed ticks still leave a third of
    the lease.

    Args:
        store: the run store.
        run_id: the run id.
        attempt_id: this attempt's id (for logs).
        update_time: commit time of the claim.
        lease_seconds: lease length in seconds.
    """

    def __init__(self, store: FirestoreRunStore, run_id: str, attempt_id: str, update_time: datetime,
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
        """Commit time of this attempt's last successful write (claim or renewal)."""
        with self._lock:
            return self._update_time

    @property
    def lost(self) -> bool:
        """True once a renewal was refused because another attempt holds the run."""
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
            fields = {
                "heartbeat_at": firestore.SERVER_TIMESTAMP,
                "lease_expires": self._store.server_now() + timedelta(seconds=self._lease_seconds),
            }
            try:
                new_time = self._store.update_if_unchanged(self._run_id, fields, self.update_time)
            except gexc.GoogleAPICallError as exc:
                log.warning("lease renewal failed, retrying at next tick: %s", exc,
                            extra={"run_id": self._run_id, "attempt_id": self._attempt_id})
                continue
            with self._lock:
                if new_time is None:
                    self._lost = True
                else:
                    self._update_time = new_time
            if new_time is None:
                log.warning("lease lost: another attempt took the run over",
                            extra={"run_id": self._run_id, "attempt_id": self._attempt_id})
                return
