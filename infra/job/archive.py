"""Build the deploy archive that Cloud Run functions builds into the handler's container.

Layout of the zip (what the Cloud Run functions Python buildpack expects:
https://cloud.google.com/run/docs/runtimes/python-dependencies and
https://cloud.google.com/functions/docs/writing#directory-structure):

* ``main.py`` — the content of ``handler/main.py``; functions-framework serves its
  ``handle_scheduled_job`` (the build config's function target).
* ``scheduler_dedup/handler/**.py`` — every ``.py`` of the handler package. ``scheduler_dedup/`` has
  no ``__init__.py``: it is a namespace package, as in the installed distribution.
* the files of the user's job source directory, at the root, so ``DEDUP_JOB=jobs:run`` imports.
* ``requirements.txt`` — only the handler's runtime dependencies, pinned (:data:`HANDLER_REQUIREMENTS`) plus the
  client library of the one store the service uses (:data:`STORE_REQUIREMENTS`: a Firestore handler installs
  neither the Spanner nor the Redis client, and so on), followed by the lines of the job source's own
  ``requirements.txt`` if it has one.
* ``app.yaml`` — the same archive as an App Engine standard (Python 3) app: ``runtime`` :data:`APP_ENGINE_RUNTIME`
  and ``entrypoint`` :data:`APP_ENGINE_ENTRYPOINT`, gunicorn serving ``main:app`` (functions-framework's WSGI app
  for ``handle_scheduled_job``). App Engine runs the entrypoint with ``$PORT`` set and installs
  ``requirements.txt``; with an entrypoint of its own an app must list gunicorn there itself
  (https://cloud.google.com/appengine/docs/standard/python3/runtime#application_startup). The component
  deploys the archive as a version with this same entrypoint; ``gcloud app deploy`` of the unpacked archive needs
  the handler's ``DEDUP_*`` settings added under ``env_variables``.

The zip is deterministic: entries sorted, fixed timestamps (1980-01-01 00:00:00) and modes, so its
SHA-256 only changes when content changes. The component names the uploaded object after the
hash; a new hash is a new object name, a new function ``build_config.source.storage_source`` (a build) and a new
revision.
"""

from __future__ import annotations

import hashlib
import io
import os
import zipfile
from dataclasses import dataclass
from pathlib import Path

import platformdirs

from scheduler_dedup.handler.stores import registry
from scheduler_dedup.infra.errors import DeployArchiveError

#: Runtime dependencies of ``scheduler_dedup.handler`` on every store, pinned to the versions this project is tested
#: with.
HANDLER_REQUIREMENTS: tuple[str, ...] = (
    "croniter==7.0.0",  # handler/schedule/cron.py: fire times of the schedule
    "functions-framework==3.10.2",
    "google-auth==2.63.0",
    "gunicorn==27.0.1",  # handler/service/server.py's gthread worker; App Engine's entrypoint (app.yaml) runs it
    "python-json-logger==4.2.0",  # handler/core/logs.py
    "requests==2.34.2",
    "tzdata==2026.6",  # time zones for zoneinfo: slim images have no /usr/share/zoneinfo
    "urllib3==2.8.0",  # handler/core/deadline.py: a downstream call's total deadline (requests' own transport)
)
#: Each store's client library (``DEDUP_STORE`` -> pins), imported only by its modules under ``handler/stores/``, and
#: added to the archive of a job on that store only; each store pins its own
#: (:attr:`~scheduler_dedup.handler.stores.kind.StoreKind.requirements`).
STORE_REQUIREMENTS: dict[str, tuple[str, ...]] = {kind.id: kind.requirements for kind in registry.STORES}


def tested_pins() -> tuple[str, ...]:
    """Every pin a deploy archive may hold (:data:`HANDLER_REQUIREMENTS` and each store's), sorted: what
    scripts/_bootstrap.sh installs after the project, so the tests run against exactly what a deployed handler gets
    and not against the newest release pyproject.toml's ranges allow."""
    return tuple(sorted({*HANDLER_REQUIREMENTS, *(pin for pins in STORE_REQUIREMENTS.values() for pin in pins)}))
