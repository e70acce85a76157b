"""The invariants a scenario must hold, checked on what it did (:func:`check`): no step-by-step expectation is
written down.
"""

from __future__ import annotations

from collections import Counter

from scheduler_dedup.local.campaigns.results import ScenarioResult
from scheduler_dedup.local.campaigns.scenarios import CampaignConfig

def renewals_failed_within_a_lease(result: ScenarioResult, since: float, until: float, lease_seconds: float) -> bool:
    """True if two of the run's renewal calls between ``since`` and ``until`` (monotonic seconds) were faulted or
    slow within one lease of each other: renewals come every third of the lease and each failure can cost up to
    two store timeouts (the write, then the read that checks the record), so two such failures let a live
    attempt's lease lapse, and the retry that then takes the run over runs the job again, by design
    (docs/failures.md, "renewals fail")."""
    times = sorted(t for t, step, _ in result.faults if step == "renewal" and since <= t <= until)
    return any(later - earlier <= lease_seconds for earlier, later in zip(times, times[1:]))


def check(result: ScenarioResult, cfg: CampaignConfig) -> list[str]:
    """The invariants, checked on everything one scenario did. Returns the violations (empty: all held).

    1. At most one execution per run: every execution after the first must follow an attempt
       that was SIGKILLed (before it started), that failed retryably (its claim is released
       on purpose), or whose renewals the store failed twice within one lease
       (:func:`renewals_failed_within_a_lease`). Those re-runs are counted apart.
    2. A run whose deliveries continue ends ``completed`` or ``failed``: the simulated Scheduler
       retries until an answer is 2xx within its attempt deadline, and its retry budget
       (``max_deliveries``, far beyond a lease) is never used up; an acknowledged run's record is
       ``completed`` or ``failed``. The record tells the truth: ``completed`` only if an
       execution ended well, ``failed`` only if one failed permanently.
    3. No ``fenced`` answer unless another attempt really took the run over: no more ``fenced``
       answers than attempts that a later attempt took over while they were alive. Likewise no
       ``duplicate`` unless an execution ended well, no ``failed`` unless one failed permanently.
    4. Every answer is the JSON contract: a JSON object with a ``status`` field.
    5. The attempt that ran the job answers what it did (``processed`` 200, ``failed`` 200,
       ``released`` 500), unless the store was unreachable for that run longer than the store
       timeout while the outcome was being recorded (a ``delay`` fault held a completion, failure,
       release or read call beyond the timeout, or the emulator itself took that long: ``slow``):
       then ``store_error`` may stand in for it. No answer claims an execution that did not happen.
       An attempt whose process was SIGKILLed may or may not have answered.
    """
    v: list[str] = []
    starts = [e for e in result.events if e["event"] == "start"]
    ends = {e["attempt_id"]: e for e in result.events if e["event"] == "end"}
    killed = result.killed_at

    # 1. one execution, except re-runs after a killed attempt, a retryable failure, or a lease the store did not
    #    let its live holder renew (the lease's promise: one failed renewal per lease is survived, two are not)
    for index, start in enumerate(starts[1:], 1):
        excused = sum(1 for earlier in starts[:index]
                      if killed.get(earlier["attempt_id"], float("inf")) <= start["seen"]
                      or (earlier["attempt_id"] in ends and ends[earlier["attempt_id"]]["outcome"] == "retryable"
                          and result.events.index(ends[earlier["attempt_id"]]) < result.events.index(start))
                      or renewals_failed_within_a_lease(result, earlier["seen"], start["seen"], cfg.lease_seconds))
        if excused < index:
            v.append(f"execution {index + 1} started while {index - excused} earlier attempt(s) were neither "
                     f"killed nor released ({len(starts)} executions, {len(killed)} killed)")
            break

    # 2. the run ends completed or failed, and the record says what is true
    status = (result.record or {}).get("status")
    if not result.acknowledged:
        v.append(f"not acknowledged after {len(result.answers)} deliveries; record {status or 'missing'}")
    elif status not in ("completed", "failed"):
        v.append(f"acknowledged, but the record is {status or 'missing'}")
    outcomes_ended = Counter(e["outcome"] for e in ends.values())
    if status == "completed" and not outcomes_ended["ok"]:
        v.append("record completed, but no execution ended well")
    if status == "failed" and not outcomes_ended["permanent"]:
        v.append("record failed, but no execution failed permanently")

    answered = [a for a in result.answers if a.status]
    outcomes = Counter(a.outcome for a in answered)

    # 3. fenced only after a real takeover: by a later attempt, of an attempt that was not dead by then
    fenced = outcomes["fenced"]
    taken_over = sum(1 for i, a in enumerate(starts) if any(
        killed.get(a["attempt_id"], float("inf")) > b["seen"] for b in starts[i + 1:]))
    if fenced > taken_over:
        v.append(f"{fenced} fenced answer(s), but {taken_over} attempt(s) were taken over by a later one")
    if outcomes["duplicate"] and not outcomes_ended["ok"]:
        v.append("answered duplicate, but no execution ended well")
    if outcomes["failed"] and not outcomes_ended["permanent"]:
        v.append("answered failed, but no execution failed permanently")

    # 4. the JSON contract
    for a in answered:
        if a.body is None or "status" not in a.body:
            v.append(f"answer {a.status} is not the JSON contract: {a.text[:120]!r}")

    # 5. the attempt that ran the job answers what it did
    # The store was unreachable for the recording of an outcome: a call of a recording step (or its
    # re-read) held beyond the timeout after an execution ended (its end is logged just before).
    first_end = min((e["seen"] for e in ends.values()), default=float("inf"))
    unreachable = any(kind in ("delay", "slow") and step in ("completion", "failure", "release", "read")
                      and t >= first_end - 1.0 for t, step, kind in result.faults)
    for name, ended, code in (("processed", "ok", 200), ("released", "retryable", 500), ("failed", "permanent", 200)):
        most = sum(1 for e in ends.values() if e["outcome"] == ended)
        least = sum(1 for a, e in ends.items() if e["outcome"] == ended and a not in killed)
        got = outcomes[name]
        if name != "failed" and got > most:  # duplicates of a failed run answer failed too
            v.append(f"{got} {name} answer(s) for {most} execution(s) that ended {ended}")
        if got < least and not (unreachable and got + outcomes["store_error"] >= least):
            v.append(f"{least} execution(s) ended {ended} but {got} answered {name} {code} "
                     f"(answers {dict(outcomes)}; store unreachable beyond its timeout: {unreachable})")
    said_ran = sum(1 for a in answered if a.outcome == "store_error" and a.body and a.body.get("executed") is True)
    if said_ran > len(ends):
        v.append(f"{said_ran} store_error answer(s) say the job ran, but {len(ends)} execution(s) ended")
    for a in answered:
        if a.outcome in ("processed", "duplicate", "failed") and a.status != 200:
            v.append(f"{a.outcome} answered {a.status}")
    return v
