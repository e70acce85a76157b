"""A retryable failure releases the run and keeps its reason, on each store's real server: the record says
``released`` with the attempt's error and output tail, the next delivery claims it exactly once, and run history
reports a run whose every attempt failed as failed, never missed.

The release's fencing is tested where it can go wrong: its answer lost (and the run claimed again before the
attempt looked), a release that never commits, and a stale attempt whose run was taken over. The truth is read from
the server directly.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from scheduler_dedup.handler.core.errors import StoreError, StoreUnavailableError
from scheduler_dedup.handler.core.job_traceback import split_output
from scheduler_dedup.handler.core.record import RunRecord
from scheduler_dedup.handler.monitoring.comparison import compare
from scheduler_dedup.handler.monitoring.findings import FAILED_RUN, MISSED, RETRYING
from scheduler_dedup.handler.monitoring.run_alerts import run_alerts
from scheduler_dedup.handler.monitoring.run_history import RunHistory
from scheduler_dedup.handler.protocol.idempotency import Idempotency, Outcome
from scheduler_dedup.handler.stores.base import SERVER_TIME, RunStore
from scheduler_dedup.local.faults.grpc_proxy import Fault
from scheduler_dedup.local.servers.store_servers import StoreServer

from .conftest import COLLECTION

T0 = datetime(2026, 11, 30, 2, 30, tzinfo=timezone.utc)
ERROR = "RuntimeError: disk full on /data"


def _boom(runs: list[str]) -> Any:
    def job(attempt_id: str) -> Any:
        runs.append(attempt_id)
        raise RuntimeError("disk full on /data")
    return job


def _fields(when: datetime = T0) -> dict[str, Any]:
    return {"job_name": "nightly", "schedule_time": when, "schedule": "30 2 * * *", "time_zone": "Etc/UTC"}


@pytest.fixture()
def proxy(server: StoreServer) -> Iterator[Any]:
    p = server.fault_proxy()
    yield p
    p.stop()


def test_a_released_run_keeps_its_error_and_output_and_the_next_delivery_runs_it_once(store: RunStore) -> None:
    runs: list[str] = []
    run_id = uuid.uuid4().hex
    first = Idempotency(store, lease_seconds=30).execute(run_id, _boom(runs), _fields(),
                                                         output=lambda: "checking /data\nno space left")
    assert first.outcome is Outcome.RELEASED and first.error == ERROR, first
    assert split_output(first.output)[0] == "checking /data\nno space left", first
    assert (split_output(first.output)[1] or "").endswith(ERROR), first  # the traceback ends the output
    record = store.get(run_id)
    assert record is not None and record.status == "released" and record.attempt_id == runs[0], record
    assert record.error == ERROR and record.output == first.output and record.releases == 1
    assert record.data["finished_at"] is not None and record.data["attempts"] == 1

    # 20 retries at once, each as its own process would (no shared cache): the run is claimed exactly once.
    done: list[str] = []
    barrier = threading.Barrier(20)
    outcomes: list[Outcome] = []

    def retry() -> None:
        barrier.wait()
        outcomes.append(Idempotency(store, lease_seconds=30).execute(
            run_id, lambda a: done.append(a) or time.sleep(0.5) or {"rows": 42}, _fields()).outcome)

    threads = [threading.Thread(target=retry) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len(done) == 1 and outcomes.count(Outcome.PROCESSED) == 1, outcomes
    assert set(outcomes) <= {Outcome.PROCESSED, Outcome.IN_PROGRESS, Outcome.DUPLICATE}, outcomes
    record = store.get(run_id)
    assert record is not None and record.status == "completed" and record.attempt_id == done[0], record
    assert record.error is None and record.output is None and record.result == {"rows": 42}
    assert record.data["attempts"] == 2 and record.releases == 1
    run = RunHistory(store).get(run_id)
    assert run is not None and not run.took_over and run.state == "completed", run  # a retry, not a takeover


class _ClaimedAgainBeforeTheAnswer(RunStore):
    """The real store, except that the first ``released`` write commits and then, before its answer comes back, a
    second delivery claims the run and ``then`` (completes it, or fails again); then the answer is lost."""

    def __init__(self, inner: RunStore, then: Any):
        self.inner, self.then, self.done = inner, then, False
        self.kind, self.display_name = inner.kind, inner.display_name  # type: ignore[misc]
        self.collection, self.timeout_seconds = inner.collection, inner.timeout_seconds

    def update_if_unchanged(self, run_id: str, fields: Mapping[str, Any], update_time: datetime) -> datetime | None:
        written = self.inner.update_if_unchanged(run_id, fields, update_time)
        if fields.get("status") == "released" and not self.done:
            self.done = True
            Idempotency(self.inner, lease_seconds=30).execute(run_id, self.then, _fields())
            raise StoreUnavailableError("the release's answer was lost", store=self.display_name)
        return written

    def create(self, run_id: str, fields: Mapping[str, Any]) -> datetime | None:
        return self.inner.create(run_id, fields)

    def get(self, run_id: str, *, timeout_seconds: float | None = None) -> RunRecord | None:
        return self.inner.get(run_id, timeout_seconds=timeout_seconds)

    def delete_if_unchanged(self, run_id: str, update_time: datetime) -> bool:
        return self.inner.delete_if_unchanged(run_id, update_time)

    def server_now(self) -> datetime:
        return self.inner.server_now()

    def result_refusal(self, result: Any, run_id: str, record_fields: Mapping[str, Any]) -> str | None:
        return self.inner.result_refusal(result, run_id, record_fields)

    def job_run_pages(self, job_name: str, *, since: datetime | None, until: datetime | None, page_size: int,
                      timeout_seconds: float | None = None) -> Iterator[list[RunRecord]]:
        return self.inner.job_run_pages(job_name, since=since, until=until, page_size=page_size,
                                        timeout_seconds=timeout_seconds)

    def runs_with_id_prefix(self, prefix: str, limit: int, *,
                            timeout_seconds: float | None = None) -> list[RunRecord]:
        return self.inner.runs_with_id_prefix(prefix, limit, timeout_seconds=timeout_seconds)


@pytest.mark.parametrize("then", ["completes", "fails again"])
def test_a_release_whose_answer_was_lost_is_in_place_even_after_the_run_was_claimed_again(store: RunStore,
                                                                                         then: str) -> None:
    """The release committed, the next delivery claimed the run (and finished it, or released it again) before
    the first attempt looked: the first attempt still answers ``released``, not ``fenced``, and writes nothing."""
    runs: list[str] = []
    second: list[str] = []

    def next_delivery(attempt_id: str) -> Any:
        second.append(attempt_id)
        if then == "fails again":
            raise RuntimeError("still full")
        return "ok"

    run_id = uuid.uuid4().hex
    outcome = Idempotency(_ClaimedAgainBeforeTheAnswer(store, next_delivery), lease_seconds=30).execute(
        run_id, _boom(runs), _fields())
    assert outcome.outcome is Outcome.RELEASED and outcome.error == ERROR, outcome
    assert len(runs) == 1 and len(second) == 1
    record = store.get(run_id)
    assert record is not None and record.attempt_id == second[0], record  # nothing written over the second
    if then == "completes":
        assert record.status == "completed" and record.releases == 1 and record.error is None, record
    else:
        assert record.status == "released" and record.releases == 2 and record.error == "RuntimeError: still full"


def test_a_release_that_never_commits_leaves_the_claim_to_expire_and_the_answer_keeps_the_jobs_error(
        server: StoreServer, store: RunStore, proxy: Any) -> None:
    """The store stays unreachable for the release: a store error that says the job ran and carries the job's own
    error and output; the claim holds until its lease expires, then a retry takes the run over, once."""
    proxy.add(Fault(step="release", kind="unavailable", count=100_000))
    via = server.connect(COLLECTION, timeout_seconds=2.0, host=proxy.host)
    runs: list[str] = []
    run_id = uuid.uuid4().hex
    with pytest.raises(StoreError) as caught:
        Idempotency(via, lease_seconds=2).execute(run_id, _boom(runs), _fields(), output=lambda: "no space left")
    error = caught.value
    assert error.step == "release" and error.executed is True, error
    assert error.job_error == ERROR and split_output(error.output)[0] == "no space left", vars(error)
    record = store.get(run_id)
    assert record is not None and record.held_by(runs[0]) and record.releases == 0, record
    deadline = time.monotonic() + 30
    while (record := store.get(run_id)) is not None and record.lease_remaining_seconds > 0:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    again = Idempotency(store, lease_seconds=30).execute(run_id, lambda a: runs.append(a) or "ok", _fields())
    assert again.outcome is Outcome.PROCESSED and again.took_over and len(runs) == 2, again


def test_a_stale_attempt_cannot_release_a_run_taken_over_from_it(store: RunStore) -> None:
    """While the job runs, another attempt takes the run over (as after the lease lapsed): the first attempt's
    failure is fenced, and the newer attempt's claim keeps its own fields."""
    run_id = uuid.uuid4().hex
    newer = "b" * 32

    def job(attempt_id: str) -> Any:
        record = store.get(run_id)
        assert record is not None
        assert store.update_if_unchanged(run_id, {"attempt_id": newer, "previous_attempt_id": attempt_id,
                                                  "claimed_at": SERVER_TIME, "heartbeat_at": SERVER_TIME},
                                         record.update_time) is not None
        raise RuntimeError("disk full on /data")

    outcome = Idempotency(store, lease_seconds=30).execute(run_id, job, _fields())
    assert outcome.outcome is Outcome.FENCED, outcome
    record = store.get(run_id)
    assert record is not None and record.held_by(newer) and record.releases == 0 and record.error is None, record


