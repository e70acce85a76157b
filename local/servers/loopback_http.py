"""A stdlib HTTP server on a free loopback port, serving GET and POST from a thread: what the local stand-ins of
Google APIs run on (:mod:`scheduler_dedup.local.demo.fake_cloud_run`, the tests' fakes)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def serve_loopback(serve: Callable[[BaseHTTPRequestHandler, str], None]) -> tuple[ThreadingHTTPServer, str]:
    """Start a threading server on ``127.0.0.1`` (a free port) whose GET and POST requests call
    ``serve(request handler, method)``; quiet (no access log).

    Returns:
        The server (``shutdown()`` and ``server_close()`` stop it) and its base URL, ``http://127.0.0.1:PORT``.
    """

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            serve(self, "GET")

        def do_POST(self) -> None:
            serve(self, "POST")

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"
