"""A small evaluator of the Logging query language subset the component generates, for tests.

Independent of :mod:`scheduler_dedup.infra.job.log_query` (which renders filters): it parses the filter
*text* the component puts into its resources, so a rendering slip (quoting, a wrong path, a bool
written as a string) makes a test fail. Supported (https://cloud.google.com/logging/docs/view/logging-query-language):
comparisons ``path = value``, ``path != value``, ``path >= value`` joined by ``AND``; values are
double-quoted strings, ``true``/``false``, numbers and severity names; ``EXTRACT(path)`` extractors.
Anything else raises ``ValueError`` so a filter outside the subset cannot pass unnoticed.
"""

from __future__ import annotations

import json
import re
from typing import Any

SEVERITIES = ("DEFAULT", "DEBUG", "INFO", "NOTICE", "WARNING", "ERROR", "CRITICAL", "ALERT", "EMERGENCY")

# Keys Cloud Logging takes out of a structured line instead of keeping them in jsonPayload
# (https://cloud.google.com/logging/docs/structured-logging#special-payload-fields); "message" stays.
_SPECIAL = {"severity", "time", "timestamp", "timestampSeconds", "timestampNanos", "httpRequest"}

_COMPARISON = re.compile(
    r'\s*(?P<path>[A-Za-z_][A-Za-z0-9_.]*)\s*(?P<op>!=|>=|=)\s*'
    r'(?P<value>"(?:[^"\\]|\\.)*"|true|false|-?\d+(?:\.\d+)?|[A-Z]+)\s*')


def parse(text: str) -> list[tuple[str, str, Any]]:
    """``[(path, op, value)]`` of a filter; value is str, bool, float or ``("severity", name)``.

    Raises:
        ValueError: text outside the subset.
    """
    clauses: list[tuple[str, str, Any]] = []
    position = 0
    while True:
        match = _COMPARISON.match(text, position)
        if not match:
            raise ValueError(f"not in the supported subset at {text[position:]!r}")
        raw = match["value"]
        value: Any
        if raw.startswith('"'):
            value = json.loads(raw)
        elif raw in ("true", "false"):
            value = raw == "true"
        elif raw[0].isdigit() or raw[0] == "-":
            value = float(raw)
        elif raw in SEVERITIES:
            value = ("severity", raw)
        else:
            raise ValueError(f"unknown bare value {raw!r}")
        clauses.append((match["path"], match["op"], value))
        position = match.end()
        if position == len(text):
            return clauses
        if not text.startswith("AND ", position):
            raise ValueError(f"expected AND at {text[position:]!r}")
        position += 4


def _at(entry: dict[str, Any], path: str) -> Any:
    current: Any = entry
    for step in path.split("."):
        if not isinstance(current, dict) or step not in current:
            return None
        current = current[step]
    return current


def _compare(actual: Any, op: str, expected: Any) -> bool:
    if actual is None:
        return False
    if isinstance(expected, tuple):  # severity ordering
        if not isinstance(actual, str) or actual not in SEVERITIES:
            return False
        rank, wanted = SEVERITIES.index(actual), SEVERITIES.index(expected[1])
        return {"=": rank == wanted, "!=": rank != wanted, ">=": rank >= wanted}[op]
    if isinstance(expected, bool):
        if not isinstance(actual, bool):
            return False
        return {"=": actual == expected, "!=": actual != expected}[op]
    if isinstance(expected, float):
        if isinstance(actual, bool) or not isinstance(actual, (int, float)):
            return False
        return {"=": actual == expected, "!=": actual != expected, ">=": actual >= expected}[op]
    if op == ">=":
        return isinstance(actual, str) and actual >= expected
    return (str(actual) == expected) if op == "=" else (str(actual) != expected)


def matches(text: str, entry: dict[str, Any]) -> bool:
    """True when every comparison of filter ``text`` holds for ``entry`` (a LogEntry as a dict)."""
    return all(_compare(_at(entry, path), op, value) for path, op, value in parse(text))


def extract(extractor: str, entry: dict[str, Any]) -> Any:
    """The value ``EXTRACT(path)`` takes from ``entry`` (None when absent)."""
    match = re.fullmatch(r"EXTRACT\(([A-Za-z_][A-Za-z0-9_.]*)\)", extractor)
    if not match:
        raise ValueError(f"{extractor!r} is not EXTRACT(path)")
    return _at(entry, match[1])


def cloud_run_entry(line: dict[str, Any], *, project: str, service: str, region: str) -> dict[str, Any]:
    """The LogEntry Cloud Run makes of one structured stdout line of ``service``
    (https://cloud.google.com/logging/docs/structured-logging)."""
    payload = {k: v for k, v in line.items() if k not in _SPECIAL and not k.startswith("logging.googleapis.com/")}
    return {
        "logName": f"projects/{project}/logs/run.googleapis.com%2Fstdout",
        "resource": {"type": "cloud_run_revision",
                     "labels": {"service_name": service, "location": region, "project_id": project,
                                "revision_name": f"{service}-00001-abc", "configuration_name": service}},
        "severity": line.get("severity", "DEFAULT"),
        "jsonPayload": payload,
    }
