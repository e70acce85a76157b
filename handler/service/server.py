"""The HTTP server's own bounds: how long a request's headers may take, how long an idle connection is kept.

The handler is served by functions-framework's gunicorn (gthread worker: one thread per request). What that
server bounds and does not, as of gunicorn 27 and functions-framework 3.10:

- functions-framework's ``GunicornApplication`` is a ``BaseApplication``: it ignores ``GUNICORN_CMD_ARGS`` and
  ``gunicorn.conf.py``; only ``THREADS``, ``WORKERS``, ``CLOUD_RUN_TIMEOUT_SECONDS`` and ``GUNICORN_LOG_LEVEL``
  reach it, and it sets ``limit_request_line=0`` (an unlimited request line).
- gthread bounds an idle kept-alive connection (``keepalive``, in the main loop's poller) and a new connection's
  wait for its first byte (5 s in a thread, then back to the poller). It does **not** bound the time to read a
  request's headers once a byte has arrived: a thread reads them from a blocking socket with no timeout. Eight
  connections that send one header byte every few seconds held all eight threads, and every other request
  waited as long as they went on (40 s in the review).
- gunicorn's ``timeout`` is the worker's heartbeat to the arbiter, not a request timeout; gthread's main loop
  keeps beating while its threads are stuck.

So :func:`bound_server` (called by ``handler/main.py`` before functions-framework builds its server) makes
functions-framework use :class:`BoundedGunicornApplication`, which sets

- ``worker_class`` :class:`HeaderDeadlineWorker`: gthread with a deadline of :data:`HEADER_TIMEOUT_SECONDS` on
  reading a request's line and headers, from the moment its first byte is read. A connection past it is answered
  408 (JSON) and closed, freeing the thread: a slow-header connection holds a thread for at most that long;
- ``keepalive`` :data:`KEEPALIVE_SECONDS` (an idle connection is closed after it) and a deadline of
  :data:`BODY_READ_TIMEOUT_SECONDS` on a request's body, from the end of its headers: past it the body reads as
  ended, so a body that never ends (or trickles) holds a thread at most that long, whether the handler reads it
  or gunicorn discards it before the connection's next request;
- ``post_worker_init``: the worker opens the store before it accepts (``main.py`` passes
  :func:`~scheduler_dedup.handler.service.app.start_serving`): the arbiter imported ``main.py`` and forked the
  worker, and no gRPC channel may exist before a fork;
- ``limit_request_line`` 8190, ``limit_request_fields`` 100 and ``limit_request_field_size`` 8190 (gunicorn's own
  defaults, which functions-framework had lifted for the request line), answered by gunicorn with 414/431 before
  the handler sees the request; the handler's own, smaller limits answer JSON (:mod:`scheduler_dedup.handler.service.request_limits`).

``THREADS`` (functions-framework's) is the number of requests one instance serves at once; the component sets it
to :data:`SERVER_THREADS` and Cloud Run's request concurrency to the same number, so no request waits unseen
inside the container.
"""

from __future__ import annotations

import json
import logging
import socket
import time
from collections.abc import Callable
from typing import Any

from gunicorn.workers.gthread import ThreadWorker

from scheduler_dedup.handler.core.statuses import DELIVERY, code

log = logging.getLogger("scheduler_dedup")

#: Requests one instance serves at once: gunicorn threads (``THREADS``) = Cloud Run ``maxInstanceRequestConcurrency``.
#: The function functions-framework serves from ``main.py`` (Cloud Run's build config ``function_target``).
FUNCTION_TARGET = "handle_scheduled_job"
SERVER_THREADS = 8
#: Longest time to read a request's line and headers, from their first byte, seconds.
HEADER_TIMEOUT_SECONDS = 10.0
#: How long an idle kept-alive connection is kept, seconds.
KEEPALIVE_SECONDS = 5
#: Longest time a request's body may take to arrive, from the end of its headers, seconds (Scheduler's bodies and
#: the run check's are a few hundred bytes).
BODY_READ_TIMEOUT_SECONDS = 10.0
#: The gunicorn settings :class:`BoundedGunicornApplication` applies over functions-framework's.
SERVER_SETTINGS: dict[str, Any] = {
    "worker_class": "scheduler_dedup.handler.service.server.HeaderDeadlineWorker",
    "keepalive": KEEPALIVE_SECONDS,
    "limit_request_line": 8190,
    "limit_request_fields": 100,
    "limit_request_field_size": 8190,
}

_TIMEOUT_BODY = json.dumps({"status": "request_timeout",
                            "error": f"the request's headers took longer than {HEADER_TIMEOUT_SECONDS:g} s"}).encode()
