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
import socket
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from scheduler_dedup.local.servers.store_servers import EmulatorNotFoundError, ProcessStoreServer, apt_install_hint

if TYPE_CHECKING:
    from scheduler_dedup.handler.stores.wire import GrpcWire

__all__ = ["INSTALL_HINT", "SpannerEmulator", "find_emulator"]

INSTALL_HINT = apt_install_hint("google-cloud-cli-spanner-emulator", "cloud-spanner-emulator",
                                "SPANNER_EMULATOR_BINARY", "emulator_main")
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


class SpannerEmulator(ProcessStoreServer):
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
        if abort_probability is not None and not 0 <= abort_probability <= 100:
            raise ValueError(f"abort_probability={abort_probability} is not a percentage: use 0 to 100")
        super().__init__(port, start_timeout)
        self.project = project
        self.instance = instance
        self.database = database
        self._base_database = database
        self._generation = 0
        self.abort_probability = abort_probability
        self._prepared: set[str] = set()
        self._admin_client: object | None = None

    def start(self) -> "SpannerEmulator":
        """Start ``emulator_main`` and block until it accepts connections.

        Raises:
            EmulatorNotFoundError: the emulator is not installed.
            EmulatorStartError: the process died or did not serve within ``start_timeout`` seconds.
        """
        binary = find_emulator()
        # the change-stream churning thread wakes every 20 s by default; no store here uses change streams
        args = [str(binary), f"--host_port={self.host}", "--enable_change_stream_churning=false"]
        if self.abort_probability is not None:
            args.append(f"--abort_current_transaction_probability={self.abort_probability}")
        self._spawn(args, lambda: _READY_LINE in self.log() and _accepts(self.port))
        return self

    def restart(self) -> "SpannerEmulator":
        """As :meth:`ProcessStoreServer.restart`, then create again the tables :meth:`prepare` had made (the new
        process starts with no instance, database or table)."""
        super().restart()
        collections, self._prepared, self._admin_client = self._prepared, set(), None
        self.database = self._base_database
        for collection in sorted(collections):
            self.prepare(collection)
        return self

    @property
    def wire(self) -> "GrpcWire":
        """Spanner's gRPC data service, for the fault proxy (admin calls go to the emulator directly)."""
        from scheduler_dedup.handler.stores.spanner.wire import SPANNER_WIRE

        return SPANNER_WIRE

    def endpoint_env(self, host: str | None = None) -> dict[str, str]:
        """``SPANNER_EMULATOR_HOST``, ``GOOGLE_CLOUD_PROJECT``, ``DEDUP_STORE=spanner`` and the instance and database."""
        return {"DEDUP_STORE": self.kind, "SPANNER_EMULATOR_HOST": host or self.host,
                "GOOGLE_CLOUD_PROJECT": self.project, "DEDUP_SPANNER_INSTANCE": self.instance,
                "DEDUP_SPANNER_DATABASE": self.database}

    def _admin(self) -> object:
        """One admin client (``google.cloud.spanner.Client``) of the emulator, built on first use."""
        from scheduler_dedup.handler.stores.spanner.admin import admin_client
        from scheduler_dedup.local.servers.store_servers import environment

        if self._admin_client is None:
            with environment({"SPANNER_EMULATOR_HOST": self.host}):
                self._admin_client = admin_client(self.project)
        return self._admin_client

    def prepare(self, collection: str) -> None:
        """Create the instance, the database and the table ``collection`` (with its index) where missing."""
        from scheduler_dedup.handler.stores.spanner.admin import init_table

        if collection in self._prepared:
            return
        init_table(self.project, self.instance, self.database, collection, say=lambda _: None,
                   client=self._admin(), emulator=True)
        self._prepared.add(collection)

    def wipe(self, patience_seconds: float = 15.0) -> None:
        """Delete every row of every table of the database (the tables stay).

        A transaction a test left open (its client gone, or its answer lost on a fault proxy) makes the emulator
        abort every other transaction on that database, for a while or for good
        (https://github.com/GoogleCloudPlatform/cloud-spanner-emulator/issues/137). The wipe retries for
        ``patience_seconds``, then moves to a fresh database with the same tables: :attr:`database` changes, and
        what is read from :meth:`endpoint_env` after the wipe names the new one.
        """
        from scheduler_dedup.handler.stores.spanner.admin import delete_all_rows

        if not self._prepared or delete_all_rows(self._admin(), self.instance, self.database, patience_seconds):
            return
        self._generation += 1
        self.database = f"{self._base_database}-{self._generation}"
        collections, self._prepared = self._prepared, set()
        for collection in sorted(collections):
            self.prepare(collection)


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False
