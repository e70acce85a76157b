"""What one scenario observed: each delivery's answer (:class:`Answer`) and everything the invariants are checked on
(:class:`ScenarioResult`), with a trace in time order to debug a violation.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from scheduler_dedup.local.campaigns.scenarios import Scenario

@dataclass
class Answer:
    """One delivery and what came back.

    Attributes:
        instance: index of the handler process it went to.
        status: HTTP status, 0 when there was no answer (connection refused or reset, timeout).
        body: the answer's JSON object, or None if it was not one.
        text: the raw answer (first 300 characters).
        in_time: answered within the attempt deadline.
        error: why there was no answer.
    """

    instance: int
    status: int = 0
    body: dict[str, Any] | None = None
    text: str = ""
    in_time: bool = False
    error: str = ""
    sent_at: float = 0.0
    answered_at: float = 0.0
    done: threading.Event = field(default_factory=threading.Event, repr=False)

    @property
    def outcome(self) -> str:
        return str(self.body.get("status", "")) if self.body else ("no answer" if not self.status else "non-json")


@dataclass
class ScenarioResult:
    """Everything observed of one scenario, for the invariants and the report."""

    scenario: Scenario
    answers: list[Answer]
    events: list[dict[str, Any]]
    killed_at: dict[str, float]
    record: dict[str, Any] | None
    run_id: str
    faults: list[tuple[float, str, str]]
    acknowledged: bool
    started: float = 0.0
    violations: list[str] = field(default_factory=list)

    def trace(self) -> list[str]:
        """What happened to this run, in time order (seconds from its first delivery), to debug a violation."""
        lines: list[tuple[float, str]] = []
        for i, a in enumerate(self.answers):
            lines.append((a.sent_at, f"delivery {i} -> instance {a.instance}"))
            lines.append((a.answered_at, f"delivery {i} answered {a.status or a.error} {a.outcome}"
                                         f"{'' if a.in_time else ' (late)'}"))
        for e in self.events:
            what = "started" if e["event"] == "start" else f"ended {e['outcome']}"
            lines.append((e["seen"], f"attempt {e['attempt_id'][:8]} (pid {e['pid']}) {what}"))
        for attempt, t in self.killed_at.items():
            lines.append((t, f"SIGKILL of the process running attempt {attempt[:8]}"))
        for t, step, kind in self.faults:
            lines.append((t, f"fault {kind} on {step}"))
        record = {k: self.record.get(k) for k in ("status", "attempt_id", "previous_attempt_id", "attempts")} \
            if self.record else None
        return [f"{t - self.started:7.2f}s {text}" for t, text in sorted(lines)] + [f"record: {record}"]
