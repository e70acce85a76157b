"""How a campaign is played (:class:`CampaignConfig`) and each scenario's plan, drawn from its seed
(:class:`Scenario`): ``--seed S --scenarios 1`` replays scenario ``S`` exactly.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Any

#: Fault kinds the campaign draws from, what a store's network does: fail a call before sending (UNAVAILABLE,
#: DEADLINE_EXCEEDED), apply it and lose the answer, or hold it beyond the store timeout.
CAMPAIGN_KINDS = ("unavailable", "deadline", "lose_answer", "delay")


@dataclass(frozen=True)
class CampaignConfig:
    """How a campaign is played (all durations in seconds).

    Attributes:
        scenarios: number of scenarios; scenario ``i`` has seed ``seed + i``.
        seed: seed of the first scenario.
        fault_rate: probability that one store call is hit by a fault, 0 to 1.
        instances: handler processes behind the proxy (at least 2).
        concurrency: scenarios played at once.
        lease_seconds: the handler's ``DEDUP_LEASE_SECONDS``.
        store_timeout_seconds: the handler's ``DEDUP_STORE_TIMEOUT_SECONDS``.
        attempt_deadline: how long the simulated Scheduler waits for an answer before retrying.
        max_deliveries: Scheduler's retry budget per run (deliveries, first wave included): it only
            ends a scenario that makes no progress, so it spans many leases (a SIGKILL ends every
            attempt running in that process, and a long job may be killed more than once).
        kinds: fault kinds drawn from.
        baseline: serve the no-dedup baseline instead of the handler (shows what the invariants catch).
        store: the run store (``DEDUP_STORE``) whose local server the handlers use.

    The defaults keep the production ratio of store timeout to lease small enough that one failed
    lease renewal leaves time for the next (renewal every ``lease / 3``, each failure costing up
    to the store timeout), with everything scaled down so a scenario takes seconds.
    """

    scenarios: int = 80
    seed: int = 1
    fault_rate: float = 0.1
    instances: int = 2
    concurrency: int = 12
    lease_seconds: float = 4.0
    store_timeout_seconds: float = 0.8
    attempt_deadline: float = 2.5
    max_deliveries: int = 40
    kinds: tuple[str, ...] = CAMPAIGN_KINDS
    baseline: bool = False
    store: str = "firestore"

    @property
    def delay_seconds(self) -> tuple[float, float]:
        """How long a ``delay`` fault holds a call, drawn from (least, most) seconds: always beyond the
        store timeout, at most beyond the lease (a write that lands after another attempt could take over)."""
        return self.store_timeout_seconds + 0.3, self.lease_seconds + 1.0


@dataclass(frozen=True)
class Scenario:
    """One scheduled run's plan, drawn from its seed.

    Attributes:
        seed: the seed (replay with ``--seed SEED --scenarios 1``).
        job_name: a Scheduler job id of its own (so scenarios never share a run).
        schedule_time: RFC 3339, UTC.
        job_seconds: how long the job runs; some runs outlast the lease.
        fail: ``None``, ``"retryable"`` or ``"permanent"``.
        fail_times: how many of the run's first executions fail.
        wave: concurrent duplicate deliveries sent at once.
        kill_after: SIGKILL the process running the job this long after the job started (None: no kill).
        late_duplicate: deliver once more after the run was acknowledged (a lost 2xx).
    """

    seed: int
    job_name: str
    schedule_time: str
    job_seconds: float
    fail: str | None
    fail_times: int
    wave: int
    kill_after: float | None
    late_duplicate: bool

    @classmethod
    def generate(cls, seed: int, lease_seconds: float) -> "Scenario":
        """The scenario of ``seed``, for a handler whose lease is ``lease_seconds``."""
        rng = random.Random(f"scenario:{seed}")
        long_job = rng.random() < 0.25
        job_seconds = rng.uniform(lease_seconds + 0.5, 2 * lease_seconds) if long_job else rng.uniform(0.02, 0.4)
        fail = rng.choices([None, "retryable", "permanent"], weights=[70, 18, 12])[0]
        kill_after = None
        if rng.random() < 0.03:
            job_seconds = max(job_seconds, rng.uniform(1.5, lease_seconds + 1))
            kill_after = rng.uniform(0.1, job_seconds / 2)
        minute = seed % (60 * 24 * 365 * 10)  # one run a minute from 2026-01-01, ten years long
        return cls(seed=seed, job_name=f"campaign-{seed}",
                   schedule_time=time.strftime("%Y-%m-%dT%H:%M:00Z", time.gmtime(1767225600 + 60 * minute)),
                   job_seconds=round(job_seconds, 3), fail=fail, fail_times=rng.choice([1, 1, 2]),
                   wave=rng.choices([1, 2, 3, 4], weights=[40, 30, 20, 10])[0], kill_after=kill_after,
                   late_duplicate=rng.random() < 0.3)

    def plan(self) -> dict[str, Any]:
        """The recording job's plan for this run (see ``scheduler_dedup.local.demo.recording_job``)."""
        plan: dict[str, Any] = {"sleep": self.job_seconds}
        if self.fail:
            plan.update(fail=self.fail, fail_times=self.fail_times)
        return plan
