"""A total deadline for one outgoing HTTP call (a proxy target, the OIDC certificates), and a bound on how much
of its answer is read.

requests' ``timeout`` bounds each socket operation, not the call: a downstream that sends one byte a second (of its
status line, its headers or its body) never trips it, and holds the run as long as it likes
(https://requests.readthedocs.io/en/latest/user/advanced/#timeouts: "not a time limit on the entire response
download"). urllib3's ``Timeout(total=...)`` is no better: it only caps the read timeout of each operation by what
the connect left over.

So every call is made inside :func:`total_deadline`, on a session whose connections report their sockets to it
(:func:`with_total_deadline` mounts :class:`DeadlineAdapter`). When the deadline passes, a timer shuts the call's
sockets down: whatever the call was blocked on (connect, TLS handshake, status line, headers, body) returns at
once, and :attr:`Watch.fired` tells the caller why. The body is then read with :func:`read_bounded`: at most a
given number of bytes, and the connection is closed without reading the rest (a 200 MB answer costs nothing).

Credentials the call needs are fetched inside the same deadline: google-auth refreshes an access token (an
``AuthorizedSession``) or fetches an ID token through the transport :func:`google_auth_request` returns, whose
sockets are watched the same way, and which stops google-auth's own retries (five metadata-server attempts with
backoff, each with its own read timeout) once the deadline has passed: :class:`CredentialDeadlineExceeded`.
"""

from __future__ import annotations

import functools
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import requests
import urllib3
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

#: Bytes read of a downstream body per read call.
READ_CHUNK_BYTES = 16 * 1024

_current = threading.local()


class Watch:
    """The sockets one call uses, shut down when its deadline passes (:func:`total_deadline`)."""

    def __init__(self, seconds: float = float("inf")) -> None:
        self.deadline = time.monotonic() + seconds  #: when the call must have ended, monotonic seconds
        self.fired = False
        self.ended = False  # the call is over: its sockets may serve another call now, never shut them
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()

    def add(self, sock: socket.socket) -> None:
        """Watch ``sock``; shut it down now if the deadline has already passed."""
        with self._lock:
            self._sockets.append(sock)
            if self.fired:
                _shut(sock)

    def fire(self) -> None:
        """The deadline passed: shut every watched socket down (a blocked read or connect returns at once)."""
        with self._lock:  # shutdown() does not block; under the lock, no socket is shut after the call ended
            if self.ended:
                return
            self.fired = True
            for sock in self._sockets:
                _shut(sock)

    def end(self) -> None:
        """The call is over: from now on :meth:`fire` does nothing."""
        with self._lock:
            self.ended = True


