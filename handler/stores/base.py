"""The run-store contract: the few operations the exactly-once protocol needs from a store, and their rules.

The protocol (:mod:`scheduler_dedup.handler.protocol.idempotency`, :mod:`scheduler_dedup.handler.protocol.lease`) and every
reader of run history (:mod:`scheduler_dedup.handler.monitoring.run_history`, the ``runs`` command, the watchdog's run
check) are written against :class:`RunStore` only. Each store lives in a module of its own in this package
and must pass the one contract suite (``tests/stores/``) on a real server, with faults injected on the wire.

**Records.** A store keeps one record per run id in a *collection* (a Firestore collection, a Spanner
table, a Redis key prefix). A record is a flat mapping of field names to values: strings, numbers,
booleans, None, aware UTC datetimes, and the job's result in JSON values (field ``result``).

**Clock and version.** Every write is stamped with the store's own commit time, by the store's clock, and
two writes of one record never get the same time: each is later than the one before. The last write's time
is the record's ``update_time`` and doubles as its *version*: a conditional write names the version it
expects and commits only if the record still has it (compare-and-set). A read returns the store's time of
the read (``read_time``), so a lease is judged by one clock, the store's: ``update_time + lease <= read_time``
means expired, whatever any instance's clock says. ``create_time`` is the commit time of the record's
creation: a record deleted and created again gets a new, later one.

**Server-side values.** :data:`SERVER_TIME` as a field value stores the store's time of the write, by the
store's clock (Firestore's request time, which may differ from its commit time by a few milliseconds; within a
second of ``update_time`` on every store); :class:`Increment` adds to a number field (absent counts as 0). Both
are resolved by the store in the same atomic write.

**Errors.** A method returns the *expected* answers ("already exists", "changed since", "absent") as
values and raises one of the contract's errors for anything else:

* :class:`~scheduler_dedup.handler.core.errors.StoreUnavailableError`: the store failed or did not answer within
  the store timeout, after the client's own retries of transient errors. **A write may have committed**:
  the caller reads the record and decides by its attempt id. A retried write whose first try committed
  returns "changed since" / "already exists", never a second commit.
* :class:`~scheduler_dedup.handler.core.errors.StoreRefusedError`: the store refused the call; nothing was
  written (permission denied, no such database, a missing index).
* :class:`~scheduler_dedup.handler.core.errors.InvalidWriteError`: the write's values do not fit the store;
  nothing was written. :meth:`RunStore.result_refusal` exists so that this never happens to a job's result.

No store-specific exception type crosses this boundary.
"""

from __future__ import annotations

import abc
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar

from scheduler_dedup.handler.core.errors import StoreRefusedError, StoreUnavailableError
from scheduler_dedup.handler.core.record import RunRecord

#: The contract's errors: what any store call may raise. After one of them a write may or may not have
#: committed (:class:`StoreUnavailableError`) or certainly did not (:class:`StoreRefusedError` and its
#: subclass :class:`~scheduler_dedup.handler.core.errors.InvalidWriteError`).
STORE_ERRORS: tuple[type[Exception], ...] = (StoreUnavailableError, StoreRefusedError)


class _ServerTime:
    """The type of :data:`SERVER_TIME`."""

    _instance: ClassVar["_ServerTime | None"] = None

    def __new__(cls) -> "_ServerTime":
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "SERVER_TIME"


#: A field value meaning "this write's commit time, by the store's clock".
SERVER_TIME = _ServerTime()


@dataclass(frozen=True)
class Increment:
    """A field value meaning "the stored number plus ``amount``" (an absent field counts as 0).

    Attributes:
        amount: what to add, an integer.
    """

    amount: int = 1


