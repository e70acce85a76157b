"""The run check's part for runs forwarded downstream (:func:`settle_ended`): it reads each ``running_downstream``
run's execution through its API, at most :data:`MAX_EXECUTION_READS` per check, oldest first, and records the outcome
of those that ended (:func:`~scheduler_dedup.handler.protocol.downstream_outcome.settle`). How late an outcome can be
recorded at worst: docs/targets-and-auth.md#when-a-forwarded-run-counts-as-done.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from scheduler_dedup.handler.core.downstream import ExecutionControl, execution_name
from scheduler_dedup.handler.core.record import RUNNING_DOWNSTREAM
from scheduler_dedup.handler.monitoring.run_history import JobScope, RunHistory
from scheduler_dedup.handler.protocol.downstream_outcome import read_state, settle

#: Executions one run check reads at most (one ``get`` call each, ``DEDUP_TARGET_TIMEOUT_SECONDS`` at most): the
#: oldest first, the rest on the next check.
MAX_EXECUTION_READS = 10


@dataclass
class Settled:
    """What one check found of the runs forwarded downstream, by schedule time.

    Attributes:
        settled: runs whose execution had ended, now recorded with its outcome.
        running: runs whose execution still runs, could not be read, or was not read this time (over the bound).
    """

    settled: list[datetime] = field(default_factory=list)
    running: list[datetime] = field(default_factory=list)


def settle_ended(history: RunHistory, scope: JobScope, control: ExecutionControl | None, *, since: datetime,
                 until: datetime, retention_seconds: float, max_reads: int = MAX_EXECUTION_READS) -> Settled:
    """Record the outcome of the job's ``running_downstream`` runs (``since <= schedule_time < until``) whose
    execution has ended.

    Args:
        history: reads the job's runs; its store is written (fenced) for each run settled.
        scope: the job's runs.
        control: reads the target's executions; None (a python job, an HTTP target): nothing is read.
        retention_seconds: how long a settled record lives.
        max_reads: executions read at most.

    Each run settled is recorded ``settled_at`` a millisecond before ``until`` (the check's time), inside the
    window of the alerts this check computes next (:func:`~scheduler_dedup.handler.monitoring.run_alerts.run_alerts`).

    Raises:
        StoreUnavailableError, StoreRefusedError: reading or writing a record failed.
    """
    found = Settled()
    settled_at = until - timedelta(milliseconds=1)
    if control is None:
        return found  # a python job or an HTTP target starts no execution: no record to read
    pending = sorted((run for run in scope.runs(history, since=since, until=until) if run.status == RUNNING_DOWNSTREAM),
                     key=lambda run: run.schedule_time)
    for n, run in enumerate(pending):
        record = history.record(run.run_id) if n < max_reads else None
        if record is None or record.status != RUNNING_DOWNSTREAM:
            if record is None:
                found.running.append(run.schedule_time)
            continue
        name = execution_name(record.result)
        state = read_state(control, name, run.run_id) if name is not None else None
        if state is not None and state.ending is not None and settle(history.store, record, state,
                                                                     retention_seconds, settled_at):
            found.settled.append(run.schedule_time)
        else:
            found.running.append(run.schedule_time)
    return found
