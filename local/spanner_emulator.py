"""Find, start and stop the real Cloud Spanner emulator for tests, the demo, ``run-local``, the campaign and benchmarks.

The emulator ships in the Debian package ``google-cloud-cli-spanner-emulator`` or as the gcloud component
``cloud-spanner-emulator``: the binary ``emulator_main`` under the Cloud SDK's ``bin/cloud_spanner_emulator/``. We
start that binary directly (not the ``gcloud emulators spanner start`` wrapper, whose ``gateway_main`` also serves
REST), keep its PID and stop only that PID.

What the emulator does not do (https://cloud.google.com/spanner/docs/emulator#limitations), and so what no local
test here proves: it runs no TTL deletion (a row deletion policy is accepted and never acts), it runs one
read-write transaction at a time (a new one may abort the one before: ``--abort_current_transaction_probability``)
and hands out regular sessions only (so the store's multiplexed-session path, one session shared by every call,
with precommit tokens, runs only on Spanner), it does not enforce the JSON type's nesting and size limits, and its
commit timestamps come from this machine's clock, not TrueTime.
"""

from __future__ import annotations

import glob
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, ClassVar

from scheduler_dedup.local.store_servers import EmulatorNotFoundError, EmulatorStartError, StoreServer, reserve_port

if TYPE_CHECKING:
    from scheduler_dedup.handler.stores.wire import GrpcWire

__all__ = ["INSTALL_HINT", "SpannerEmulator", "find_emulator"]

INSTALL_HINT = (
    "install it with `gcloud components install cloud-spanner-emulator` "
    "(or the Debian/Ubuntu package `google-cloud-cli-spanner-emulator`), "
    "or set SPANNER_EMULATOR_BINARY to the path of emulator_main"
)
_BINARY_SUBPATH = "bin/cloud_spanner_emulator/emulator_main"
_READY_LINE = "Server address:"


def find_emulator() -> Path:
    """Return the path of the emulator's ``emulator_main``.

    Looks, in order, at ``$SPANNER_EMULATOR_BINARY``, the Debian package's files, the SDK root that
    ``gcloud info`` reports, and the usual SDK install folders.

    Raises:
        EmulatorNotFoundError: none was found; the message names the install command.
    """
    explicit = os.environ.get("SPANNER_EMULATOR_BINARY")
    if explicit:
        if Path(explicit).is_file():
            return Path(explicit)
        raise EmulatorNotFoundError(f"SPANNER_EMULATOR_BINARY={explicit} is not a file; {INSTALL_HINT}")
    candidates: list[str] = []
    if shutil.which("dpkg"):
        out = subprocess.run(["dpkg", "-L", "google-cloud-cli-spanner-emulator"], capture_output=True, text=True,
                             check=False).stdout
        candidates += [line for line in out.splitlines() if line.endswith("/emulator_main")]
    for root in ("/usr/lib/google-cloud-sdk", "/usr/share/google-cloud-sdk", "/opt/google-cloud-sdk",
                 os.path.expanduser("~/google-cloud-sdk")):
        candidates.append(os.path.join(root, _BINARY_SUBPATH))
    if shutil.which("gcloud"):
        try:
            root = subprocess.run(["gcloud", "info", "--format=value(installation.sdk_root)"], capture_output=True,
                                  text=True, check=False, timeout=60).stdout.strip()
        except subprocess.TimeoutExpired:
            root = ""
        if root:
            candidates.append(os.path.join(root, _BINARY_SUBPATH))
    candidates += glob.glob("/usr/lib/google-cloud-sdk/bin/cloud_spanner_emulator/emulator_main")
    for candidate in candidates:
        if Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return Path(candidate)
    raise EmulatorNotFoundError(f"the Cloud Spanner emulator (emulator_main) was not found; {INSTALL_HINT}")


