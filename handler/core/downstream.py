"""A run forwarded to a downstream execution (a Cloud Run job execution, a Workflows execution, a Cloud Build build):
what the target answers when it started one (:class:`DownstreamExecution`), what the execution's API says of it later
(:class:`ExecutionState`), and what reads and cancels it (:class:`ExecutionControl`, implemented per target in
:mod:`scheduler_dedup.handler.targets.executions`). Imports nothing of the handler, so the protocol can use it.

When a run counts as done per target, and how late its outcome can be recorded: docs/targets-and-auth.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Protocol

#: Field of the stored result naming the execution (Cloud Run, Workflows) or build (Cloud Build).
EXECUTION_KEYS = ("execution", "build")

Ending = Literal["completed", "failed", "cancelled"]


class DownstreamExecution(dict[str, Any]):
    """What a proxy target returns when it started (or found) a downstream execution: the target's result dict, marked
    so the protocol records the run ``running_downstream`` until the execution ends.

    Attributes:
        target: the target type, ``cloud_run_job`` | ``workflows`` | ``cloud_build_trigger``.
    """

    def __init__(self, target: str, fields: dict[str, Any]):
        super().__init__(fields)
        self.target = target

    @property
    def name(self) -> str | None:
        """The execution's resource name (or a build's name or id), or None when the answer did not carry one."""
        return execution_name(self)


def execution_name(result: Any) -> str | None:
    """The execution name a stored target result holds (``execution``, else ``build``), or None."""
    if not isinstance(result, dict):
        return None
    for key in EXECUTION_KEYS:
        value = result.get(key)
        if isinstance(value, str) and value:
            return value
    return None


@dataclass(frozen=True)
class ExecutionState:
    """One read of a downstream execution.

    Attributes:
        ending: None while it runs (or its state cannot be told); else ``completed``, ``failed`` or ``cancelled``.
        detail: the API's own state word and, for a failure, its message (scrubbed, bounded), e.g.
            ``FAILED: task exited with code 1``.
        start_time: when it started, aware UTC, or None.
        end_time: when it ended, aware UTC, or None.
    """

    ending: Ending | None
    detail: str
    start_time: datetime | None = None
    end_time: datetime | None = None

    @property
    def duration_seconds(self) -> float | None:
        """``end_time - start_time`` in seconds, or None."""
        if self.start_time is None or self.end_time is None:
            return None
        return (self.end_time - self.start_time).total_seconds()


class ExecutionControl(Protocol):
    """Reads and cancels a target's executions through its API.

    ``state`` and ``cancel`` raise the target's ``TargetRetryableError`` for a name :meth:`owns` refuses (nothing is
    called), or when the API did not answer usefully (timeout, 5xx, 429, a refused permission): the caller leaves
    the record as it is and asks again later.
    """

    target: str

    def owns(self, name: str) -> bool:
        """True if ``name``, as a run record holds it, is an execution of this handler's own target: the only
        executions read or cancelled (a record is data anyone who can write the collection can forge)."""

    def state(self, name: str) -> ExecutionState:
        """The execution's state (``executions.get`` / ``builds.get``)."""

    def cancel(self, name: str) -> bool:
        """Ask the API to cancel the execution (``executions.cancel`` / ``builds.cancel``): True if it accepted,
        False if it refused (an execution that has already ended, or one that cannot be cancelled)."""
