"""Find, start and stop a real ``redis-server`` (Debian package ``redis-server``) for tests, the demo and campaigns.

Each server runs on a reserved loopback port with a config file of its own in a private temporary folder: no
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
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, ClassVar

from scheduler_dedup.local.store_servers import (EmulatorNotFoundError, EmulatorStartError, StoreServer, reserve_port,
                                                terminate)

if TYPE_CHECKING:
    import redis

    from scheduler_dedup.local.resp_fault_proxy import RespFaultProxy

INSTALL_HINT = "install it with `apt-get install -y redis-server` (Debian/Ubuntu), or set REDIS_SERVER to its path"


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


class RedisServer(StoreServer):
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
        self._reservation: socket.socket | None = None
        if port is None:
            self._reservation = reserve_port()
            port = int(self._reservation.getsockname()[1])
        self.port = port
        self.project = project
        self.host = f"127.0.0.1:{self.port}"
        self.replica_of = replica_of
        self.tls = tls
        self.password = password or secrets.token_urlsafe(24)
        self._start_timeout = start_timeout
        self._proc: subprocess.Popen[bytes] | None = None
        self._dir = Path(tempfile.mkdtemp(prefix="scheduler-dedup-redis-"))
        self.auth_file = str(self._dir / "auth")
        self._log_path = self._dir / "redis.log"

    def _config(self) -> str:
        lines = [
            *([f"port {self.port}"] if self.tls is None else [
                "port 0", f"tls-port {self.port}", f"tls-cert-file {self.tls[0]}", f"tls-key-file {self.tls[1]}",
                f"tls-ca-cert-file {self.tls[2]}", "tls-auth-clients no"]),
            "bind 127.0.0.1", "protected-mode yes", "daemonize no",
            f"dir {self._dir}", f"logfile {self._log_path}", 'save ""', "appendonly no",
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
        Path(self.auth_file).write_text(self.password + "\n")
        os.chmod(self.auth_file, 0o600)
        config = self._dir / "redis.conf"
        config.write_text(self._config())
        self._proc = subprocess.Popen([binary, str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
                                      stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + self._start_timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                break
            try:
                with self.client(socket_timeout=1.0) as client:
                    if client.ping():
                        return self
            except Exception:  # noqa: BLE001 - not listening yet
                time.sleep(0.05)
        tail = self.log()[-2000:]
        self.stop()
        raise EmulatorStartError(f"redis-server did not start on port {self.port}; its log ends:\n{tail}")

    def client(self, **kwargs: Any) -> "redis.Redis":
        """A redis-py client of this server (administration: flushing, promoting, reading replication state)."""
        import redis

        if self.tls is not None:
            kwargs.update(ssl=True, ssl_ca_certs=self.tls[2], ssl_check_hostname=False)
        return redis.Redis(host="127.0.0.1", port=self.port, password=self.password, **kwargs)

    @property
    def pid(self) -> int | None:
        """PID of redis-server while it runs, else None."""
        return self._proc.pid if self._proc is not None and self._proc.poll() is None else None

    def log(self) -> str:
        """The server's log so far."""
        try:
            return self._log_path.read_text(errors="replace")
        except OSError:
            return ""

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
        with self.client(socket_timeout=30) as client:
            client.flushall(asynchronous=False)

    def fault_proxy(self, max_workers: int = 64) -> "RespFaultProxy":
        """A started RESP fault proxy in front of the server (:mod:`scheduler_dedup.local.resp_fault_proxy`)."""
        from scheduler_dedup.local.resp_fault_proxy import RespFaultProxy

        return RespFaultProxy(upstream=self.host).start()

    def promote(self) -> None:
        """Make this replica a primary at once (``REPLICAOF NO ONE``), whatever it has not received yet."""
        with self.client(socket_timeout=10) as client:
            client.execute_command("REPLICAOF", "NO", "ONE")

    def stop(self) -> None:
        """Stop the redis-server this object started (and only that PID)."""
        proc, self._proc = self._proc, None
        if self._reservation is not None:
            self._reservation.close()
            self._reservation = None
        terminate(proc)

    def kill(self) -> None:
        """SIGKILL this server (a crash: nothing is written anywhere, and it has no persistence)."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait(timeout=10)

    def close(self) -> None:
        """:meth:`stop`, and remove the server's folder (config, log, AUTH file)."""
        self.stop()
        shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> "RedisServer":
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