#: Top-level modules the handler may import, and the pinned distribution that provides each
#: (flask comes with functions-framework). A test keeps this in step with ``handler/*.py``.
HANDLER_IMPORTS: dict[str, str] = {
    "croniter": "croniter",
    "functions_framework": "functions-framework",
    "flask": "functions-framework",
    "gunicorn": "gunicorn",
    "werkzeug": "functions-framework",
    "google": "google-auth",  # google.auth; google.api_core and google.cloud.* come with the store's client
    "grpc": "grpcio",  # the Spanner store's emulator channel; grpcio comes with the Firestore and Spanner clients
    "pythonjsonlogger": "python-json-logger",
    "requests": "requests",
    "urllib3": "urllib3",
    "redis": "redis",
    "scheduler_dedup": "",
}
#: App Engine standard runtime of the archive's ``app.yaml`` and of the version the component deploys.
APP_ENGINE_RUNTIME = "python312"
#: How App Engine starts the handler: gunicorn on ``$PORT`` serving ``main:app`` with the same server settings as
#: functions-framework's on Cloud Run (:mod:`scheduler_dedup.handler.service.gunicorn_config`: one worker of
#: ``SERVER_THREADS`` threads, the header-read deadline worker, ``timeout`` 0 so gunicorn never kills a worker whose
#: job runs long; App Engine's own request deadline still applies).
APP_ENGINE_ENTRYPOINT = "gunicorn -b :$PORT -c python:scheduler_dedup.handler.service.gunicorn_config main:app"
_FIXED_TIME = (1980, 1, 1, 0, 0, 0)
#: Where deploy archives are written by default: the user's cache folder (``~/.cache/scheduler-dedup/archives`` on
#: Linux, platformdirs' ``user_cache_dir``).
ARCHIVE_CACHE = Path(platformdirs.user_cache_dir("scheduler-dedup")) / "archives"
#: Seconds an archive of :data:`ARCHIVE_CACHE` may go unused before a later write removes it (a day: longer than
#: any ``pulumi up`` that reads it).
ARCHIVE_KEEP_SECONDS = 86400
_SKIP_DIRS = {"__pycache__", ".git", ".venv", "venv", ".mypy_cache", ".pytest_cache"}
_RESERVED = ("main.py", "app.yaml", "scheduler_dedup/")


@dataclass(frozen=True)
class DeployArchive:
    """A built archive: its bytes, its SHA-256 (hex) and the sorted list of entry names."""

    content: bytes
    sha256: str
    entries: tuple[str, ...]

    def write(self, directory: Path | None = None) -> Path:
        """Write the zip as ``<sha256>.zip`` into ``directory`` and return its path (Pulumi reads the file when it
        uploads the object, so it must outlive the program).

        The default folder is the user's own cache (:data:`ARCHIVE_CACHE`, mode 0700: a job's source may be
        private); archives there unused for :data:`ARCHIVE_KEEP_SECONDS` are removed, so repeated previews do not
        pile up. Writing the same archive again only marks it used.
        """
        folder = directory or ARCHIVE_CACHE
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        path = folder / f"{self.sha256}.zip"
        if not path.exists() or path.read_bytes() != self.content:
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_bytes(self.content)
            tmp.replace(path)
        else:
            os.utime(path)
        if directory is None:
            _prune(folder, keep=path)
        return path


def _prune(folder: Path, keep: Path) -> None:
    """Remove the archives of ``folder`` not written or used for :data:`ARCHIVE_KEEP_SECONDS` (never ``keep``)."""
    import time

    cutoff = time.time() - ARCHIVE_KEEP_SECONDS
    for old in folder.glob("*.zip"):
        try:
            if old != keep and old.stat().st_mtime < cutoff:
                old.unlink()
        except OSError:  # another program removed or replaced it meanwhile
            pass


def handler_source_dir() -> Path:
    """The folder of the ``scheduler_dedup.handler`` package (``handler/`` in the repo)."""
    import scheduler_dedup.handler as handler_pkg

    files = getattr(handler_pkg, "__file__", None)
    if files:
        return Path(files).resolve().parent
    paths = list(getattr(handler_pkg, "__path__", []))
    if not paths:  # pragma: no cover - an installed package always has one
        raise DeployArchiveError("job_source", "cannot locate the scheduler_dedup.handler package")
    return Path(paths[0]).resolve()


def _walk(root: Path) -> list[Path]:
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS and not d.endswith(".egg-info"))
        for filename in filenames:
            if filename.endswith((".pyc", ".pyo")):
                continue
            found.append(Path(dirpath) / filename)
    return sorted(found)