def _shut(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:  # already closed, or never connected
        pass


@contextmanager
def total_deadline(seconds: float) -> Iterator[Watch]:
    """Run the block as one downstream call that must end within ``seconds`` (wall time, from now).

    Every socket a :class:`DeadlineAdapter` session opens or reuses in this thread during the block is shut down
    when the time is up. The caller checks :attr:`Watch.fired` to tell a deadline from another failure.
    """
    watch = Watch(seconds)
    previous = getattr(_current, "watch", None)
    _current.watch = watch
    timer = threading.Timer(seconds, watch.fire)
    timer.daemon = True
    timer.start()
    try:
        yield watch
    finally:
        timer.cancel()
        watch.end()
        _current.watch = previous


def remaining_seconds() -> float | None:
    """Seconds left of the current :func:`total_deadline` in this thread (0 once it passed), or None outside one."""
    watch = getattr(_current, "watch", None)
    if watch is None:
        return None
    return 0.0 if watch.fired else max(watch.deadline - time.monotonic(), 0.0)


class CredentialDeadlineExceeded(requests.Timeout):
    """A credential for a downstream call (an access token, an ID token) was not fetched by the call's total
    deadline: the metadata server or token endpoint did not answer in time, or trickled its answer. A
    ``requests.Timeout``, so a call that refreshes its token inside ``session.request`` fails as a timeout."""


def google_auth_request() -> Any:
    """google-auth's transport (a ``google.auth.transport.requests.Request``) for token fetches bounded by the
    current :func:`total_deadline`: its session's sockets are shut when the deadline passes, and once it has, a
    request google-auth makes (a retry of the metadata server, the next step of a refresh) raises
    :class:`CredentialDeadlineExceeded` at once instead of being tried. Outside a deadline it behaves as the plain
    transport.

    Pass it as ``AuthorizedSession(credentials, auth_request=google_auth_request())``, or to
    ``google.oauth2.id_token.fetch_id_token``.
    """
    return _deadline_request_class()(with_total_deadline(requests.Session()))


@functools.cache
def _deadline_request_class() -> type:
    import google.auth.exceptions
    import google.auth.transport.requests

    class DeadlineRequest(google.auth.transport.requests.Request):
        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            watch = getattr(_current, "watch", None)
            if watch is not None and watch.fired:
                raise CredentialDeadlineExceeded("the credential fetch did not end within the call's deadline")
            try:
                return super().__call__(*args, **kwargs)
            except google.auth.exceptions.TransportError as exc:
                if watch is not None and watch.fired:  # its sockets were shut: the deadline, not the server
                    raise CredentialDeadlineExceeded("the credential fetch did not end within the call's deadline "
                                                     "(the token endpoint did not answer in time)") from exc
                raise

    return DeadlineRequest


def _report(sock: Any) -> None:
    watch = getattr(_current, "watch", None)
    if watch is not None and sock is not None:
        watch.add(sock)


class _WatchedConnection(HTTPConnection):
    def _new_conn(self) -> socket.socket:
        sock = super()._new_conn()
        _report(sock)  # before any TLS handshake: a trickled handshake is cut too
        return sock

    def request(self, *args: Any, **kwargs: Any) -> None:
        _report(self.sock)  # a kept-alive connection, already connected
        super().request(*args, **kwargs)


class _WatchedHTTPSConnection(HTTPSConnection):
    def _new_conn(self) -> socket.socket:
        sock = super()._new_conn()
        _report(sock)
        return sock

    def request(self, *args: Any, **kwargs: Any) -> None:
        _report(self.sock)
        super().request(*args, **kwargs)


class _WatchedPool(HTTPConnectionPool):
    ConnectionCls = _WatchedConnection


class _WatchedHTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _WatchedHTTPSConnection


_POOLS = {"http": _WatchedPool, "https": _WatchedHTTPSPool}


class DeadlineAdapter(HTTPAdapter):
    """requests' adapter whose connections report their sockets to the current :func:`total_deadline`."""

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = dict(_POOLS)

    def proxy_manager_for(self, proxy: str, **proxy_kwargs: Any) -> Any:
        manager = super().proxy_manager_for(proxy, **proxy_kwargs)
        if isinstance(manager, urllib3.PoolManager):
            manager.pool_classes_by_scheme = dict(_POOLS)
        return manager


def with_total_deadline(session: requests.Session) -> requests.Session:
    """``session``, with :class:`DeadlineAdapter` mounted for ``http://`` and ``https://`` (idempotent)."""
    for prefix in ("https://", "http://"):
        if not isinstance(session.adapters.get(prefix), DeadlineAdapter):
            session.mount(prefix, DeadlineAdapter())
    return session


def read_bounded(response: requests.Response, limit: int) -> tuple[bytes, bool]:
    """``(at most limit bytes of the body, whether that is all of it)``; the response is closed either way.

    The connection is closed, not drained: what was not read is never received into memory. A read that fails
    (the connection broke, or the deadline shut it) ends the body early: it counts as not all of it.
    """
    chunks: list[bytes] = []
    size = 0
    complete = False
    try:
        if limit <= 0:
            return b"", _empty(response)
        for chunk in response.iter_content(min(READ_CHUNK_BYTES, limit + 1)):
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                break
        else:
            complete = True
    except (requests.RequestException, urllib3.exceptions.HTTPError, OSError):
        complete = False
    finally:
        response.close()
    return b"".join(chunks)[:limit], complete and size <= limit


def _empty(response: requests.Response) -> bool:
    """True when the headers say the body is empty (``Content-Length: 0``, or a status that has none)."""
    return response.status_code in (204, 304) or response.headers.get("Content-Length", "").strip() == "0"
