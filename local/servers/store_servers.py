"""Real local store servers behind one interface, for tests, the demo, ``run-local`` and the campaign.

Each store of :mod:`scheduler_dedup.handler.stores` has a local server here (the Firestore emulator,
:mod:`scheduler_dedup.local.servers.firestore_emulator`; ``redis-server``, :mod:`scheduler_dedup.local.servers.redis_server`; the
Spanner emulator, :mod:`scheduler_dedup.local.servers.spanner_emulator`): one child process each
(:class:`ProcessStoreServer`), started on a free loopback port, stopped by its own PID only, and failing with the
install command when it is missing. A :class:`StoreServer` also knows how a handler process and an in-process
client reach it, directly or through the fault proxy.

:func:`store_server` builds the server of a ``DEDUP_STORE`` value, the one its store registers
(:mod:`scheduler_dedup.handler.stores.registry`).
"""

from __future__ import annotations

import abc
import signal
import socket
import subprocess
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from types import TracebackType
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from scheduler_dedup.handler.stores import registry
from scheduler_dedup.handler.stores.kind import load
from scheduler_dedup.local.servers.held_signals import signals_held

if TYPE_CHECKING:
    from scheduler_dedup.handler.config.settings import Settings
    from scheduler_dedup.handler.stores.base import RunStore
    from scheduler_dedup.handler.stores.wire import GrpcWire
    from scheduler_dedup.local.faults.grpc_proxy import FaultPlan

_S = TypeVar("_S", bound="StoreServer")

#: Serialises the brief changes of process environment some clients need to reach a given host.
ENV_LOCK = threading.Lock()


def _unlink(path: str) -> None:
    import os

    try:
        os.unlink(path)
    except OSError:
        pass


class EmulatorNotFoundError(RuntimeError):
    """A local store server (or what it needs, e.g. Java or the store's client library) is missing; the message
    says what to install."""


#: How to add Google's Cloud SDK apt repository, where the emulators' Debian packages come from
#: (https://cloud.google.com/sdk/docs/install#deb); they are in no Debian or Ubuntu archive of their own.
GOOGLE_APT_REPOSITORY = (
    "curl -fsSL https://packages.cloud.google.com/apt/doc/apt-key.gpg"
    " | sudo gpg --dearmor -o /usr/share/keyrings/cloud.google.gpg\n"
    "echo 'deb [signed-by=/usr/share/keyrings/cloud.google.gpg] https://packages.cloud.google.com/apt cloud-sdk main'"
    " | sudo tee /etc/apt/sources.list.d/google-cloud-sdk.list\n"
    "sudo apt-get update"
)


def apt_install_hint(package: str, gcloud_component: str, variable: str, what: str) -> str:
    """The install hint of an emulator: its Debian package from Google's apt repository (with the lines that add
    it, :data:`GOOGLE_APT_REPOSITORY`), or its gcloud component, or the variable naming ``what`` directly."""
    indented = "\n".join("    " + line for line in (*GOOGLE_APT_REPOSITORY.splitlines(),
                                                     f"sudo apt-get install -y {package}"))
    return (f"install the Debian package `{package}` from Google's Cloud SDK apt repository (Debian/Ubuntu):\n"
            f"{indented}\nor run `gcloud components install {gcloud_component}`, or set {variable} to the path of "
            f"{what}")


def require_client(kind: str) -> None:
    """Check that the client library of the store ``kind`` imports, before any server starts.

    Raises:
        EmulatorNotFoundError: it does not; the message names the pip extra the store registry gives for it, e.g.
            ``pip install 'scheduler-dedup[spanner]'``.
    """
    from scheduler_dedup.handler.stores.kind import load

    store = registry.find(kind)
    if store is None:
        return
    try:
        load(store.factory)
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.startswith("scheduler_dedup"):
            raise
        install = (f"pip install 'scheduler-dedup[{store.extra}]'" if store.extra
                   else "pip install --force-reinstall scheduler-dedup (it is a dependency of the package itself)")
        raise EmulatorNotFoundError(f"the {kind} store's client library is not installed (no module {exc.name!r}): "
                                    f"{install}") from None


