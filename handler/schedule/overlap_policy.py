"""The rules of a job's overlap policy and catch-up window: one function each, which the handler's settings, the
component and the stack config all call (the protocol that enforces them:
:mod:`scheduler_dedup.handler.protocol.overlap_lease`, :mod:`scheduler_dedup.handler.protocol.catch_up`)."""

from __future__ import annotations

ALLOW, SKIP, BUFFER_ONE = "allow", "skip", "buffer_one"
#: ``DEDUP_OVERLAP`` values, the component's ``overlap`` input and the stack key ``overlap``.
OVERLAP_POLICIES = (ALLOW, SKIP, BUFFER_ONE)
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
            "(a run due while another executes is recorded skipped_overlap) or buffer_one (it waits, one at most)")


def catch_up_window_problem(seconds: float, setting: str = "DEDUP_CATCH_UP_WINDOW_SECONDS") -> str | None:
    """Why ``seconds`` is not a catch-up window, or None."""
    if 0 <= seconds <= MAX_CATCH_UP_WINDOW_SECONDS:
        return None
    return (f"{setting}={seconds:g} is out of range: use 0 (off) to {MAX_CATCH_UP_WINDOW_SECONDS} seconds "
            "(7 days; older fire times may have lost their records to the TTL policy)")
