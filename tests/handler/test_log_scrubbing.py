"""Every log line leaves through one formatter, which scrubs credentials from every string in it: the message,
extra fields and a traceback's text (a 500 ``internal_error`` logs the exception nothing else answered)."""

from __future__ import annotations

import json
import logging
import sys

from scheduler_dedup.handler.core.logs import configure_logging

JWT = "eyJhbGciOiJSUzI1NiIsImtpZCI6ImsxIn0.eyJzdWIiOiJzY2hlZHVsZXIifQ.c2lnbmF0dXJlLW9mLXRoZS10b2tlbi14eXo"


def _format(record: logging.LogRecord) -> dict[str, object]:
    logger = configure_logging()
    (handler,) = logger.handlers
    assert handler.formatter is not None
    line: dict[str, object] = json.loads(handler.formatter.format(record))
    return line


def test_a_traceback_message_and_extra_field_carrying_a_token_are_logged_scrubbed() -> None:
    try:
        raise RuntimeError(f"downstream said: Authorization: Bearer {JWT}")
    except RuntimeError:
        exc_info = sys.exc_info()
    record = logging.LogRecord("scheduler_dedup.handler.service.answers", logging.ERROR, __file__, 1,
                               "unexpected error with %s", (f"token {JWT}",), exc_info)
    record.target = "https://alice:pw@example.com/hook?key=AIzaSyD-0123456789abcdefghijklmnopqrstu"
    line = _format(record)
    text = json.dumps(line)
    assert "RuntimeError" in str(line["exc_info"]) and "unexpected error with token" in str(line["message"])
    for secret in (JWT, "alice:pw", "AIzaSyD-0123456789abcdefghijklmnopqrstu"):
        assert secret not in text, text
    assert line["severity"] == "ERROR"
