"""Start handler processes on this machine: under functions-framework as Cloud Run runs them (:class:`HandlerServer`),
or with an App Engine ``app.yaml``'s entrypoint as App Engine standard runs them (:class:`AppEngineServer`)."""

from __future__ import annotations

import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time
import weakref
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

from scheduler_dedup.local.servers.held_signals import signals_held


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _source_of(module: str) -> Path:
    import importlib.util

    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise RuntimeError(f"cannot locate {module}")
    return Path(spec.origin)


class _ServerProcess:
    """A server process group started by a subclass (``proc``), with its output in ``log_path``."""

    proc: subprocess.Popen[bytes] | None
    log_path: str

    def log(self) -> str:
        """The process's output so far (its JSON logs); empty before it starts and once its log was removed (its
        owner stopped it)."""
        try:
            return Path(self.log_path).read_text(errors="replace") if self.log_path else ""
        except FileNotFoundError:
            return ""

    def remove_log(self) -> None:
        """Delete the process's log file (after :meth:`stop`), if it has one."""
        if self.log_path:
            _unlink(self.log_path)

    def _own_log(self, prefix: str) -> None:
        """Make :attr:`log_path`, a new temporary file that goes at the latest when this object is collected or
        this program exits (also on Ctrl-C, which ends it by an exception): a caller that never calls
        :meth:`remove_log` leaves nothing in the temp folder."""
        fd, self.log_path = tempfile.mkstemp(prefix=prefix, suffix=".log")
        os.close(fd)
        weakref.finalize(self, _unlink, self.log_path)

    def signal(self, sig: int) -> None:
        """Send ``sig`` (e.g. SIGKILL, SIGSTOP, SIGCONT) to the whole process group; nothing if it has ended.

        ``poll()`` may say "running" of a process that has ended (it answers None while another call waits on the
        process, as an interrupted start's does), so a group already gone is no error."""
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                pass

    def kill(self) -> None:
        """SIGKILL the process group (a crash: no cleanup runs) and reap it."""
        self.signal(signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait(timeout=10)

    def stop(self) -> None:
        """Terminate the process group (gunicorn's arbiter and its worker) and reap it; SIGKILL after 10 s."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill()


class HandlerServer(_ServerProcess):
    """One functions-framework process serving a target on ``127.0.0.1:port``.

    The port is bound here (port 0: the kernel picks a free one) and the listening socket is handed to the
    process (``scheduler_dedup.local.servers.serve_socket``), so no other process can take the port between
    choosing and serving it; :meth:`start` returns when the server's worker says it has loaded the app.

    Args:
        env: environment for the process (added to ours): ``DEDUP_JOB``, ``FIRESTORE_EMULATOR_HOST``...
        baseline: serve the no-dedup baseline instead of the dedup handler.
        target: ``(module or path of a .py file, function)`` to serve instead of either (e.g. a benchmark's variant).
        threads: gunicorn threads (functions-framework's ``THREADS``).

    Attributes:
        url: ``http://127.0.0.1:PORT/``.
    """

    def __init__(self, env: Mapping[str, str], *, baseline: bool = False, target: tuple[str, str] | None = None,
                 threads: int = 8, start_timeout: float = 60.0):
        self._listener: socket.socket | None = socket.create_server(("127.0.0.1", 0), backlog=128)
        self.port = int(self._listener.getsockname()[1])
        self.url = f"http://127.0.0.1:{self.port}/"
        # a local server is a test endpoint's place (DEDUP_ALLOW_TEST_ENDPOINTS), unless the caller says otherwise
        self._env = {"DEDUP_ALLOW_TEST_ENDPOINTS": "1", **os.environ, **env, "THREADS": str(threads),
                     "PYTHONUNBUFFERED": "1"}
        if target is None:
            target = (("scheduler_dedup.local.demo.baseline", "handle_without_dedup") if baseline
                      else ("scheduler_dedup.handler.main", "handle_scheduled_job"))
        source = Path(target[0]) if target[0].endswith(".py") else _source_of(target[0])
        self._source, self._target = source, target[1]
        self._start_timeout = start_timeout
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = ""  # made by start(), with the process: a server never started leaves no file

    def start(self) -> "HandlerServer":
        """Start the process and wait until its worker has loaded the app and serves the port.

        Raises:
            RuntimeError: the process exited (e.g. a ``ConfigError`` at start-up) or was not ready within
                ``start_timeout`` seconds; the message holds its log. Also when called a second time.
        """
        listener, self._listener = self._listener, None
        if listener is None:
            raise RuntimeError("a HandlerServer starts once; make a new one (it gets a new port)")
        ready_read, ready_write = os.pipe()
        try:
            with listener, signals_held():  # self.log_path and self.proc are set before Ctrl-C acts
                self._own_log("handler-")
                with open(self.log_path, "ab") as log:
                    self.proc = subprocess.Popen(
                        [sys.executable, "-m", "scheduler_dedup.local.servers.serve_socket", "--source",
                         str(self._source), "--target", self._target, "--listen-fd", str(listener.fileno()),
                         "--ready-fd", str(ready_write)],
                        env=self._env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                        start_new_session=True, pass_fds=(listener.fileno(), ready_write),
                    )
            # The process holds its own copies: the port is free again once it exits, and the pipe
            # reads end-of-file once it (and its worker) exited.
            os.close(ready_write)
            ready_write = -1
            deadline = time.monotonic() + self._start_timeout
            while (left := deadline - time.monotonic()) > 0:
                if select.select([ready_read], [], [], left)[0]:
                    if os.read(ready_read, 64):
                        return self
                    # End of file: the process exited before its worker was ready (a ConfigError...).
                    try:
                        self.proc.wait(timeout=10)
                    finally:
                        self.stop()
                    raise RuntimeError(f"handler exited with {self.proc.returncode}:\n{self.log()[-3000:]}")
            self.stop()
            raise RuntimeError(f"handler was not serving {self.url} after {self._start_timeout} s:\n"
                               f"{self.log()[-3000:]}")
        except BaseException as exc:  # Ctrl-C (or a signal turned into SystemExit) while waiting: no orphan server
            self.stop()
            if not isinstance(exc, Exception):  # the command is ending: no file of this server is left either
                self.remove_log()
            raise
        finally:
            os.close(ready_read)
            if ready_write >= 0:
                os.close(ready_write)

    def __enter__(self) -> "HandlerServer":
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
        self.remove_log()

    def dump_stacks(self, wait: float = 1.0) -> str:
        """Have the server's worker write every thread's stack to its log, and return the log.

        For a server that stopped answering: the stacks say what its threads wait on. ``wait`` is the seconds
        given to the worker to write; a server that has ended writes nothing."""
        from scheduler_dedup.local.servers.serve_socket import DUMP_STACKS_SIGNAL

        if self.proc is not None and self.proc.poll() is None:
            self.signal(DUMP_STACKS_SIGNAL)
            time.sleep(wait)
        return self.log()


class AppEngineServer(_ServerProcess):
    """The handler served as App Engine standard's Python 3 runtime serves an app: ``app.yaml``'s ``entrypoint``
    run by a shell in the app's folder with ``$PORT`` set (https://cloud.google.com/appengine/docs/standard/python3/runtime#application_startup).

    Args:
        env: environment for the process (added to ours): ``DEDUP_*``, ``FIRESTORE_EMULATOR_HOST``...
        app_dir: the unpacked deploy archive (``main.py``, ``app.yaml``, ``scheduler_dedup/handler/``).
        relative_uri: the path the Scheduler job's App Engine target names; :attr:`url` ends with it.
        start_timeout: seconds to wait for the worker to load the app.

    Attributes:
        url: ``http://127.0.0.1:PORT`` + ``relative_uri``.
        entrypoint: the command run, from ``app.yaml``.
    """

    def __init__(self, env: Mapping[str, str], app_dir: Path, *, relative_uri: str = "/",
                 start_timeout: float = 60.0):
        import yaml

        from scheduler_dedup.local.servers.store_servers import reserve_port

        self.app_dir = app_dir
        self.entrypoint = str(yaml.safe_load((app_dir / "app.yaml").read_text())["entrypoint"])
        self._reservation: socket.socket | None = reserve_port()
        self.port = int(self._reservation.getsockname()[1])
        self.url = f"http://127.0.0.1:{self.port}{relative_uri}"
        bin_dir = str(Path(sys.executable).parent)  # gunicorn of this environment, as App Engine's of requirements.txt
        # App Engine's runtime sets GAE_* on every instance (the handler's caller check fails closed on them); a
        # local server is a test endpoint's place (DEDUP_ALLOW_TEST_ENDPOINTS), unless the caller says otherwise
        self._env = {"GAE_APPLICATION": "s~demo-scheduler-dedup", "GAE_SERVICE": "dedup", "GAE_ENV": "standard",
                     "DEDUP_ALLOW_TEST_ENDPOINTS": "1",
                     **os.environ, **env, "PORT": str(self.port), "PYTHONUNBUFFERED": "1",
                     "PATH": f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}"}
        self._start_timeout = start_timeout
        self.proc: subprocess.Popen[bytes] | None = None
        self._own_log("app-engine-")

    def start(self) -> "AppEngineServer":
        """Run the entrypoint and wait until the worker answers (functions-framework's ``/favicon.ico`` 404 comes
        from the loaded app, never from the handler, so it claims nothing).

        Raises:
            RuntimeError: the process exited (a ``ConfigError`` stops gunicorn's worker from booting) or did not
                answer within ``start_timeout`` seconds; the message holds its log. Also when called a second time.
        """
        import requests

        if self._reservation is None:
            raise RuntimeError("an AppEngineServer starts once; make a new one (it gets a new port)")
        with open(self.log_path, "ab") as log, signals_held():  # self.proc is set before Ctrl-C acts
            self.proc = subprocess.Popen(["/bin/sh", "-c", self.entrypoint], cwd=self.app_dir, env=self._env,
                                         stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=True)
        try:
            deadline = time.monotonic() + self._start_timeout
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"handler exited with {self.proc.returncode}:\n{self.log()[-3000:]}")
                try:
                    if requests.get(f"http://127.0.0.1:{self.port}/favicon.ico", timeout=5).status_code == 404:
                        return self
                except requests.RequestException:
                    pass
                time.sleep(0.1)
            self.stop()
            raise RuntimeError(f"handler was not serving {self.url} after {self._start_timeout} s:\n"
                               f"{self.log()[-3000:]}")
        except BaseException:  # Ctrl-C (or a signal turned into SystemExit) while waiting: no orphan server
            self.stop()
            raise
        finally:
            self._reservation.close()  # gunicorn holds the port now (or never will)
            self._reservation = None

