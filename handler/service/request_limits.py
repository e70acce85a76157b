"""How much input one request may carry, decided before anything is parsed, verified or stored.

Scheduler deliveries carry a few short headers and (with this project's component) no body; the run check's body
is a small JSON object. Larger input is refused as JSON, before caller verification:

- **431** ``request_header_too_large``: a header value longer than :data:`MAX_HEADER_VALUE_CHARS` (Google ID tokens
  are about 1 KB; a Scheduler job's full name at most about 620 characters), or all header values together longer
  than :data:`MAX_HEADERS_TOTAL_CHARS` (RFC 6585 section 5);
- **413** ``request_too_large``: a body longer than :data:`MAX_BODY_BYTES`, by its ``Content-Length`` or as read
  (RFC 9110 section 15.5.14). Only the run check reads a body; a delivery's is never read
  (:func:`leave_body_unread`).

The answer names the header, never its value. The server in front of the handler has its own, larger limits
(:mod:`scheduler_dedup.handler.service.server`): a request line or header beyond those is answered by gunicorn itself
(414 or 431, not JSON) and never reaches the handler.
"""

from __future__ import annotations

import io
from typing import Any

import flask

from scheduler_dedup.handler.core.statuses import DELIVERY, code

#: Longest header value the handler reads, characters.
MAX_HEADER_VALUE_CHARS = 4096
#: Longest sum of all header values, characters.
MAX_HEADERS_TOTAL_CHARS = 32768
#: Longest request body, bytes (the run check's JSON is under 200 bytes).
MAX_BODY_BYTES = 65536

#: ``(body, status)`` of a refusal.
Refusal = tuple[dict[str, Any], int]


def oversized(request: flask.Request) -> Refusal | None:
    """None when ``request`` is within the limits, else the 431 or 413 answer (see the module docstring)."""
    total = 0
    for name, value in request.headers.items():
        total += len(value)
        if len(value) > MAX_HEADER_VALUE_CHARS:
            return ({"status": "request_header_too_large", "header": name[:100],
                     "error": f"{name[:100]} is {len(value)} characters long; at most {MAX_HEADER_VALUE_CHARS} are "
                              "accepted"}, code(DELIVERY, "request_header_too_large"))
    if total > MAX_HEADERS_TOTAL_CHARS:
        return ({"status": "request_header_too_large", "header": None,
                 "error": f"the headers hold {total} characters; at most {MAX_HEADERS_TOTAL_CHARS} are accepted"}, code(DELIVERY, "request_header_too_large"))
    if request.content_length is not None and request.content_length > MAX_BODY_BYTES:
        return _body_too_large(request.content_length)
    return None


def bounded_body(request: flask.Request) -> bytes | Refusal:
    """The body, read to at most :data:`MAX_BODY_BYTES` (also when chunked), or the 413 answer; 408 when the body
    stops arriving or runs past the server's body deadline
    (:data:`~scheduler_dedup.handler.service.server.BODY_READ_TIMEOUT_SECONDS`)."""
    try:
        data = request.stream.read(MAX_BODY_BYTES + 1)
    except Exception:  # werkzeug's ClientDisconnected, gunicorn's NoMoreData: the body ended early
        return ({"status": "request_timeout", "error": "the request body ended early or took too long to arrive"},
                code(DELIVERY, "request_timeout"))
    if len(data) > MAX_BODY_BYTES:
        return _body_too_large(None)
    return data


def leave_body_unread(request: flask.Request) -> None:
    """Make the rest of ``request``'s body read as empty, once the handler has answered.

    functions-framework reads every request's whole body after the view returns (its ``read_request`` after-request
    hook calls ``get_data()``), into memory and with no bound: a body that never ends held the thread and grew the
    process for as long as it was sent. What the handler has not read is left to the server, which discards it
    within its body deadline (:mod:`scheduler_dedup.handler.service.server`).
    """
    request.stream = io.BytesIO(b"")


def _body_too_large(length: int | None) -> Refusal:
    size = f"{length} bytes" if length is not None else f"over {MAX_BODY_BYTES} bytes"
    return ({"status": "request_too_large",
             "error": f"the request body is {size}; at most {MAX_BODY_BYTES} are accepted"}, code(DELIVERY, "request_too_large"))