def test_run_history_reports_a_run_whose_every_attempt_failed_as_failed_never_missed(store: RunStore) -> None:
    """Three deliveries, each failing retryably: within the grace period the run is ``retrying``, after it
    ``failed`` with the last error; never ``missed``, never ``repeated``; the failure streak counts it once the
    grace period is over, not before."""
    when = datetime.now(timezone.utc).replace(second=0, microsecond=0) - timedelta(minutes=1)
    fields = {**_fields(when), "schedule": "* * * * *"}
    run_id = uuid.uuid4().hex
    for _ in range(3):
        assert Idempotency(store, lease_seconds=30).execute(run_id, _boom([]), fields,
                                                            output=lambda: "no space left").outcome is Outcome.RELEASED
    history = RunHistory(store)
    runs = list(history.runs("nightly", since=when, until=when + timedelta(seconds=1)))
    assert len(runs) == 1, runs
    run = runs[0]
    assert run.state == "released" and run.attempts == 3 and run.releases == 3 and not run.took_over, run
    assert run.error == ERROR and split_output(run.output)[0] == "no space left", run
    assert run.to_json()["output"] == run.output and run.to_json()["releases"] == 3

    def report(now: datetime) -> Any:
        return compare(runs, job_name="nightly", schedule="* * * * *", time_zone="Etc/UTC", since=when,
                       until=when + timedelta(seconds=1), now=now, grace_seconds=600)

    during = report(when + timedelta(minutes=5))
    assert [f.kind for f in during.findings] == [RETRYING] and during.ok, during.findings
    after = report(when + timedelta(minutes=11))
    assert [f.kind for f in after.findings] == [FAILED_RUN] and not after.ok, after.findings
    assert ERROR in after.findings[0].detail and "every attempt failed" in after.findings[0].detail
    assert not after.of(MISSED) and after.recorded == after.expected == 1
    assert run_alerts(runs, since=when, until=when + timedelta(minutes=5), grace_seconds=600) == []  # still retried
    alerts = run_alerts(runs, since=when, until=when + timedelta(minutes=11), grace_seconds=600)
    assert [a.kind for a in alerts] == ["failing"] and ERROR in alerts[0].detail, alerts