class EmulatorStartError(RuntimeError):
    """A local store server exited or did not become ready in time; the message holds its log tail."""


def reserve_port() -> socket.socket:
    """Reserve a free TCP port on 127.0.0.1 for a server that binds it with ``SO_REUSEADDR``; close to release.

    Returns:
        A socket bound (``SO_REUSEADDR``) to ``127.0.0.1:<port>`` that never listens. While it is open the
        kernel gives the port to no other socket, yet a server binding it with ``SO_REUSEADDR`` and
        listening succeeds (Linux refuses a ``SO_REUSEADDR`` bind only next to an active listener; the
        emulator's and gunicorn's servers set it). A port merely found free and closed can be taken by
        another process before the server binds it (and a readiness check then talks to that process).
    """
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


def terminate(proc: "subprocess.Popen[bytes] | None") -> None:
    """Stop one process this program started, by its PID only: SIGTERM, then SIGKILL after 10 s without exit."""
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


@contextmanager
def environment(values: Mapping[str, str | None]) -> Iterator[None]:
    """Set (or, for None, unset) environment variables for the block, under :data:`ENV_LOCK`; restore them after.

    For clients that read their endpoint from the environment only once, when they are built.
    """
    import os

    with ENV_LOCK:
        old = {key: os.environ.get(key) for key in values}
        try:
            for key, value in values.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
            yield
        finally:
            for key, value in old.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value


@contextmanager
def running(server: _S, keep: bool = False) -> Iterator[_S]:
    """Start ``server`` for the block and stop it when the block ends: on success, on an error, on Ctrl-C (and on
    SIGTERM, which the commands turn into ``SystemExit``: :func:`~scheduler_dedup.local.commands.lifetime.ends_on_signals`).

    Args:
        keep: leave the server running when the block ends normally (``--keep-emulator``); it is stopped on an
            error or an interruption all the same.

    Raises:
        EmulatorNotFoundError: the store's client library is missing (:func:`require_client`; nothing started), or
            as :meth:`StoreServer.start`.
        EmulatorStartError: as :meth:`StoreServer.start` (nothing is left running).
    """
    require_client(server.kind)
    try:
        yield server.start()
    except BaseException:
        server.stop()
        raise
    if not keep:
        server.stop()


