"""Where ``backfill`` and ``runs rerun`` send the operator's token, over real HTTP on each store: a server on a
non-loopback address records every request it gets; a refused URL gets nothing, and the failed record stays."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from scheduler_dedup.local.commands.rerun import previous_attempt_id
from scheduler_dedup.local.servers.store_servers import StoreServer

from .test_backfill import SCHEDULE, cli
from .test_overlap import Handlers, _handler_processes_reach_it, deliver, fire_times, handlers, run_id  # noqa: F401

pytestmark = pytest.mark.processes


def _outward_address() -> str | None:
    """An address of this machine that is not loopback (the one a UDP socket toward a public address binds)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))
            address = str(probe.getsockname()[0])
        except OSError:
            return None
    return None if address.startswith("127.") else address


class Recorder:
    """An HTTP server on every address that keeps each request's method, path and headers."""

    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                recorder.received.append({"path": self.path, **dict(self.headers)})
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(b'{"status": "processed"}')

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("0.0.0.0", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture()
def recorder() -> Iterator[Recorder]:
    r = Recorder()
    yield r
    r.server.shutdown()


@pytest.fixture()
def failed_run(handlers: Handlers, server: StoreServer, store: Any) -> tuple[str, Any]:
    [t] = fire_times(1)
    handlers.plan(fail="permanent", fail_times=1)
    a = handlers.start(DEDUP_SCHEDULE=SCHEDULE)
    assert deliver(a.url, t).json()["status"] == "failed"
    rid = run_id(t, server.project)
    return rid, store.get(rid)


def _unchanged(store: Any, rid: str, before: Any) -> None:
    now = store.get(rid)
    assert now is not None and now.status == "failed" and now.update_time == before.update_time
    assert store.get(previous_attempt_id(rid, 1)) is None


def test_rerun_never_sends_the_token_over_plain_http_or_to_another_origin(
        failed_run: tuple[str, Any], recorder: Recorder, server: StoreServer, store: Any) -> None:
    address = _outward_address()
    if address is None:
        pytest.skip("this machine has no address that is not loopback")
    rid, before = failed_run
    refused = [
        (["--url", f"http://{address}:{recorder.port}/"], "plain http"),
        (["--url", f"https://{address}:{recorder.port}/", "--audience", "https://other.example.com"], "origin"),
        (["--url", f"https://{address}:{recorder.port}/",
          "--audience", "https://scheduler-dedup.invalid/projects/p/locations/r/services/s"], "--token-origin"),
        (["--url", f"https://{address}:{recorder.port}/", "--audience", "https://x.example.com",
          "--token-origin", "https://x.example.com"], "not --url's origin"),
    ]
    for args, why in refused:
        done = cli(server, "runs", "rerun", rid[:12], *args)
        assert done.returncode == 2 and why in " ".join(done.stderr.split()), (args, done.stdout + done.stderr)
        backfill = cli(server, "backfill", "--job", "slow-report", "--since", "1h", "--reprocess", "failed", *args)
        assert backfill.returncode == 2 and why in " ".join(backfill.stderr.split()), (args, backfill.stderr)
    assert recorder.received == []
    _unchanged(store, rid, before)


def test_rerun_to_a_handler_that_cannot_be_reached_leaves_the_failed_record(
        failed_run: tuple[str, Any], server: StoreServer, store: Any) -> None:
    rid, before = failed_run
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    done = cli(server, "runs", "rerun", rid[:12], "--url", f"http://127.0.0.1:{port}/")
    assert done.returncode == 1 and "nothing was changed" in " ".join(done.stderr.split()), done.stdout + done.stderr
    _unchanged(store, rid, before)


def test_rerun_to_a_loopback_server_that_is_not_the_handler_leaves_the_failed_record(
        failed_run: tuple[str, Any], recorder: Recorder, server: StoreServer, store: Any) -> None:
    rid, before = failed_run
    # 127.0.0.2 is loopback by address: no token is minted, and the delivery goes out; the answer is not the
    # handler's answer for this run, so nothing is reset.
    done = cli(server, "runs", "rerun", rid[:12], "--url", f"http://127.0.0.2:{recorder.port}/")
    assert done.returncode == 1 and "nothing was changed" in " ".join(done.stderr.split()), done.stdout + done.stderr
    assert len(recorder.received) == 1 and "Authorization" not in recorder.received[0]
    _unchanged(store, rid, before)
