"""Find, start and stop the real Cloud Firestore emulator (Java) for tests, the demo and benchmarks.

The emulator ships in the Debian package ``google-cloud-cli-firestore-emulator`` or as the
gcloud component ``cloud-firestore-emulator``. We start ``java`` directly, not the ``gcloud
emulators firestore start`` wrapper, because killing the wrapper leaves java running; we keep
the PID of the java process and stop only that PID.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

import requests

from scheduler_dedup.local.servers.store_servers import (EmulatorNotFoundError, EmulatorStartError, ProcessStoreServer,
                                                         apt_install_hint)

if TYPE_CHECKING:
    from scheduler_dedup.handler.stores.wire import GrpcWire

__all__ = ["INSTALL_HINT", "EmulatorNotFoundError", "EmulatorStartError", "FirestoreEmulator", "find_emulator_jar",
           "find_java"]

INSTALL_HINT = apt_install_hint("google-cloud-cli-firestore-emulator", "cloud-firestore-emulator",
                                "FIRESTORE_EMULATOR_JAR", "cloud-firestore-emulator.jar")
_MAIN_CLASS = "com.google.cloud.datastore.emulator.firestore.CloudFirestore"
_READY_LINE = "Dev App Server is now running."
_JAR_SUBPATH = "platform/cloud-firestore-emulator/cloud-firestore-emulator.jar"
#: The emulator's JVM sized for several emulators sharing two cores (each pytest-xdist worker starts its own): a
#: bounded heap (by default a JVM takes up to a quarter of the machine's memory, each), thread pools and the garbage
#: collector sized for one core (``ActiveProcessorCount``: Netty's event loops and the JIT's compiler threads count
#: cores), the serial collector (no parallel GC threads), and the client compiler only (less CPU spent compiling
#: while the suite starts). ``FIRESTORE_EMULATOR_JAVA_OPTIONS`` replaces them (space-separated).
JVM_OPTIONS = ("-Xms64m", "-Xmx512m", "-XX:ActiveProcessorCount=1", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")


def find_emulator_jar() -> Path:
    """Return the path of ``cloud-firestore-emulator.jar``.

    Looks, in order, at ``$FIRESTORE_EMULATOR_JAR``, the Debian package's files, the SDK root
    that ``gcloud info`` reports, and the usual SDK install folders.

    Raises:
        EmulatorNotFoundError: no jar was found; the message names the install command.
    """
    explicit = os.environ.get("FIRESTORE_EMULATOR_JAR")
    if explicit:
        if Path(explicit).is_file():
            return Path(explicit)
        raise EmulatorNotFoundError(f"FIRESTORE_EMULATOR_JAR={explicit} is not a file; {INSTALL_HINT}")
    candidates: list[str] = []
    if shutil.which("dpkg"):
        out = subprocess.run(
            ["dpkg", "-L", "google-cloud-cli-firestore-emulator"], capture_output=True, text=True, check=False
        ).stdout
        candidates += [line for line in out.splitlines() if line.endswith("emulator.jar")]
    if shutil.which("gcloud"):
        try:
            root = subprocess.run(
                ["gcloud", "info", "--format=value(installation.sdk_root)"],
                capture_output=True, text=True, check=False, timeout=60,
            ).stdout.strip()
        except subprocess.TimeoutExpired:
            root = ""
        if root:
            candidates.append(os.path.join(root, _JAR_SUBPATH))
    for root in ("/usr/lib/google-cloud-sdk", "/usr/share/google-cloud-sdk", "/opt/google-cloud-sdk",
                 os.path.expanduser("~/google-cloud-sdk")):
        candidates.append(os.path.join(root, _JAR_SUBPATH))
    candidates += glob.glob("/usr/lib/google-cloud-sdk/platform/cloud-firestore-emulator/*.jar")
    for candidate in candidates:
        if Path(candidate).is_file():
            return Path(candidate)
    raise EmulatorNotFoundError(f"the Cloud Firestore emulator jar was not found; {INSTALL_HINT}")


def find_java() -> str:
    """Return the ``java`` executable (Java 11 or newer is needed by the emulator).

    Raises:
        EmulatorNotFoundError: no ``java`` on PATH or in ``$JAVA_HOME/bin``.
    """
    java_home = os.environ.get("JAVA_HOME")
    if java_home and Path(java_home, "bin", "java").is_file():
        return str(Path(java_home, "bin", "java"))
    found = shutil.which("java")
    if not found:
        raise EmulatorNotFoundError(
            "java was not found on PATH; the Firestore emulator needs a Java 11+ runtime "
            "(install it with `sudo apt-get install -y default-jre-headless`)"
        )
    return found


class FirestoreEmulator(ProcessStoreServer):
    """A running Firestore emulator on 127.0.0.1, as a context manager (a :class:`StoreServer`).

    Args:
        port: TCP port; when None, a free one reserved (:func:`reserve_port`) until :meth:`stop`.
        project: the project id clients use (``demo-`` prefixed ids never reach a real project).
        start_timeout: seconds to wait for ``Dev App Server is now running.``.

    Attributes:
        host: ``"127.0.0.1:PORT"``, the value for ``FIRESTORE_EMULATOR_HOST``.
    """

    kind: ClassVar[str] = "firestore"
    display_name: ClassVar[str] = "Firestore emulator"

    def __init__(self, port: int | None = None, project: str = "demo-scheduler-dedup", start_timeout: float = 60.0):
        super().__init__(port, start_timeout)
        self.project = project

    def start(self) -> "FirestoreEmulator":
        """Start java and block until the emulator is ready.

        Raises:
            EmulatorNotFoundError: java or the jar is missing.
            EmulatorStartError: the process died or was not ready within ``start_timeout`` seconds.
        """
        java, jar = find_java(), find_emulator_jar()
        options = os.environ.get("FIRESTORE_EMULATOR_JAVA_OPTIONS")
        jvm = options.split() if options is not None else list(JVM_OPTIONS)
        self._spawn([java, *jvm, "-cp", str(jar), _MAIN_CLASS, "start", "--host=127.0.0.1", f"--port={self.port}"],
                    lambda: _READY_LINE in self.log())
        return self

    @property
    def wire(self) -> "GrpcWire":
        """Firestore's gRPC service, for the fault proxy."""
        from scheduler_dedup.handler.stores.firestore.wire import FIRESTORE_WIRE

        return FIRESTORE_WIRE

    def endpoint_env(self, host: str | None = None) -> dict[str, str]:
        """``FIRESTORE_EMULATOR_HOST``, ``GOOGLE_CLOUD_PROJECT`` and ``DEDUP_STORE=firestore``."""
        return {"DEDUP_STORE": self.kind, "FIRESTORE_EMULATOR_HOST": host or self.host,
                "GOOGLE_CLOUD_PROJECT": self.project}

    def prepare(self, collection: str) -> None:
        """Nothing: a Firestore collection exists once a document is written to it."""

    def wipe(self) -> None:
        """Delete every document of ``self.project``'s default database."""
        url = f"http://{self.host}/emulator/v1/projects/{self.project}/databases/(default)/documents"
        requests.delete(url, timeout=60).raise_for_status()  # deletes every document: real work