class StoreServer(abc.ABC):
    """A real store server on loopback, started and stopped by this process (a context manager).

    Attributes:
        kind: the store's ``DEDUP_STORE`` value.
        display_name: its name in messages.
        project: the project id its clients use.
        host: ``127.0.0.1:PORT`` of its client endpoint (what a fault proxy fronts).
        wire: the gRPC service a :class:`~scheduler_dedup.local.faults.grpc_proxy.FaultProxy` forwards, or None for a
            store that does not speak gRPC.
    """

    kind: ClassVar[str]
    display_name: ClassVar[str]
    project: str
    host: str

    def _take_port(self, port: int | None) -> None:
        """Set :attr:`port` and :attr:`host` to ``port``, or to a free loopback port reserved (:func:`reserve_port`)
        until :meth:`_release_port`."""
        self._reservation: socket.socket | None = None
        if port is None:
            self._reservation = reserve_port()
            port = int(self._reservation.getsockname()[1])
        self.port = port
        self.host = f"127.0.0.1:{self.port}"

    def _release_port(self) -> None:
        """Give up the port reservation of :meth:`_take_port` (the server has bound the port, or stopped)."""
        reservation, self._reservation = getattr(self, "_reservation", None), None
        if reservation is not None:
            reservation.close()

    @property
    def wire(self) -> "GrpcWire | None":
        """The store's gRPC wire description (None: not gRPC)."""
        return None

    @abc.abstractmethod
    def start(self: _S) -> _S:
        """Start the server and block until it is ready.

        Raises:
            EmulatorNotFoundError: the server is not installed; the message names the install command.
            EmulatorStartError: it exited or was not ready in time.
        """

    @abc.abstractmethod
    def stop(self) -> None:
        """Stop the process this object started, and only that PID."""

    @property
    @abc.abstractmethod
    def pid(self) -> int | None:
        """PID of the server process while it runs, else None."""

    def files(self) -> list[str]:
        """The files and folders of this server that :meth:`stop` removes: what a kept server (``--keep-emulator``)
        leaves behind once its process is killed by hand (:meth:`stop_command`)."""
        return []

    def stop_command(self) -> str:
        """The shell command that stops a kept server and removes its files: ``kill PID && rm -rf FILES``."""
        import shlex

        files = " ".join(shlex.quote(f) for f in self.files())
        return f"kill {self.pid}" + (f" && rm -rf {files}" if files else "")

    @abc.abstractmethod
    def endpoint_env(self, host: str | None = None) -> dict[str, str]:
        """What a client process needs in its environment to reach the server at ``host`` (default :attr:`host`):
        the store's own variables (``FIRESTORE_EMULATOR_HOST``...), ``GOOGLE_CLOUD_PROJECT`` and ``DEDUP_STORE``."""

    @abc.abstractmethod
    def prepare(self, collection: str) -> None:
        """Create what a collection needs before a handler uses it (a table; nothing for Firestore). Idempotent."""

    @abc.abstractmethod
    def wipe(self) -> None:
        """Delete every record of every collection the server holds for :attr:`project`."""

    def settings(self, collection: str = "scheduler_runs", timeout_seconds: float = 20.0,
                 host: str | None = None) -> "Settings":
        """Handler settings that reach the server at ``host`` (default :attr:`host`)."""
        from scheduler_dedup.handler.config.settings import Settings

        return Settings.from_env({**self.endpoint_env(host), "DEDUP_COLLECTION": collection,
                                  "DEDUP_STORE_TIMEOUT_SECONDS": str(timeout_seconds)})

    def connect(self, collection: str = "scheduler_runs", timeout_seconds: float = 20.0,
                host: str | None = None) -> "RunStore":
        """A store client in this process on ``collection``, reaching the server at ``host`` (default :attr:`host`,
        e.g. a fault proxy's)."""
        from scheduler_dedup.handler.stores import open_store

        with environment(self.endpoint_env(host)):
            return open_store(self.settings(collection, timeout_seconds, host))

    def fault_proxy(self, max_workers: int = 64) -> "FaultPlan":
        """A started fault proxy in front of the server (:mod:`scheduler_dedup.local.faults.grpc_proxy`); point clients at
        its ``host`` with :meth:`endpoint_env` and stop it when done.

        Raises:
            NotImplementedError: the store has no fault proxy.
        """
        from scheduler_dedup.local.faults.grpc_proxy import FaultProxy

        if self.wire is None:
            raise NotImplementedError(f"{self.display_name} has no fault proxy")
        return FaultProxy(upstream=self.host, wire=self.wire, max_workers=max_workers).start()

    def shell_env(self, host: str | None = None) -> str:
        """:meth:`endpoint_env` as ``KEY=VALUE`` words for a printed command line."""
        import shlex

        return " ".join(f"{key}={shlex.quote(value)}" for key, value in sorted(self.endpoint_env(host).items()))

    def __enter__(self: _S) -> _S:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


