"""Find, start and stop a real ``redis-server`` (Debian package ``redis-server``) for tests, the demo and campaigns.

Each server runs on a reserved loopback port with a config file of its own in a private temporary folder, made
by :meth:`RedisServer.start` and removed by :meth:`RedisServer.stop` with the AUTH file in it: no
persistence (``save ""``, ``appendonly no``), ``maxmemory-policy noeviction`` (what a dedup store must have) and
AUTH on (a random ``requirepass``, handed to clients as the file ``DEDUP_REDIS_AUTH_FILE`` names, as a mounted
secret is on Cloud Run). It is stopped by its own PID only. A replica (``replica_of=``) replicates another server
of this module, through an upstream address that may be a relay the caller controls (a failover campaign delays
or cuts replication there).
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import ssl
import tempfile
import time
import weakref
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, ClassVar

from scheduler_dedup.local.servers.store_servers import EmulatorNotFoundError, EmulatorStartError, ProcessStoreServer

if TYPE_CHECKING:
    from scheduler_dedup.local.faults.resp_proxy import RespFaultProxy

INSTALL_HINT = ("install it with `sudo apt-get install -y redis-server` (the Debian/Ubuntu package, in their own "
                "archives), or set REDIS_SERVER to its path")


def find_redis_server() -> str:
    """Return the ``redis-server`` executable: ``$REDIS_SERVER``, else on PATH, else ``/usr/bin/redis-server``.

    Raises:
        EmulatorNotFoundError: none found; the message names the install command.
    """
    explicit = os.environ.get("REDIS_SERVER")
    if explicit:
        if Path(explicit).is_file():
            return explicit
        raise EmulatorNotFoundError(f"REDIS_SERVER={explicit} is not a file; {INSTALL_HINT}")
    found = shutil.which("redis-server") or ("/usr/bin/redis-server" if Path("/usr/bin/redis-server").is_file() else None)
    if not found:
        raise EmulatorNotFoundError(f"redis-server was not found; {INSTALL_HINT}")
    return found


class RedisServer(ProcessStoreServer):
    """A running ``redis-server`` on 127.0.0.1, as a context manager (a :class:`StoreServer`).

    Args:
        port: TCP port; when None, a free one reserved (:func:`reserve_port`) until :meth:`stop`.
        project: the project id clients use (run ids hash it; Redis itself keeps no projects).
        start_timeout: seconds to wait until it answers ``PING``.
        replica_of: ``host:port`` of the primary to replicate (the primary's AUTH string is ``password``), or None.
        password: the AUTH string (default: a random one).
        tls: ``(certificate, key, CA certificate)`` PEM files to serve TLS only (``rediss://``, server
            authentication: clients verify the server, the server asks no client certificate), or None for plain TCP.

    Attributes:
        host: ``"127.0.0.1:PORT"``.
        auth_file: the file holding the AUTH string (``DEDUP_REDIS_AUTH_FILE``).
    """

    kind: ClassVar[str] = "redis"
    display_name: ClassVar[str] = "redis-server"

    def __init__(self, port: int | None = None, project: str = "demo-scheduler-dedup", start_timeout: float = 30.0,
                 replica_of: str | None = None, password: str | None = None,
                 tls: tuple[str, str, str] | None = None):
        super().__init__(port, start_timeout)
        self.project = project
        self.replica_of = replica_of
        self.tls = tls
        self.password = password or secrets.token_urlsafe(24)
        self._dir: Path | None = None  # the private folder (config, AUTH file) while the server runs
        self.auth_file = ""

    def _config(self) -> str:
        lines = [
            *([f"port {self.port}"] if self.tls is None else [
                "port 0", f"tls-port {self.port}", f"tls-cert-file {self.tls[0]}", f"tls-key-file {self.tls[1]}",
                f"tls-ca-cert-file {self.tls[2]}", "tls-auth-clients no"]),
            "bind 127.0.0.1", "protected-mode yes", "daemonize no",
            f"dir {self._dir}", 'logfile ""', 'save ""', "appendonly no",
            "maxmemory 512mb", "maxmemory-policy noeviction", f"requirepass {self.password}",
        ]
        if self.replica_of:
            host, _, port = self.replica_of.rpartition(":")
            lines += [f"replicaof {host} {port}", f"masterauth {self.password}", "repl-diskless-load disabled",
                      "repl-timeout 10"]
        return "\n".join(lines) + "\n"

    def start(self) -> "RedisServer":
        """Start redis-server and block until it answers ``PING``.

        Raises:
            EmulatorNotFoundError: redis-server is not installed.
            EmulatorStartError: it exited or did not answer within ``start_timeout`` seconds.
        """
        binary = find_redis_server()
        self._dir = Path(tempfile.mkdtemp(prefix="scheduler-dedup-redis-"))  # mode 0700
        weakref.finalize(self, shutil.rmtree, self._dir, True)  # should no stop() run: gone at exit all the same
        try:
            self.auth_file = str(self._dir / "auth")
            fd = os.open(self.auth_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as auth:
                auth.write(self.password + "\n")
            config = self._dir / "redis.conf"
            config.write_text(self._config())
            self._spawn([binary, str(config)], self._answers_ping)  # logfile "": its log is the process's output
        except BaseException:
            self.stop()
            raise
        return self

    def _answers_ping(self) -> bool:
        try:
            return bool(self.command("PING", timeout=1.0) == "PONG")
        except (OSError, RedisReplyError):  # not listening (or loading) yet
            return False

    def command(self, *args: str | int, timeout: float = 10.0) -> Any:
        """Send one command on a connection of its own (AUTH first) and return its reply (administration: ping,
        flush, promote, read replication state; the store's own client is redis-py, behind the store contract).

        Returns:
            The reply: ``str`` (simple string), ``int``, ``bytes`` or None (bulk string), ``list`` (array).

        Raises:
            RedisReplyError: Redis answered an error.
            OSError: no connection.
        """
        sock: socket.socket = socket.create_connection(("127.0.0.1", self.port), timeout=timeout)
        if self.tls is not None:
            context = ssl.create_default_context(cafile=self.tls[2])
            context.check_hostname = False
            sock = context.wrap_socket(sock)
        with sock, sock.makefile("rb") as stream:
            for command in (("AUTH", self.password), args):
                sock.sendall(_pack(command))
                reply = _read(stream)
            return reply

    def info(self, section: str) -> dict[str, str]:
        """``INFO <section>`` as ``{field: value}``."""
        text = self.command("INFO", section)
        lines = bytes(text or b"").decode(errors="replace").splitlines()
        return dict(line.split(":", 1) for line in lines if ":" in line and not line.startswith("#"))

    def endpoint_env(self, host: str | None = None) -> dict[str, str]:
        """``DEDUP_STORE=redis``, ``DEDUP_REDIS_URL``, ``DEDUP_REDIS_AUTH_FILE`` and ``GOOGLE_CLOUD_PROJECT`` (with TLS:
        a ``rediss://`` URL and ``DEDUP_REDIS_CA_FILE``)."""
        env = {"DEDUP_STORE": self.kind, "DEDUP_REDIS_URL": f"redis://{host or self.host}/0",
               "DEDUP_REDIS_AUTH_FILE": self.auth_file, "GOOGLE_CLOUD_PROJECT": self.project}
        if self.tls is not None:
            env.update(DEDUP_REDIS_URL=f"rediss://{host or self.host}/0", DEDUP_REDIS_CA_FILE=self.tls[2])
        return env

    def prepare(self, collection: str) -> None:
        """Nothing: a collection's keys exist once a record is written."""

    def wipe(self) -> None:
        """Delete every key of every database (``FLUSHALL SYNC``)."""
        self.command("FLUSHALL", "SYNC", timeout=30)

    def fault_proxy(self, max_workers: int = 64) -> "RespFaultProxy":
        """A started RESP fault proxy in front of the server (:mod:`scheduler_dedup.local.faults.resp_proxy`)."""
        from scheduler_dedup.local.faults.resp_proxy import RespFaultProxy

        return RespFaultProxy(upstream=self.host).start()

    def promote(self) -> None:
        """Make this replica a primary at once (``REPLICAOF NO ONE``), whatever it has not received yet."""
        self.command("REPLICAOF", "NO", "ONE")

    def wait_until_replicating(self, timeout: float = 30.0) -> None:
        """Block until this replica's link to its primary is up (it has loaded the primary's data).

        Raises:
            EmulatorStartError: not within ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        while self.info("replication").get("master_link_status") != "up":
            if time.monotonic() > deadline:
                raise EmulatorStartError(f"replica {self.host} did not connect to {self.replica_of} within "
                                         f"{timeout:g} s; its log ends:\n{self.log()[-2000:]}")
            time.sleep(0.02)

    def kill(self) -> None:
        """SIGKILL this server (a crash: nothing is written anywhere, and it has no persistence)."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait(timeout=10)

    def files(self) -> list[str]:
        """The log, and the server's folder (config, AUTH file)."""
        return [*super().files(), *([str(self._dir)] if self._dir is not None else [])]

    def stop(self) -> None:
        """Stop the process (by its PID only) and remove the server's folder (config, AUTH file) and log."""
        super().stop()
        folder, self._dir = self._dir, None
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)

    def close(self) -> None:
        """:meth:`stop` (kept for callers that close)."""
        self.stop()

    def __enter__(self) -> "RedisServer":
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


class RedisReplyError(RuntimeError):
    """Redis answered a command with an error reply."""


def _pack(args: tuple[str | int, ...]) -> bytes:
    """One command in RESP: an array of bulk strings."""
    parts = [str(a).encode() for a in args]
    return b"*%d\r\n" % len(parts) + b"".join(b"$%d\r\n%s\r\n" % (len(p), p) for p in parts)


def _read(stream: Any) -> Any:
    """One RESP2 reply, parsed.

    Raises:
        RedisReplyError: an error reply.
        OSError: the connection closed.
    """
    line = stream.readline()
    if not line.endswith(b"\r\n"):
        raise ConnectionError("redis-server closed the connection")
    kind, rest = line[:1], line[1:-2]
    if kind == b"+":
        return rest.decode()
    if kind == b"-":
        raise RedisReplyError(rest.decode(errors="replace"))
    if kind == b":":
        return int(rest)
    if kind == b"$":
        return None if int(rest) < 0 else stream.read(int(rest) + 2)[:-2]
    if kind == b"*":
        return None if int(rest) < 0 else [_read(stream) for _ in range(int(rest))]
    raise RedisReplyError(f"unexpected reply {line[:40]!r}")