class SpannerEmulator(StoreServer):
    """A running Spanner emulator on 127.0.0.1, as a context manager (a :class:`StoreServer`).

    Its clients use one instance and one database, created on first :meth:`prepare`; each collection is a table.

    Args:
        port: TCP port; when None, a free one reserved (:func:`reserve_port`) until :meth:`stop`.
        project: the project id clients use (``demo-`` prefixed ids never reach a real project).
        instance: the instance id.
        database: the database id.
        abort_probability: the emulator's ``--abort_current_transaction_probability`` in percent (0 to 100): how
            likely a transaction still running is aborted when another one begins (the emulator runs one at a
            time). None keeps the emulator's default.
        start_timeout: seconds to wait for the emulator to serve.

    Attributes:
        host: ``"127.0.0.1:PORT"``, the value for ``SPANNER_EMULATOR_HOST``.
    """

    kind: ClassVar[str] = "spanner"
    display_name: ClassVar[str] = "Spanner emulator"

    def __init__(self, port: int | None = None, project: str = "demo-scheduler-dedup",
                 instance: str = "scheduler-dedup", database: str = "scheduler-dedup",
                 abort_probability: int | None = None, start_timeout: float = 60.0):
        self._reservation: socket.socket | None = None
        if port is None:
            self._reservation = reserve_port()
            port = int(self._reservation.getsockname()[1])
        if abort_probability is not None and not 0 <= abort_probability <= 100:
            raise ValueError(f"abort_probability={abort_probability} is not a percentage: use 0 to 100")
        self.port = port
        self.project = project
        self.instance = instance
        self.database = database
        self.abort_probability = abort_probability
        self.host = f"127.0.0.1:{self.port}"
        self._start_timeout = start_timeout
        self._proc: subprocess.Popen[bytes] | None = None
        self._log_path: str | None = None
        self._prepared: set[str] = set()
        self._admin_client: object | None = None

    def start(self) -> "SpannerEmulator":
        """Start ``emulator_main`` and block until it accepts connections.

        Raises:
            EmulatorNotFoundError: the emulator is not installed.
            EmulatorStartError: the process died or did not serve within ``start_timeout`` seconds.
        """
        binary = find_emulator()
        args = [str(binary), f"--host_port={self.host}"]
        if self.abort_probability is not None:
            args.append(f"--abort_current_transaction_probability={self.abort_probability}")
        fd, self._log_path = tempfile.mkstemp(prefix="spanner-emulator-", suffix=".log")
        with os.fdopen(fd, "wb") as log:
            self._proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                          start_new_session=True)
        deadline = time.monotonic() + self._start_timeout
        while time.monotonic() < deadline:
            if _READY_LINE in self.log() and _accepts(self.port):
                return self
            if self._proc.poll() is not None:
                break
            time.sleep(0.05)
        tail = self.log()[-2000:]
        self.stop()
        raise EmulatorStartError(f"Spanner emulator did not start on port {self.port}; its log ends:\n{tail}")

    @property
    def pid(self) -> int | None:
        """PID of ``emulator_main`` while it runs, else None."""
        return self._proc.pid if self._proc is not None and self._proc.poll() is None else None

    def log(self) -> str:
        """Return the emulator's log so far (stdout and stderr)."""
        if not self._log_path:
            return ""
        return Path(self._log_path).read_text(errors="replace")

    @property
    def wire(self) -> "GrpcWire":
        """Spanner's gRPC data service, for the fault proxy (admin calls go to the emulator directly)."""
        from scheduler_dedup.handler.stores.spanner_wire import SPANNER_WIRE

        return SPANNER_WIRE

    def endpoint_env(self, host: str | None = None) -> dict[str, str]:
        """``SPANNER_EMULATOR_HOST``, ``GOOGLE_CLOUD_PROJECT``, ``DEDUP_STORE=spanner`` and the instance and database."""
        return {"DEDUP_STORE": self.kind, "SPANNER_EMULATOR_HOST": host or self.host,
                "GOOGLE_CLOUD_PROJECT": self.project, "DEDUP_SPANNER_INSTANCE": self.instance,
                "DEDUP_SPANNER_DATABASE": self.database}

    def _admin(self) -> object:
        """One admin client (``google.cloud.spanner.Client``) of the emulator, built on first use."""
        from scheduler_dedup.handler.stores.spanner_admin import admin_client
        from scheduler_dedup.local.store_servers import environment

        if self._admin_client is None:
            with environment({"SPANNER_EMULATOR_HOST": self.host}):
                self._admin_client = admin_client(self.project)
        return self._admin_client

    def prepare(self, collection: str) -> None:
        """Create the instance, the database and the table ``collection`` (with its index) where missing."""
        from scheduler_dedup.handler.stores.spanner_admin import init_table

        if collection in self._prepared:
            return
        init_table(self.project, self.instance, self.database, collection, say=lambda _: None,
                   client=self._admin(), emulator=True)
        self._prepared.add(collection)

    def wipe(self) -> None:
        """Delete every row of every table of the database (the tables stay)."""
        from scheduler_dedup.handler.stores.spanner_admin import delete_all_rows

        if self._prepared:
            delete_all_rows(self._admin(), self.instance, self.database)

    def stop(self) -> None:
        """Stop the ``emulator_main`` process this object started (and only that PID)."""
        proc, self._proc = self._proc, None
        if self._reservation is not None:
            self._reservation.close()
            self._reservation = None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)

    def __enter__(self) -> "SpannerEmulator":
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
        if self._log_path and os.path.exists(self._log_path):
            os.unlink(self._log_path)


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False
