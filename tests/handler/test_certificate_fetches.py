"""Fetches of Google's token-signing certificates are single-flight and never queue callers behind each other.

Real HTTP (a slow local certificate endpoint), real threads. The review saw 4 deliveries with a forged token wait
10, 20, 30 and 40 s behind a slow endpoint: each fetched in turn under one lock.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import google.auth.exceptions
import pytest

from scheduler_dedup.handler.callers.oidc import SigningKeys

from .fake_google import LocalSigner

#: Callers at once, each with a forged ``kid``: behind one lock the last would wait four fetch timeouts.
CALLERS = 4
#: The fetch timeout the tests give :class:`SigningKeys`, seconds.
FETCH_TIMEOUT_SECONDS = 1.5


@dataclass
class SlowCerts:
    """``GET /certs``: waits until :attr:`release` is set (or ``hang_seconds``), then answers ``certs``."""

    certs: dict[str, str] = field(default_factory=dict)
    hang_seconds: float = 0.0
    #: ``Cache-Control: max-age`` of the answer (0: stale at once).
    max_age: int = 3600
    release: threading.Event = field(default_factory=threading.Event)
    #: ``(arrived, answered)`` monotonic times of each fetch.
    fetches: list[list[float]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> "SlowCerts":
        certs = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                times = [time.monotonic(), float("inf")]
                with certs.lock:
                    certs.fetches.append(times)
                certs.release.wait(certs.hang_seconds)
                data = json.dumps(certs.certs).encode()
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Cache-Control", f"public, max-age={certs.max_age}")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:
                    pass
                times[1] = time.monotonic()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/certs"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture()
def slow_certs(signer: LocalSigner) -> Iterator[SlowCerts]:
    server = SlowCerts(certs={signer.kid: signer.cert_pem}).start()
    yield server
    server.stop()


def call_at_once(keys: SigningKeys, kid: str) -> list[tuple[float, float, Any]]:
    """:data:`CALLERS` threads call ``keys.certs_for(kid)`` together: ``(started, ended, certs or exception)`` each."""
    barrier = threading.Barrier(CALLERS)
    results: list[tuple[float, float, Any]] = []

    def caller() -> None:
        barrier.wait()
        started = time.monotonic()
        try:
            outcome: Any = keys.certs_for(kid)
        except Exception as exc:
            outcome = exc
        results.append((started, time.monotonic(), outcome))

    threads = [threading.Thread(target=caller) for _ in range(CALLERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert len(results) == CALLERS, "a caller is still waiting"
    return results


def fetches_during(certs: SlowCerts, started: float, ended: float) -> int:
    """Fetches that began while a caller waited: more than one means it queued behind another's."""
    return sum(1 for arrived, _ in certs.fetches if started <= arrived <= ended)


def test_callers_behind_a_hanging_endpoint_share_one_fetch_and_none_waits_for_two(
        slow_certs: SlowCerts, signer: LocalSigner) -> None:
    slow_certs.hang_seconds = 30  # far past the fetch timeout: each fetch fails by its deadline
    keys = SigningKeys(slow_certs.url, timeout_seconds=FETCH_TIMEOUT_SECONDS)
    results = call_at_once(keys, signer.kid)
    assert len(slow_certs.fetches) == 1, slow_certs.fetches
    for started, ended, outcome in results:
        assert isinstance(outcome, google.auth.exceptions.TransportError), outcome
        assert fetches_during(slow_certs, started, ended) <= 1


def test_callers_behind_a_slow_endpoint_get_the_one_fetch_result(slow_certs: SlowCerts, signer: LocalSigner) -> None:
    slow_certs.hang_seconds = 0.5  # slow, within the fetch timeout
    keys = SigningKeys(slow_certs.url, timeout_seconds=FETCH_TIMEOUT_SECONDS * 4)
    results = call_at_once(keys, signer.kid)
    assert len(slow_certs.fetches) == 1, slow_certs.fetches
    assert all(outcome == {signer.kid: signer.cert_pem} for _, _, outcome in results), results


def test_a_refetch_in_flight_leaves_callers_with_a_known_key_on_the_cached_certs(
        slow_certs: SlowCerts, signer: LocalSigner) -> None:
    """Cached certs whose max-age passed still verify their own keys while one caller revalidates them."""
    keys = SigningKeys(slow_certs.url, timeout_seconds=FETCH_TIMEOUT_SECONDS)
    slow_certs.max_age = 0  # stale as soon as fetched: every call after the first revalidates
    assert keys.certs_for(signer.kid) == {signer.kid: signer.cert_pem}
    slow_certs.hang_seconds = 30
    results = call_at_once(keys, signer.kid)
    assert len(slow_certs.fetches) == 2, slow_certs.fetches  # the first, and the one revalidation
    served = [outcome for _, _, outcome in results if isinstance(outcome, dict)]
    assert len(served) >= CALLERS - 1 and all(o == {signer.kid: signer.cert_pem} for o in served), results
    assert all(fetches_during(slow_certs, s, e) <= 1 for s, e, _ in results)
