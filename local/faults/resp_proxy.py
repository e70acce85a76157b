"""A TCP proxy between a Redis client and ``redis-server`` that parses RESP and injects faults per command.

The same interface as the gRPC :class:`~scheduler_dedup.local.faults.grpc_proxy.FaultProxy` (both are a
:class:`~scheduler_dedup.local.faults.grpc_proxy.FaultPlan`: ``add``, ``set_random``, ``observe``, ``calls``,
``injected``, ``injected_on``, ``clear``, ``start``/``stop``, a context manager), so the contract suite, ``run-local``
and the campaign inject the same faults into a Redis store. Clients reach it through ``DEDUP_REDIS_URL``. Each
command a client sends (RESP arrays of bulk strings, as redis-py sends them) is named by
:func:`scheduler_dedup.handler.stores.redis.wire.classify` with its protocol step, and its fault applied:

- ``unavailable``: close the connection without forwarding the command: the client reads a closed connection.
- ``deadline``: forward nothing and answer nothing, until the client gives up (its socket timeout) and closes.
- ``lose_answer``: forward the command, read Redis' answer, then close the connection without it.
- ``delay``: hold the command ``delay_seconds``, then forward it (a write then lands after its client gave up).
- ``refuse``: answer an error reply without forwarding: ``-OOM ...`` (a full instance with ``noeviction``) for the
  fault's ``code`` ``RESOURCE_EXHAUSTED``, else ``-ERR fault proxy: refused``.

Commands pipelined behind a faulted one on the same connection are lost with it, as on a real network.
"""

from __future__ import annotations

import select
import socket
import threading
import time
from collections.abc import Callable, Sequence
from typing import BinaryIO

import grpc

from scheduler_dedup.handler.stores.redis.wire import classify as classify_redis
from scheduler_dedup.handler.stores.wire import Call
from scheduler_dedup.local.faults.grpc_proxy import FaultPlan

__all__ = ["RespFaultProxy", "read_command", "read_reply"]

#: The error reply a ``refuse`` fault answers, by the fault's gRPC code (Redis' own wording).
_REFUSALS = {grpc.StatusCode.RESOURCE_EXHAUSTED:
             b"-OOM command not allowed when used memory > 'maxmemory'. (fault proxy: not sent)\r\n"}


class _Closed(Exception):
    """The peer closed its side of the connection."""


def _line(stream: BinaryIO) -> bytes:
    line = stream.readline()
    if not line.endswith(b"\r\n"):
        raise _Closed()
    return line


def _exactly(stream: BinaryIO, length: int) -> bytes:
    data = stream.read(length)
    if data is None or len(data) != length:
        raise _Closed()
    return data


def read_command(stream: BinaryIO) -> tuple[list[bytes], bytes]:
    """One command a client sent: its arguments and its raw bytes (to forward as they came).

    Raises:
        _Closed: the client closed the connection.
    """
    first = _line(stream)
    if not first.startswith(b"*"):  # an inline command (redis-cli, telnet)
        return first.strip().split(), first
    raw = [first]
    args: list[bytes] = []
    for _ in range(int(first[1:])):
        header = _line(stream)
        raw.append(header)
        body = _exactly(stream, int(header[1:]) + 2)
        raw.append(body)
        args.append(body[:-2])
    return args, b"".join(raw)


def read_reply(stream: BinaryIO) -> bytes:
    """One whole reply from Redis (RESP2 or RESP3), as its raw bytes.

    Raises:
        _Closed: Redis closed the connection.
    """
    line = _line(stream)
    kind, rest = line[:1], line[1:-2]
    if kind in (b"$", b"=", b"!"):  # bulk string, verbatim string, bulk error
        length = int(rest)
        return line if length < 0 else line + _exactly(stream, length + 2)
    if kind in (b"*", b"~", b">", b"%", b"|"):  # array, set, push, map, attribute
        count = int(rest)
        items = max(count, 0) * (2 if kind in (b"%", b"|") else 1)
        parts = [line] + [read_reply(stream) for _ in range(items)]
        if kind == b"|":  # an attribute precedes the reply it describes
            parts.append(read_reply(stream))
        return b"".join(parts)
    return line  # + - : _ , # ( simple types