_TIMEOUT_ANSWER = (f"HTTP/1.1 {code(DELIVERY, 'request_timeout')} Request Timeout\r\n".encode()
                   + b"Connection: close\r\nContent-Type: application/json\r\n"
                   b"Content-Length: " + str(len(_TIMEOUT_BODY)).encode() + b"\r\n\r\n" + _TIMEOUT_BODY)


class _DeadlineSocket:
    """A connection's socket whose reads stop at a deadline while a request's headers are read.

    Every other attribute is the socket's own. :meth:`arm` starts a request: its first read starts the deadline.
    Past it a read answers 408 and reports end of file, which gunicorn's parser takes as a client that went away:
    the connection is closed and its thread freed.
    """

    def __init__(self, sock: socket.socket):
        self._sock = sock
        self._armed = False
        self._deadline: float | None = None
        self._body_deadline: float | None = None

    def arm(self) -> None:
        """The next request's line and headers start with the next read."""
        self._armed, self._deadline, self._body_deadline = True, None, None

    def disarm(self, body_seconds: float) -> None:
        """The headers are read: the body must arrive within ``body_seconds``; past that it reads as ended."""
        self._armed, self._deadline = False, None
        self._body_deadline = time.monotonic() + body_seconds

    def recv(self, size: int, *flags: int) -> bytes:
        if not self._armed:
            if self._body_deadline is None:
                return self._sock.recv(size, *flags)
            left = self._body_deadline - time.monotonic()
            if left <= 0:
                return b""
            try:
                self._sock.settimeout(left)
                return self._sock.recv(size, *flags)
            except (socket.timeout, TimeoutError):
                return b""
        if self._deadline is None:
            self._deadline = time.monotonic() + HEADER_TIMEOUT_SECONDS
        left = self._deadline - time.monotonic()
        try:
            if left > 0:
                self._sock.settimeout(left)
                return self._sock.recv(size, *flags)
        except (socket.timeout, TimeoutError):
            pass
        log.warning("closed a connection whose request headers took longer than %g s", HEADER_TIMEOUT_SECONDS,
                    extra={"outcome": "request_timeout", "http_status": code(DELIVERY, "request_timeout")})
        try:
            self._sock.settimeout(1.0)
            self._sock.sendall(_TIMEOUT_ANSWER)
        except OSError:
            pass
        self._armed = False
        return b""

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


class HeaderDeadlineWorker(ThreadWorker):
    """gunicorn's gthread worker with a deadline on reading each request's line and headers (module docstring)."""

    def handle(self, conn: Any) -> Any:
        if not isinstance(conn.sock, _DeadlineSocket):
            conn.sock = _DeadlineSocket(conn.sock)
        conn.sock.arm()  # gthread itself bounds the wait for the first byte (then parks the connection)
        return super().handle(conn)

    def handle_request(self, req: Any, conn: Any) -> Any:
        conn.sock.disarm(BODY_READ_TIMEOUT_SECONDS)
        return super().handle_request(req, conn)


def _bounded_application(start_worker: Callable[[], None]) -> type:
    from functions_framework._http.gunicorn import GunicornApplication

    class BoundedGunicornApplication(GunicornApplication):
        """functions-framework's gunicorn application with :data:`SERVER_SETTINGS` applied last, and
        ``start_worker`` run in the worker before it accepts."""

        def load_config(self) -> None:
            super().load_config()
            for key, value in SERVER_SETTINGS.items():
                self.cfg.set(key, value)
            then = self.cfg.post_worker_init  # gunicorn's no-op, or the one the caller set (serve_socket's)

            def post_worker_init(worker: Any) -> None:
                start_worker()
                then(worker)

            self.cfg.set("post_worker_init", post_worker_init)

    return BoundedGunicornApplication


def bound_server(start_worker: Callable[[], None]) -> None:
    """Make functions-framework serve with :data:`SERVER_SETTINGS`, and have its worker call ``start_worker`` once it
    has loaded the app, before it accepts a request (idempotent: the first call's ``start_worker`` stays).

    functions-framework picks its gunicorn application class when it builds the server, after it imported the
    source file (``main.py``), so calling this from ``main.py`` reaches the server that will serve it, whether
    started by the ``functions-framework`` command (Cloud Run) or by :mod:`scheduler_dedup.local.servers.serve_socket`.
    The arbiter imports ``main.py`` and forks the worker: what must not exist before a fork (a gRPC channel) is
    made by ``start_worker``.
    """
    from functions_framework._http import gunicorn as ff_gunicorn

    if getattr(ff_gunicorn.GunicornApplication, "_dedup_bounded", False):
        return
    bounded = _bounded_application(start_worker)
    bounded._dedup_bounded = True  # type: ignore[attr-defined]
    ff_gunicorn.GunicornApplication = bounded  # type: ignore[assignment, misc]
