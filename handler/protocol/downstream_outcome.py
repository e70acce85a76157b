"""The end of a run forwarded to a downstream execution: its record, ``running_downstream`` since the delivery started
the execution, becomes ``completed``, ``failed`` or ``cancelled`` with the execution's own outcome (:func:`settle`),
written fenced on the record's version like any completion. Both readers of executions call it: the watchdog's run
check (:mod:`scheduler_dedup.handler.monitoring.downstream_check`) and an overlap policy looking at the previous run
(:func:`still_executing`, :func:`cancel_execution`).

**A write whose answer was lost.** The record is read back: the outcome in place under the same attempt id counts as
done; the record still ``running_downstream`` under that attempt id is written again on its new version; anything
else (a re-run reset it, another reader settled it) ends the attempt without writing. **A downstream API that does
not answer** leaves the record as it is: the next check reads the execution again.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from scheduler_dedup.handler.core.downstream import ExecutionControl, ExecutionState, execution_name
from scheduler_dedup.handler.core.logs import LogField
from scheduler_dedup.handler.core.record import (CANCELLED, COMPLETED, FAILED, IN_PROGRESS, RUNNING_DOWNSTREAM,
                                                 SETTLED_AT_FIELD, TTL_FIELD, RunRecord)
from scheduler_dedup.handler.stores.base import SERVER_TIME, STORE_ERRORS, RunStore

log = logging.getLogger("scheduler_dedup")

_ROUNDS = 3
#: Slack between this instance's estimate of the store's clock and the store's own, seconds: an execution's end time
#: later than the estimate less this is stored as the write's own time (a commit timestamp is never in the future).
_CLOCK_SLACK_SECONDS = 5.0
_STATUS = {"completed": COMPLETED, "failed": FAILED, "cancelled": CANCELLED}


def settle(store: RunStore, record: RunRecord, state: ExecutionState, retention_seconds: float,
           settled_at: datetime | None = None) -> bool:
    """Record how ``record``'s downstream execution ended, fenced on the record's version.

    Args:
        store: the run store.
        record: the run's record as read, ``running_downstream``.
        state: the execution's state; one that has not ended (``ending`` None) writes nothing.
        retention_seconds: how long the final record lives before the TTL policy may delete it.
        settled_at: the record's ``settled_at``, aware UTC, the time its alerts count it at (the run check passes a
            time inside its own window); default: the store's time.

    Returns:
        True once the outcome is in place (now, or by an earlier try whose answer was lost); False if the execution
        has not ended, or the record changed under another attempt or status (nothing written).

    Raises:
        StoreUnavailableError, StoreRefusedError: the store failed on every try; the record may be unchanged.
    """
    if state.ending is None or record.status != RUNNING_DOWNSTREAM:
        return False
    status, attempt_id, name = _STATUS[state.ending], record.attempt_id, execution_name(record.result)
    current: RunRecord | None = record
    last_error: Exception | None = None
    for _ in range(_ROUNDS):
        if current is None or current.attempt_id != attempt_id or execution_name(current.result) != name:
            return False
        if current.status == status:
            return True
        if current.status != RUNNING_DOWNSTREAM:
            return False
        try:
            fields = _outcome_fields(store, current, state, status, retention_seconds, settled_at)
            if store.update_if_unchanged(record.run_id, fields, current.update_time) is not None:
                log.info("downstream execution %s ended: run recorded %s", name, status, extra={
                    LogField.RUN_ID: record.run_id, LogField.ATTEMPT_ID: attempt_id, LogField.EXECUTION: name,
                    LogField.OUTCOME: status})
                return True
        except STORE_ERRORS as exc:
            last_error = exc
        try:
            current = store.get(record.run_id)
        except STORE_ERRORS as exc:
            last_error = exc
    if last_error is not None:
        raise last_error
    return False


def _outcome_fields(store: RunStore, record: RunRecord, state: ExecutionState, status: str,
                    retention_seconds: float, settled_at: datetime | None) -> dict[str, Any]:
    now = store.server_now()
    claimed = record.data.get("claimed_at")
    end: Any = SERVER_TIME
    if state.end_time is not None and state.end_time <= now - timedelta(seconds=_CLOCK_SLACK_SECONDS):
        # the execution's own end (the run's duration is the execution's), never before the run's claim (the
        # API's clock and the store's may differ)
        end = max(state.end_time, claimed) if isinstance(claimed, datetime) else state.end_time
    result = dict(record.result) if isinstance(record.result, dict) else {}
    result.update({"execution_state": state.detail.split(":", 1)[0],
                   "execution_seconds": state.duration_seconds})
    return {"status": status, "finished_at": end, SETTLED_AT_FIELD: settled_at or now, "result": result,
            "error": None if status == COMPLETED else f"downstream execution {execution_name(result)} {state.detail}",
            TTL_FIELD: now + timedelta(seconds=retention_seconds)}


def still_executing(store: RunStore, control: ExecutionControl | None, run_id: str,
                    retention_seconds: float) -> RunRecord | None:
    """The record of run ``run_id`` if that run still executes: ``in_progress`` under a live lease, or
    ``running_downstream`` with an execution its API says still runs (one that ended is settled first).

    An execution whose state cannot be read (the API did not answer) counts as still running: an overlap policy
    then holds the next run back rather than start it beside one that may still run. Without ``control`` (a handler
    whose target starts no execution) a ``running_downstream`` run does not hold the job.

    Raises:
        StoreUnavailableError, StoreRefusedError: reading or settling the record failed.
    """
    record = store.get(run_id)
    if record is None:
        return None
    if record.status == IN_PROGRESS:
        return record if record.lease_remaining_seconds > 0 else None
    if record.status != RUNNING_DOWNSTREAM:
        return None
    name = execution_name(record.result)
    if control is None or name is None or not owned(control, name, run_id):
        # Nothing here can read it (the job's target changed to one that starts no execution, or the record names
        # an execution of another target: never read nor cancelled): holding the job back until the record
        # expires would stop it for the whole retention period.
        return None
    state = read_state(control, name, record.run_id)
    if state is None or state.ending is None:
        return record
    settle(store, record, state, retention_seconds)
    return None


def owned(control: ExecutionControl, name: str, run_id: str) -> bool:
    """True if ``name`` is an execution of the handler's own target; else False, logged ERROR ``foreign_execution``
    (a record naming another's execution was written by someone else: it is never read nor cancelled)."""
    if control.owns(name):
        return True
    log.error("run %s names %s, not an execution of this handler's target: not read, not cancelled, and it does "
              "not hold the job", run_id, name[:200], extra={LogField.RUN_ID: run_id,
                                                            LogField.OUTCOME: "foreign_execution"})
    return False


def read_state(control: ExecutionControl, name: str, run_id: str) -> ExecutionState | None:
    """The execution's state, or None (logged) when it is not the target's own (:func:`owned`) or its API gave no
    useful answer."""
    if not owned(control, name, run_id):
        return None
    try:
        return control.state(name)
    except Exception as exc:  # noqa: BLE001 - TargetRetryableError, or whatever the API's answer broke
        log.warning("cannot read downstream execution %s: %s", name, exc, extra={
            LogField.RUN_ID: run_id, LogField.EXECUTION: name, LogField.OUTCOME: "execution_unreadable"})
        return None


def cancel_execution(store: RunStore, control: ExecutionControl, record: RunRecord, retention_seconds: float) -> bool:
    """Cancel ``record``'s downstream execution and record the run ``cancelled`` (or however it ended first).

    Returns:
        True once the execution has ended by the API's word (cancelled now, or it ended before) and the record says
        so or was changed by someone else; False when the cancel or the read after it got no useful answer, or the
        API refused the cancel and the execution still runs: the caller must not start another beside it.

    Raises:
        StoreUnavailableError, StoreRefusedError: recording the outcome failed.
    """
    name = execution_name(record.result)
    if name is None:
        return False
    try:
        accepted = control.cancel(name)
    except Exception as exc:  # noqa: BLE001 - TargetRetryableError: it may or may not be cancelled
        log.warning("cannot cancel downstream execution %s: %s", name, exc, extra={
            LogField.RUN_ID: record.run_id, LogField.EXECUTION: name, LogField.OUTCOME: "cancel_failed"})
        return False
    state = read_state(control, name, record.run_id)
    if state is None:
        return False
    if state.ending is None and not accepted:  # refused, and it runs on: nothing ended it
        log.warning("downstream execution %s refused its cancel and still runs", name, extra={
            LogField.RUN_ID: record.run_id, LogField.EXECUTION: name, LogField.OUTCOME: "cancel_refused"})
        return False
    if state.ending is None:  # accepted, still stopping (a Cloud Run execution takes seconds): it ends cancelled
        state = ExecutionState("cancelled", "CANCELLED: cancelled by overlap policy replace", state.start_time)
    settle(store, record, state, retention_seconds)
    return True
