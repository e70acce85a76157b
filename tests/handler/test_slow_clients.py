"""Slow clients over real sockets: connections that trickle their headers must not block other requests.

Under functions-framework's gunicorn defaults, 8 connections sending one header byte at a time would hold all 8
threads of the handler, and every other request would wait as long as they went on.
"""

from __future__ import annotations

import socket
import threading
import time

import requests

from scheduler_dedup.handler.service.server import HEADER_TIMEOUT_SECONDS

from .conftest import Harness, deliver, scheduler_headers

#: How long the slow clients go on trickling, seconds: well past the header deadline.
ATTACK_SECONDS = HEADER_TIMEOUT_SECONDS * 3


def _trickle(port: int, stop: threading.Event, closed: list[bytes]) -> None:
    """Open a connection, send a request line, then one header byte per second until stopped or closed."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    try:
        sock.sendall(b"POST / HTTP/1.1\r\nHost: x\r\n")
        while not stop.is_set():
            try:
                sock.sendall(b"X")
                sock.settimeout(1.0)
                data = sock.recv(4096)
                if data == b"" or data:
                    closed.append(data)
                    return
            except socket.timeout:
                continue
            except OSError:
                closed.append(b"")
                return
    finally:
        sock.close()


def test_eight_slow_header_connections_do_not_block_other_requests(harness: Harness) -> None:
    server = harness.server(threads=8)
    port = int(server.url.rstrip("/").rsplit(":", 1)[1])
    stop = threading.Event()
    closed: list[bytes] = []
    slow = [threading.Thread(target=_trickle, args=(port, stop, closed), daemon=True) for _ in range(8)]
    for thread in slow:
        thread.start()
    time.sleep(1.5)  # every thread of the server is now reading a slow client's headers
    started = time.monotonic()
    try:
        # Answered while the slow clients still trickle: before the fix, not until they stop.
        response = deliver(server.url, scheduler_headers("busy", "2026-10-16T12:00:00Z"),
                           timeout=ATTACK_SECONDS - 2)
    finally:
        waited = time.monotonic() - started
        stop.set()
        for thread in slow:
            thread.join(timeout=10)
    assert response.status_code == 200 and response.json()["status"] == "processed", response.text
    assert waited < ATTACK_SECONDS - 2
    assert len(closed) == 8, closed
    assert all(data.startswith(b"HTTP/1.1 408") for data in closed), closed
    assert "request headers took longer" in server.log()


def test_an_idle_kept_alive_connection_is_closed(harness: Harness) -> None:
    from scheduler_dedup.handler.service.server import KEEPALIVE_SECONDS

    server = harness.server()
    with requests.Session() as session:
        first = session.post(server.url, headers=scheduler_headers("ka", "2026-10-16T12:00:00Z"), timeout=30)
        assert first.status_code == 200
        sock = socket.create_connection(("127.0.0.1", int(server.url.rstrip("/").rsplit(":", 1)[1])), timeout=30)
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nX-CloudScheduler-JobName: ka\r\n"
                     b"X-CloudScheduler-ScheduleTime: 2026-10-16T12:00:00Z\r\n\r\n")
        answer = b""
        while b"\r\n\r\n" not in answer:
            answer += sock.recv(4096)
        idle_since = time.monotonic()
        sock.settimeout(KEEPALIVE_SECONDS + 20)
        while sock.recv(4096):
            pass
        assert time.monotonic() - idle_since < KEEPALIVE_SECONDS + 10
        sock.close()


def _endless_body(port: int, path: str, stop: threading.Event, answers: list[tuple[str, bytes]]) -> None:
    """A delivery (or run check) whose chunked body never ends: a 1 KiB chunk every 50 ms until stopped; the first
    bytes of the answer go into ``answers``."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    try:
        sock.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\nX-CloudScheduler-JobName: endless\r\n"
                     "X-CloudScheduler-ScheduleTime: 2026-10-16T12:00:00Z\r\nTransfer-Encoding: chunked\r\n\r\n".encode())
        sock.settimeout(0.05)
        while not stop.is_set():
            try:
                sock.sendall(b"400\r\n" + b"x" * 1024 + b"\r\n")
                data = sock.recv(4096)
                if data:
                    answers.append((path, data))
                    return
            except socket.timeout:
                continue
            except OSError:
                return
    finally:
        sock.close()


def test_eight_endless_bodies_do_not_block_other_requests_or_fill_memory(harness: Harness) -> None:
    """functions-framework reads every request's whole body after the answer (``get_data``), and gunicorn bounded
    only the wait between two reads of it: 8 connections streaming a chunked body that never ends held all 8
    threads (no answer came, memory grew with each chunk) and every other request waited as long as they went on."""
    from scheduler_dedup.handler.core.paths import CHECK_PATH

    server = harness.server(threads=8, DEDUP_SCHEDULE="* * * * *")
    port = int(server.url.rstrip("/").rsplit(":", 1)[1])
    stop = threading.Event()
    answers: list[tuple[str, bytes]] = []
    slow = [threading.Thread(target=_endless_body, args=(port, CHECK_PATH if i % 2 else "/", stop, answers),
                             daemon=True) for i in range(8)]
    for thread in slow:
        thread.start()
    time.sleep(1.5)
    started = time.monotonic()
    try:
        response = deliver(server.url, scheduler_headers("busy", "2026-10-16T12:00:00Z"), timeout=ATTACK_SECONDS * 2)
    finally:
        waited = time.monotonic() - started
        for thread in slow:  # each stops once answered: a run check after reading 64 KiB of its body
            thread.join(timeout=ATTACK_SECONDS)
        stop.set()
    assert response.status_code == 200 and response.json()["status"] == "processed", response.text
    assert waited < ATTACK_SECONDS
    assert len(answers) == 8, answers  # each endless request was answered, its body not read to its end
    for path, data in answers:
        assert data.startswith((b"HTTP/1.1 413", b"HTTP/1.1 408") if path == CHECK_PATH else b"HTTP/1.1 "), data
