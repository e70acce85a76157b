"""Start handler processes under functions-framework on 127.0.0.1, as Cloud Run would run them."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

from scheduler_dedup.local.emulator import free_port



def _source_of(module: str) -> Path:
    import importlib.util

    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise RuntimeError(f"cannot locate {module}")
    return Path(spec.origin)


class HandlerServer:
    """One functions-framework process serving a target on ``127.0.0.1:port``.

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
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        self._env = {**os.environ, **env, "THREADS": str(threads), "PYTHONUNBUFFERED": "1"}
        if target is None:
            target = (("scheduler_dedup.local.baseline", "handle_without_dedup") if baseline
                      else ("scheduler_dedup.handler.main", "handle_scheduled_job"))
        source = Path(target[0]) if target[0].endswith(".py") else _source_of(target[0])
        self._source, self._target = source, target[1]
        self._start_timeout = start_timeout
        self.proc: subprocess.Popen[bytes] | None = None
        fd, self.log_path = tempfile.mkstemp(prefix="handler-", suffix=".log")
        os.close(fd)

    def start(self) -> "HandlerServer":
        """Start the process and wait until it accepts connections.

        Raises:
            RuntimeError: the process exited (e.g. a ``ConfigError`` at start-up) or timed out;
                the message holds its log.
        """
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "functions_framework", "--source", str(self._source),
                 "--target", self._target, "--host", "127.0.0.1", "--port", str(self.port)],
                env=self._env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        deadline = time.monotonic() + self._start_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"handler exited with {self.proc.returncode}:\n{self.log()[-3000:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return self
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"handler did not listen on {self.port}:\n{self.log()[-3000:]}")

    def log(self) -> str:
        """The process's output so far (its JSON logs)."""
        return Path(self.log_path).read_text(errors="replace")

    def signal(self, sig: int) -> None:
        """Send ``sig`` (e.g. SIGKILL, SIGSTOP, SIGCONT) to the whole process group."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, sig)

    def kill(self) -> None:
        """SIGKILL the process group (a crash: no cleanup runs) and reap it."""
        self.signal(signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait(timeout=10)

    def stop(self) -> None:
        """Terminate the process group and reap it."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill()

    def __enter__(self) -> "HandlerServer":
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
        try:
            os.unlink(self.log_path)
        except OSError:
            pass
