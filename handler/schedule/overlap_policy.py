"""The rules of a job's overlap policy and catch-up window: one function each, which the handler's settings, the
component, the stack config and the policy pack all call (the protocol that enforces them:
:mod:`scheduler_dedup.handler.protocol.overlap_lease`, :mod:`scheduler_dedup.handler.protocol.catch_up`)."""

from __future__ import annotations

ALLOW, SKIP, BUFFER_ONE, REPLACE = "allow", "skip", "buffer_one", "replace"
#: ``DEDUP_OVERLAP`` values, the component's ``overlap`` input and the stack key ``overlap``.
OVERLAP_POLICIES = (ALLOW, SKIP, BUFFER_ONE, REPLACE)
#: Target types whose executions ``replace`` can cancel through their API (``DEDUP_TARGET_TYPE``, the stack's
#: ``targetType``).
CANCELLABLE_TARGETS = ("cloud_run_job", "workflows", "cloud_build_trigger")
DEFAULT_OVERLAP = ALLOW
#: Longest catch-up window, seconds (7 days, the default record retention: older fire times' records may be gone).
MAX_CATCH_UP_WINDOW_SECONDS = 604_800


def overlap_policy_problem(value: str, setting: str = "DEDUP_OVERLAP") -> str | None:
    """Why ``value`` is not an overlap policy, or None.

    Args:
        value: the policy as written.
        setting: the setting named in the message (``DEDUP_OVERLAP``, ``overlap``).
    """
    if value in OVERLAP_POLICIES:
        return None
    return (f"{setting}={value!r} is not an overlap policy: use allow (runs of the job may execute at once), skip "
            "(a run due while another executes is recorded skipped_overlap), buffer_one (it waits, one at most) or "
            "replace (it cancels the running downstream execution)")


def replace_problem(overlap: str, target_type: str, setting: str = "DEDUP_OVERLAP",
                    target_setting: str = "DEDUP_TARGET_TYPE") -> str | None:
    """Why overlap policy ``overlap`` cannot hold for a ``target_type`` target, or None.

    ``replace`` cancels the running run's downstream execution through its API (Cloud Run ``executions.cancel``,
    Workflows ``executions.cancel``, Cloud Build ``builds.cancel``). A python job runs inside the handler, where no
    cancel can stop it safely (a thread cannot be interrupted between two side effects), and an HTTP target's call
    has no execution to cancel: both are refused.

    Args:
        overlap: the overlap policy.
        target_type: the target type (``python``, ``http``, ``cloud_run_job``...).
        setting, target_setting: the names the message gives them (env variables, stack keys).
    """
    if overlap != REPLACE or target_type in CANCELLABLE_TARGETS:
        return None
    return (f"{setting}=replace cannot hold for {target_setting}={target_type}: replace cancels the running "
            "downstream execution, and a job running inside the handler (python) or an HTTP call cannot be "
            f"cancelled safely. Use {setting}=skip or buffer_one, or forward the job to a Cloud Run job, a Workflows "
            "execution or a Cloud Build trigger")


def catch_up_window_problem(seconds: float, setting: str = "DEDUP_CATCH_UP_WINDOW_SECONDS") -> str | None:
    """Why ``seconds`` is not a catch-up window, or None."""
    if 0 <= seconds <= MAX_CATCH_UP_WINDOW_SECONDS:
        return None
    return (f"{setting}={seconds:g} is out of range: use 0 (off) to {MAX_CATCH_UP_WINDOW_SECONDS} seconds "
            "(7 days; older fire times may have lost their records to the TTL policy)")