def requirements_for(store: str) -> tuple[str, ...]:
    """The pinned requirements of a handler on ``store`` (``DEDUP_STORE``).

    Raises:
        DeployArchiveError: field ``store``: no such store.
    """
    if store not in STORE_REQUIREMENTS:
        raise DeployArchiveError("store", f"{store!r} is not a run store: use one of {', '.join(STORE_REQUIREMENTS)}")
    return (*HANDLER_REQUIREMENTS, *STORE_REQUIREMENTS[store])


def archive_files(job_source: Path | None, *, store: str = registry.DEFAULT_STORE,
                  handler_dir: Path | None = None) -> dict[str, bytes]:
    """Return ``{archive path: content}`` of the deploy archive, before zipping.

    Args:
        job_source: the user's job directory, or None for proxy targets (no user code).
        store: the run store the handler uses (``DEDUP_STORE``): its client is pinned (:data:`STORE_REQUIREMENTS`).
        handler_dir: the handler package folder; default :func:`handler_source_dir`.

    Raises:
        DeployArchiveError: ``store`` names no store; ``handler/main.py`` is missing, or the job source has a
            ``main.py`` or a ``scheduler_dedup/`` folder, which would shadow the handler.
    """
    handler = handler_dir or handler_source_dir()
    main = handler / "main.py"
    if not main.is_file():
        raise DeployArchiveError("job_source", f"the handler entry point {main} is missing; reinstall scheduler-dedup")
    files: dict[str, bytes] = {"main.py": main.read_bytes()}
    for path in _walk(handler):
        if path.suffix == ".py":
            files["scheduler_dedup/handler/" + path.relative_to(handler).as_posix()] = path.read_bytes()
    extra_requirements = b""
    if job_source is not None:
        for path in _walk(job_source):
            rel = path.relative_to(job_source).as_posix()
            if rel == "requirements.txt":
                extra_requirements = path.read_bytes()
                continue
            if rel in ("main.py", "app.yaml") or rel.startswith("scheduler_dedup/"):
                raise DeployArchiveError(
                    "job_source",
                    f"{path} would replace the handler's {rel.split('/')[0]}; rename it (the job module is set by 'job')",
                )
            files[rel] = path.read_bytes()
    requirements = (f"# handler runtime dependencies (scheduler-dedup, store {store}), pinned\n"
                    + "\n".join(requirements_for(store)) + "\n")
    if extra_requirements:
        requirements += "# from the job source's requirements.txt\n" + extra_requirements.decode() + "\n"
    files["requirements.txt"] = requirements.encode()
    files["app.yaml"] = app_yaml().encode()
    return files


def app_yaml() -> str:
    """The archive's ``app.yaml``: App Engine standard's runtime and entrypoint for the handler."""
    return ("# App Engine standard (Python 3): gunicorn serves main.py's WSGI app, as the component's version does.\n"
            "# Add the handler's DEDUP_* settings under env_variables before `gcloud app deploy`.\n"
            f"runtime: {APP_ENGINE_RUNTIME}\n"
            f"entrypoint: {APP_ENGINE_ENTRYPOINT}\n")


def build_deploy_archive(job_source: Path | str | None, *, store: str = registry.DEFAULT_STORE,
                         handler_dir: Path | None = None) -> DeployArchive:
    """Build the deterministic deploy zip for a job source directory (or none, for proxy targets).

    Args:
        job_source: directory whose files go to the archive root, or None.
        store: the run store the handler uses (``DEDUP_STORE``): only its client is pinned.
        handler_dir: the handler package folder; default :func:`handler_source_dir`.

    Returns:
        The :class:`DeployArchive` (bytes, SHA-256 hex, entry names).

    Raises:
        DeployArchiveError: see :func:`archive_files`.
    """
    source = Path(job_source).resolve() if job_source is not None else None
    if source is not None and not source.is_dir():
        raise DeployArchiveError("job_source", f"{job_source} is not a directory")
    files = archive_files(source, store=store, handler_dir=handler_dir)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name in sorted(files):
            info = zipfile.ZipInfo(name, date_time=_FIXED_TIME)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, files[name])
    content = buffer.getvalue()
    return DeployArchive(content=content, sha256=hashlib.sha256(content).hexdigest(), entries=tuple(sorted(files)))
