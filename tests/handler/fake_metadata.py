"""A local stand-in for the metadata server google-auth asks for tokens (``GCE_METADATA_HOST`` points it here).

One :class:`FakeMetadata` is a stdlib ``ThreadingHTTPServer`` in a thread. It answers what google-auth reads on
Compute Engine and Cloud Run (https://cloud.google.com/compute/docs/metadata/querying-metadata): the root ping
and the project id at once, with the ``Metadata-Flavor: Google`` header google-auth checks, and the default
service account's details; but a token (``.../token``, an access token) or an identity
(``.../identity?audience=...``, an ID token) as :attr:`FakeMetadata.tokens` says: at once, or trickled one byte a
second, as a metadata server under load or a proxy in front of a token endpoint may. Each token request is
recorded as a :class:`~tests.handler.downstream.Served`: how much of the answer it got to send, and whether the
client hung up first.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlparse

from .downstream import Served, _peer_closed

EMAIL = "runtime@p1.iam.gserviceaccount.com"


@dataclass
class FakeMetadata:
    #: ``("trickle", seconds)``: headers at once, then one body byte a second for ``seconds``; ``("ok",)``: at once.
    tokens: tuple[Any, ...] = ("trickle", 120)
    served: list[Served] = field(default_factory=list)
    stop_event: threading.Event = field(default_factory=threading.Event)

    def start(self) -> "FakeMetadata":
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                fake._serve(self)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.host = f"127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self.stop_event.set()
        self.server.shutdown()
        self.server.server_close()

    def token_requests(self) -> list[Served]:
        return [s for s in self.served if "/token" in s.path or "/identity" in s.path]

    def _serve(self, h: BaseHTTPRequestHandler) -> None:
        path = urlparse(h.path).path
        served = Served(h.path)
        self.served.append(served)
        try:
            if path.endswith("/token") or path.endswith("/identity"):
                self._token(h, served)
            elif path.endswith("/project/project-id"):
                self._answer(h, served, "text/plain", b"p1")
            elif path.endswith("/universe/universe-domain"):
                self._answer(h, served, "text/plain", b"googleapis.com")
            elif "/service-accounts/" in path:
                self._answer(h, served, "application/json", json.dumps(
                    {"email": EMAIL, "aliases": ["default"], "scopes": ["https://www.googleapis.com/auth/cloud-platform"]}
                ).encode())
            else:  # the root: google-auth's ping
                self._answer(h, served, "text/plain", b"")
        except OSError:
            served.cut_off = True
        finally:
            served.done.set()

    @staticmethod
    def _head(h: BaseHTTPRequestHandler, served: Served, content_type: str, length: int) -> None:
        data = (f"HTTP/1.1 200 OK\r\nMetadata-Flavor: Google\r\nContent-Type: {content_type}\r\n"
                f"Content-Length: {length}\r\nConnection: close\r\n\r\n").encode()
        h.wfile.write(data)
        h.wfile.flush()
        served.bytes_sent += len(data)

    def _answer(self, h: BaseHTTPRequestHandler, served: Served, content_type: str, body: bytes) -> None:
        h.close_connection = True
        self._head(h, served, content_type, len(body))
        h.wfile.write(body)
        h.wfile.flush()
        served.bytes_sent += len(body)

    def _token(self, h: BaseHTTPRequestHandler, served: Served) -> None:
        h.close_connection = True
        kind, *args = self.tokens
        if kind == "ok":
            body = json.dumps({"access_token": "ya29.fake", "expires_in": 3600, "token_type": "Bearer"}).encode()
            self._answer(h, served, "application/json", body)
            return
        (seconds,) = args
        self._head(h, served, "application/json", seconds)
        for _ in range(seconds):
            if self.stop_event.wait(1.0):
                return
            h.wfile.write(b" ")
            h.wfile.flush()
            served.bytes_sent += 1
            if _peer_closed(h.connection):
                served.cut_off = True
                return
