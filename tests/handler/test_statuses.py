"""The answer tables (handler/core/statuses.py) are what the code answers: the reference page is rendered from them."""

from __future__ import annotations

import re

import pytest

from scheduler_dedup.handler.protocol.idempotency import Outcome
from scheduler_dedup.handler.service.request_limits import MAX_BODY_BYTES, MAX_HEADER_VALUE_CHARS, MAX_HEADERS_TOTAL_CHARS
from scheduler_dedup.handler.service.server import HEADER_TIMEOUT_SECONDS
from scheduler_dedup.handler.core.statuses import DELIVERY, ENDPOINT, RUN_CHECK, Answer, code
from tests.paths import ROOT

TABLES = {"DELIVERY": DELIVERY, "RUN_CHECK": RUN_CHECK, "ENDPOINT": ENDPOINT}


@pytest.mark.parametrize("table", TABLES.values(), ids=TABLES.keys())
def test_one_code_per_status(table: tuple[Answer, ...]) -> None:
    statuses = [answer.status for answer in table]
    assert len(statuses) == len(set(statuses)), statuses


def test_every_outcome_is_an_answer_of_both_adapters() -> None:
    for outcome in Outcome:
        assert code(DELIVERY, outcome.value) in (200, 409, 500)
        if outcome is not Outcome.SKIPPED_OVERLAP:  # only a Scheduler job has an overlap policy
            assert code(ENDPOINT, outcome.value) in (200, 409, 422, 500)
    with pytest.raises(KeyError, match="statuses"):
        code(DELIVERY, "teapot")


def test_every_status_the_handler_answers_is_a_row() -> None:
    """Each ``"status": "..."`` the handler's code puts into a body is a row of a table."""
    rows = {answer.status for table in TABLES.values() for answer in table}
    found: dict[str, str] = {}
    for path in sorted((ROOT / "handler").rglob("*.py")):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            for status in re.findall(r"""["']status["']: ["']([a-z_]+)["']""", line):
                found.setdefault(status, f"{path.relative_to(ROOT)}:{number}")
    assert {"bad_request", "forbidden", "request_timeout", "request_too_large"} <= set(found), found
    assert not {status: where for status, where in found.items() if status not in rows}


def test_no_status_code_is_written_beside_an_answer() -> None:
    """A body returned with a literal code (``}, 403``) would answer what the table does not say: use code()."""
    offenders = []
    for path in sorted((ROOT / "handler").rglob("*.py")):
        if path.name == "statuses.py":
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"\}\s*,\s*[1-5]\d\d\b|HTTP_STATUS: [1-5]\d\d|status=[1-5]\d\d|HTTP/1\.1 [1-5]\d\d", line):
                offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not offenders, offenders


def test_the_limits_the_table_quotes_are_the_code_s() -> None:
    rows = {answer.status: answer.when for answer in DELIVERY}
    assert f"{MAX_BODY_BYTES // 1024} KiB" in rows["request_too_large"]
    assert f"{MAX_HEADER_VALUE_CHARS:,} characters" in rows["request_header_too_large"]
    assert f"{MAX_HEADERS_TOTAL_CHARS // 1024} KiB" in rows["request_header_too_large"]
    assert f"{HEADER_TIMEOUT_SECONDS:g} s" in rows["request_timeout"]