class ProcessStoreServer(StoreServer):
    """A :class:`StoreServer` that is one child process on a reserved loopback port: its start, readiness wait,
    log, PID and stop, shared by every local server.

    Args:
        port: TCP port; when None, a free one reserved (:func:`reserve_port`) until :meth:`stop`.
        start_timeout: seconds to wait for the server to be ready.

    Attributes:
        port: the TCP port; host: ``127.0.0.1:PORT``.
    """

    def __init__(self, port: int | None = None, start_timeout: float = 60.0):
        self._take_port(port)
        self._start_timeout = start_timeout
        self._proc: "subprocess.Popen[bytes] | None" = None
        self._log_path: str | None = None

    def _spawn(self, argv: list[str], ready: "Callable[[], bool]") -> None:
        """Start ``argv`` in a session of its own, its output (stdout and stderr) to a log file of its own, and
        wait until ``ready()`` (which must not raise while the server is still starting).

        Raises:
            EmulatorStartError: the process exited or was not ready within the start timeout (its log tail in the
                message); it is stopped first.
        """
        import os
        import tempfile
        import time

        with signals_held():  # the log file and the process are recorded (for stop()) before Ctrl-C acts
            fd, self._log_path = tempfile.mkstemp(prefix=f"scheduler-dedup-{self.kind}-", suffix=".log")
            # gone at the latest when this object goes or the program exits, should no stop() run
            weakref.finalize(self, _unlink, self._log_path)
            with os.fdopen(fd, "wb") as log:
                self._proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                              start_new_session=True)
        deadline = time.monotonic() + self._start_timeout
        try:
            while time.monotonic() < deadline:
                if ready():
                    return
                if self._proc.poll() is not None:
                    break
                time.sleep(0.05)
        except BaseException:  # Ctrl-C (or a signal turned into SystemExit) while waiting: no orphan server
            self.stop()
            raise
        tail = self.log()[-2000:]
        self.stop()
        raise EmulatorStartError(f"{self.display_name} did not start on port {self.port}; its log ends:\n{tail}")

    @property
    def pid(self) -> int | None:
        """PID of the server process while it runs, else None."""
        return self._proc.pid if self._proc is not None and self._proc.poll() is None else None

    def files(self) -> list[str]:
        """Its log."""
        return [self._log_path] if self._log_path else []

    def log(self) -> str:
        """Return the server's log so far (stdout and stderr)."""
        from pathlib import Path

        if not self._log_path:
            return ""
        try:
            return Path(self._log_path).read_text(errors="replace")
        except OSError:
            return ""

    @property
    def started_pid(self) -> int | None:
        """PID of the process :meth:`start` started, running or ended, until :meth:`stop`."""
        return self._proc.pid if self._proc is not None else None

    def exit_status(self) -> "tuple[int, str] | None":
        """How the process :meth:`start` started ended, when it ended on its own (it crashed, or something killed
        it) and :meth:`stop` has not run yet.

        Returns:
            ``(exit code, the last 3,000 characters of its log)``; the code is negative for a signal (``-9``:
            SIGKILL, as :attr:`subprocess.Popen.returncode` says). None while it runs, before it starts and after
            :meth:`stop`.
        """
        proc = self._proc
        if proc is None or proc.poll() is None:
            return None
        return int(proc.returncode), self.log()[-3000:]

    def restart(self: _S) -> _S:
        """Start the server again on the same port after its process ended (:meth:`exit_status`): its files are
        removed, the port stays reserved throughout, and the new process starts empty.

        Raises:
            RuntimeError: the process still runs.
            EmulatorStartError: as :meth:`start`.
        """
        if self.pid is not None:
            raise RuntimeError(f"{self.display_name} on {self.host} still runs: stop it before a restart")
        reservation, self._reservation = self._reservation, None
        self.stop()
        self._reservation = reservation
        return self.start()

    def stop(self) -> None:
        """Stop the process this object started (and only that PID, :func:`terminate`), give up the port
        reservation, and delete the log file."""
        import os

        proc, self._proc = self._proc, None
        self._release_port()
        terminate(proc)
        log_path, self._log_path = self._log_path, None
        if log_path and os.path.exists(log_path):
            os.unlink(log_path)


#: The stores that have a local server, in the order tests and commands list them (every registered store).
SERVER_KINDS: tuple[str, ...] = tuple(kind.id for kind in registry.STORES if kind.local_server)


def store_server(kind: str, **kwargs: Any) -> StoreServer:
    """A (not yet started) local server for the registered store ``kind``
    (:attr:`~scheduler_dedup.handler.stores.kind.StoreKind.local_server`).

    Raises:
        ValueError: ``kind`` has no local server.
    """
    store = registry.find(kind)
    if store is None or not store.local_server:
        known = ", ".join(k.id for k in registry.STORES if k.local_server)
        raise ValueError(f"no local server for store {kind!r}: use one of {known}")
    server: StoreServer = load(store.local_server)(**kwargs)
    return server
