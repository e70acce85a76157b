"""A local HTTP target whose answer a test chooses: huge, trickled, or quoting what it was sent.

One :class:`Downstream` is a stdlib ``ThreadingHTTPServer`` in a thread. Each request is answered by
:attr:`Downstream.behaviour` and recorded as a :class:`Served`: how many bytes of the answer the server got to
send, and whether the client closed the connection before the answer ended.
"""

from __future__ import annotations

import socket
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

#: Behaviours (:attr:`Downstream.behaviour`):
#: ``("status", code)``: ``code`` with a body quoting the request's path and query, as a web server's 404 page does,
#: and ``Location`` quoting them for a 3xx;
#: ``("huge", code, size)``: ``code`` with a ``size``-byte body, streamed;
#: ``("trickle_body", code, seconds)``: ``code`` and headers at once, then one body byte a second for ``seconds``;
#: ``("trickle_headers", code, seconds)``: the status line, then one header byte a second for ``seconds``.
Behaviour = tuple[Any, ...]


@dataclass
class Served:
    path: str
    bytes_sent: int = 0
    #: True when the client closed the connection before the whole answer was sent.
    cut_off: bool = False
    done: threading.Event = field(default_factory=threading.Event)


@dataclass
class Downstream:
    behaviour: Behaviour = ("status", 200)
    served: list[Served] = field(default_factory=list)
    stop_event: threading.Event = field(default_factory=threading.Event)

    def start(self) -> "Downstream":
        downstream = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                downstream._serve(self)

            def do_GET(self) -> None:
                downstream._serve(self)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self.stop_event.set()
        self.server.shutdown()
        self.server.server_close()

    def _serve(self, h: BaseHTTPRequestHandler) -> None:
        length = int(h.headers.get("Content-Length") or 0)
        if length:
            h.rfile.read(length)
        served = Served(h.path)
        self.served.append(served)
        h.close_connection = True
        try:
            self._answer(h, served)
        except (BrokenPipeError, ConnectionResetError, OSError):
            served.cut_off = True
        finally:
            served.done.set()

    def _send(self, h: BaseHTTPRequestHandler, served: Served, data: bytes) -> None:
        h.wfile.write(data)
        h.wfile.flush()
        served.bytes_sent += len(data)

    def _answer(self, h: BaseHTTPRequestHandler, served: Served) -> None:
        kind, status, *args = self.behaviour
        if kind == "status":
            body = f"<h1>Not Found</h1><p>The requested URL {h.path} was not found on this server.</p>".encode()
            head = (f"HTTP/1.1 {status} X\r\nContent-Type: text/html\r\nContent-Length: {len(body)}\r\n"
                    + (f"Location: http://{h.headers.get('Host')}{h.path}/\r\n" if 300 <= status < 400 else "")
                    + "Connection: close\r\n\r\n")
            self._send(h, served, head.encode() + body)
        elif kind == "huge":
            (size,) = args
            self._send(h, served, f"HTTP/1.1 {status} OK\r\nContent-Type: application/octet-stream\r\n"
                                  f"Content-Length: {size}\r\nConnection: close\r\n\r\n".encode())
            chunk = b"x" * 65536
            left = size
            while left > 0 and not self.stop_event.is_set():
                self._send(h, served, chunk[:left])
                left -= min(left, len(chunk))
        elif kind == "trickle_body":
            (seconds,) = args
            self._send(h, served, f"HTTP/1.1 {status} OK\r\nContent-Type: application/json\r\n"
                                  f"Content-Length: {seconds}\r\nConnection: close\r\n\r\n".encode())
            self._trickle(h, served, seconds, b" ")
        elif kind == "trickle_headers":
            (seconds,) = args
            self._send(h, served, f"HTTP/1.1 {status} OK\r\nX-Slow: ".encode())
            self._trickle(h, served, seconds, b"a")
        else:
            raise ValueError(kind)

    def _trickle(self, h: BaseHTTPRequestHandler, served: Served, seconds: int, byte: bytes) -> None:
        """One byte a second; a closed client shows as a failed write (or EOF on the socket) within a second."""
        sock: socket.socket = h.connection
        for _ in range(seconds):
            if self.stop_event.wait(1.0):
                return
            self._send(h, served, byte)
            if _peer_closed(sock):
                served.cut_off = True
                return


def _peer_closed(sock: socket.socket) -> bool:
    """True when the client has closed its end (a read would return EOF at once)."""
    try:
        sock.setblocking(False)
        try:
            return sock.recv(1, socket.MSG_PEEK) == b""
        finally:
            sock.setblocking(True)
    except BlockingIOError:
        return False
    except OSError:
        return True