class RespFaultProxy(FaultPlan):
    """A RESP proxy on ``127.0.0.1:<free port>`` in front of ``redis-server``, injecting faults per command.

    Args:
        upstream: the server's ``host:port``.
        classify: names a command's protocol step (default: the Redis store's scripts).

    Attributes:
        host: ``"127.0.0.1:PORT"``, for ``DEDUP_REDIS_URL=redis://<host>/0``.
        calls, injected: see :class:`~scheduler_dedup.local.faults.grpc_proxy.FaultPlan`.
    """

    def __init__(self, upstream: str, classify: Callable[[Sequence[bytes]], Call] = classify_redis):
        super().__init__()
        self.upstream = upstream
        self._classify = classify
        self._listener: socket.socket | None = None
        self._accepting: threading.Thread | None = None
        self._sockets: set[socket.socket] = set()
        self._threads: list[threading.Thread] = []

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> "RespFaultProxy":
        """Bind a free port and start accepting connections."""
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", 0))
        listener.listen(256)
        self._listener = listener
        self.port = int(listener.getsockname()[1])
        self.host = f"127.0.0.1:{self.port}"
        self._accepting = threading.Thread(target=self._accept, name="resp-proxy-accept", daemon=True)
        self._accepting.start()
        return self

    def stop(self) -> None:
        """Stop accepting and close every connection (a held command is dropped unanswered)."""
        self._stopping.set()
        listener, self._listener = self._listener, None
        if listener is not None:
            try:
                listener.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            listener.close()
        with self._lock:
            sockets = list(self._sockets)
            threads = list(self._threads)
        for sock in sockets:
            _close(sock)
        if self._accepting is not None:
            self._accepting.join(5)
        for thread in threads:
            thread.join(5)

    def __enter__(self) -> "RespFaultProxy":
        return self.start()

    def redirect(self, upstream: str) -> None:
        """Send new connections to ``upstream`` and close every open one, as a failover that keeps the endpoint's
        address does (Memorystore's primary endpoint moves to the promoted replica; clients reconnect)."""
        with self._lock:
            self.upstream = upstream
            sockets = list(self._sockets)
        for sock in sockets:
            _close(sock)

    # -- serving --------------------------------------------------------------------------------

    def _accept(self) -> None:
        while not self._stopping.is_set():
            listener = self._listener
            if listener is None:
                return
            try:
                client, _ = listener.accept()
            except OSError:
                return
            thread = threading.Thread(target=self._serve, args=(client,), name="resp-proxy", daemon=True)
            with self._lock:
                self._threads = [t for t in self._threads if t.is_alive()] + [thread]
            thread.start()

    def _serve(self, client: socket.socket) -> None:
        host, _, port = self.upstream.rpartition(":")
        try:
            upstream = socket.create_connection((host, int(port)), timeout=30)
        except OSError:
            _close(client)
            return
        upstream.settimeout(None)
        with self._lock:
            self._sockets.update((client, upstream))
        from_client, from_upstream = client.makefile("rb"), upstream.makefile("rb")
        try:
            while not self._stopping.is_set():
                args, raw = read_command(from_client)
                if not self._relay(client, upstream, from_upstream, args, raw):
                    return
        except (_Closed, OSError, ValueError):
            return
        finally:
            with self._lock:
                self._sockets.difference_update((client, upstream))
            for stream in (from_client, from_upstream):
                try:
                    stream.close()
                except OSError:
                    pass
            _close(client)
            _close(upstream)

    def _relay(self, client: socket.socket, upstream: socket.socket, from_upstream: BinaryIO,
               args: list[bytes], raw: bytes) -> bool:
        """Apply the command's fault and forward it; False once the connection is to be closed."""
        started = time.monotonic()
        call = self._classify(args)
        decision = self._decide(call)
        observed = False  # observers hear of a call before its client does, as on the gRPC proxy
        try:
            if decision.kind == "unavailable":
                return False
            if decision.kind == "deadline":
                _hold(client, decision.delay_seconds, self._stopping)
                return False
            if decision.kind == "refuse":
                client.sendall(_REFUSALS.get(decision.code, b"-ERR fault proxy: refused (not sent)\r\n"))
                return True
            if decision.kind == "delay" and self._stopping.wait(decision.delay_seconds):
                return False
            upstream.sendall(raw)
            reply = read_reply(from_upstream)
            if decision.kind == "lose_answer":
                return False
            self._observed(call, decision, started)
            observed = True
            client.sendall(reply)
            return True
        finally:
            if not observed:
                self._observed(call, decision, started)


def _hold(client: socket.socket, seconds: float, stopping: threading.Event) -> None:
    """Answer nothing for up to ``seconds``, until the client closes its side or the proxy stops."""
    deadline = time.monotonic() + seconds
    while not stopping.is_set() and time.monotonic() < deadline:
        readable, _, _ = select.select([client], [], [], 0.2)
        if readable:
            try:
                if not client.recv(65536, socket.MSG_PEEK):
                    return  # closed by the client
            except OSError:
                return
            time.sleep(0.2)  # more commands pipelined behind the held one: keep holding


def _close(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    try:
        sock.close()
    except OSError:
        pass