class RunStore(abc.ABC):
    """Run records of one collection in one store; see the module docstring for the rules every store keeps.

    Attributes:
        kind: the store's ``DEDUP_STORE`` value, e.g. ``firestore``.
        display_name: the store's name in messages, e.g. ``Firestore``.
        collection: the collection (table, key prefix) holding the run records.
        timeout_seconds: how long one operation may take, retries of transient errors included, in seconds.
            A claim stores when its call stops waiting (now + this), so it must be the real bound.
    """

    kind: ClassVar[str]
    display_name: ClassVar[str]
    collection: str
    timeout_seconds: float

    # -- the protocol's operations ------------------------------------------------------------

    @abc.abstractmethod
    def create(self, run_id: str, fields: Mapping[str, Any]) -> datetime | None:
        """Put-if-absent: create the record ``run_id`` with ``fields``.

        Returns:
            The write's commit time (the new record's version, aware UTC), or None if a record exists.

        Raises:
            StoreUnavailableError, StoreRefusedError: see the module docstring.
        """

    @abc.abstractmethod
    def get(self, run_id: str, *, timeout_seconds: float | None = None) -> RunRecord | None:
        """Read one record, with the store's time of the read (:attr:`RunRecord.read_time`).

        Args:
            run_id: the record id.
            timeout_seconds: bound for this call; default :attr:`timeout_seconds`.

        Returns:
            The record, or None if there is none.
        """

    @abc.abstractmethod
    def update_if_unchanged(self, run_id: str, fields: Mapping[str, Any], update_time: datetime) -> datetime | None:
        """Set ``fields`` (others keep their values) only if the record's version is still ``update_time``.

        Returns:
            The new commit time (version), or None if the record changed or is gone since ``update_time``:
            changed by another attempt, or by this very write on an earlier try whose answer was lost.
        """

    @abc.abstractmethod
    def delete_if_unchanged(self, run_id: str, update_time: datetime) -> bool:
        """Delete the record only if its version is still ``update_time``.

        Returns:
            True if this call deleted it; False if it changed or is gone since (possibly by this very delete
            on an earlier try whose answer was lost).
        """

    @abc.abstractmethod
    def server_now(self) -> datetime:
        """The store's current time as this instance last observed it (aware UTC), without a call.

        Our clock plus the offset seen in the store's last answer: used to stamp ``expire_at``, claim
        deadlines and to spot forced runs, so none depends on this instance's clock being right. Before the
        first call it is this instance's own clock.
        """

    @abc.abstractmethod
    def result_refusal(self, result: Any, run_id: str, record_fields: Mapping[str, Any]) -> str | None:
        """Why a job's result (already in its JSON form) cannot be stored in its record, or None if it can.

        Args:
            result: the stored form of the result (JSON values: dict, list, str, int, float, bool, None).
            run_id: the record id.
            record_fields: every other field the completed record will hold.

        Returns:
            A sentence naming the store's limit that the result breaks (with the limit's source), or None.
            It must be conservative: what it accepts, the store stores.
        """

    # -- run history ---------------------------------------------------------------------------

    @abc.abstractmethod
    def job_run_pages(self, job_name: str, *, since: datetime | None, until: datetime | None, page_size: int,
                      timeout_seconds: float | None = None) -> Iterator[list[RunRecord]]:
        """One job's records (field ``job_name`` equal to ``job_name``) with ``since <= schedule_time < until``,
        newest first (``schedule_time`` descending, then run id descending), a page at a time.

        Memory holds one page. Iteration ends after a page shorter than ``page_size``. Records without a
        ``schedule_time`` are never returned.

        Args:
            job_name: the Scheduler job id.
            since: inclusive lower bound (aware), or None.
            until: exclusive upper bound (aware), or None.
            page_size: records per page, at least 1.
            timeout_seconds: bound for each page's call; default :attr:`timeout_seconds`.
        """

    @abc.abstractmethod
    def runs_with_id_prefix(self, prefix: str, limit: int, *,
                            timeout_seconds: float | None = None) -> list[RunRecord]:
        """Records whose run id starts with ``prefix``, in run id order, at most ``limit``, reading at most
        ``limit`` records however large the collection.

        Args:
            prefix: lower-case hex, 1 to 64 characters (the caller checks the form).
            limit: most records returned.
            timeout_seconds: bound for the call; default :attr:`timeout_seconds`.
        """

    def close(self) -> None:
        """Release the client's connections. The store must not be used afterwards."""
