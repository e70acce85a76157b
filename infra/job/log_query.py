"""Cloud Logging filters of the handler's log lines, built from structured clauses.

The component's log-based metrics and log-match alerts select handler lines with these filters. They
are built from :class:`~scheduler_dedup.handler.core.logs.LogField` names (the names the handler logs),
and rendered in the subset of the Logging query language below, so tests can parse and evaluate the
exact text against real log lines (https://cloud.google.com/logging/docs/view/logging-query-language):

* a filter is comparisons joined by ``AND``;
* a comparison is ``<path> <op> <value>`` with ``op`` one of ``=``, ``!=``, ``>=``;
* a value is a double-quoted string (JSON escapes), ``true``/``false``, a number, or a severity name.

How Cloud Run turns a line of stdout into a log entry
(https://cloud.google.com/logging/docs/structured-logging): ``severity`` becomes the entry's
severity, the other keys stay in ``jsonPayload``; the entry's resource is ``cloud_run_revision`` with
labels ``service_name``, ``revision_name``, ``location``, ``project_id`` and its log name
``projects/P/logs/run.googleapis.com%2Fstdout``. A source deploy's Cloud Run function logs the same way, under the
service of its own name (gen2 functions log as ``cloud_run_revision``: googleapis/google-cloud-go#6367).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal

from scheduler_dedup.handler.core.logs import LogEvent, LogField

Op = Literal["=", "!=", ">="]
Value = str | bool | int | float

#: Cloud Logging's severities in order (LogSeverity), for ``severity>=X`` comparisons.
SEVERITIES = ("DEFAULT", "DEBUG", "INFO", "NOTICE", "WARNING", "ERROR", "CRITICAL", "ALERT", "EMERGENCY")

CLOUD_RUN_RESOURCE = "cloud_run_revision"


@dataclass(frozen=True)
class Clause:
    """One comparison ``<path> <op> <value>``, e.g. ``jsonPayload.outcome="failed"``.

    Attributes:
        path: a LogEntry field path (``jsonPayload.outcome``, ``resource.labels.service_name``, ``severity``).
        op: ``=``, ``!=`` or ``>=``.
        value: a string (rendered quoted), bool, number, or for ``severity`` a name from :data:`SEVERITIES`.
    """

    path: str
    op: Op
    value: Value

    def render(self) -> str:
        """The clause in the Logging query language."""
        if isinstance(self.value, bool):
            text = "true" if self.value else "false"
        elif isinstance(self.value, (int, float)):
            text = f"{self.value:g}"
        elif self.path == "severity":
            if self.value not in SEVERITIES:
                raise ValueError(f"{self.value!r} is not a Cloud Logging severity: use one of {', '.join(SEVERITIES)}")
            text = self.value
        else:
            text = json.dumps(self.value)
        return f"{self.path}{self.op}{text}"


def payload(field: LogField) -> str:
    """The LogEntry path of a handler log field: ``jsonPayload.<name>``."""
    return f"jsonPayload.{field.value}"


@dataclass(frozen=True)
class LogQuery:
    """A filter: every clause must hold.

    Attributes:
        clauses: the comparisons, ANDed.
    """

    clauses: tuple[Clause, ...]

    def render(self) -> str:
        """The filter text, clauses joined by ``AND``."""
        return " AND ".join(clause.render() for clause in self.clauses)

    def where(self, *clauses: Clause) -> "LogQuery":
        """This filter with ``clauses`` added."""
        return LogQuery(self.clauses + clauses)


def handler_lines(project: str, service_name: str, region: str) -> LogQuery:
    """The handler's structured stdout lines on one Cloud Run service."""
    return LogQuery((
        Clause("logName", "=", f"projects/{project}/logs/run.googleapis.com%2Fstdout"),
        Clause("resource.type", "=", CLOUD_RUN_RESOURCE),
        Clause("resource.labels.service_name", "=", service_name),
        Clause("resource.labels.location", "=", region),
    ))


def event(kind: LogEvent) -> Clause:
    """The clause selecting one kind of line (:class:`LogEvent`)."""
    return Clause(payload(LogField.EVENT), "=", kind.value)


def field_is(field: LogField, value: Value, op: Op = "=") -> Clause:
    """A clause on a handler log field."""
    return Clause(payload(field), op, value)


def extract(field: LogField) -> str:
    """A label or value extractor of a handler log field: ``EXTRACT(jsonPayload.<name>)``
    (https://cloud.google.com/logging/docs/logs-based-metrics/labels)."""
    return f"EXTRACT({payload(field)})"


def missed_run_clause() -> str:
    """The rendered clause that selects the run check's ``missed_run`` lines (the policy pack looks for it)."""
    return event(LogEvent.MISSED_RUN).render()
