"""The job's secret values, learnt at start-up so that no answer, record, log line or ``runs`` output carries them.

Two sources, both names only (no value ever sits in a setting):

- ``DEDUP_SECRET_ENV`` (variable names) and ``DEDUP_SECRET_FILES`` (paths of mounted secret files), which the
  component sets from the job's ``secret_env`` and ``secret_files``;
- any other variable whose name marks it secret, as Sentry's default data scrubber judges a field by its name
  (https://docs.sentry.io/security-legal-pii/scrubbing/server-side-scrubbing/: names containing ``password``,
  ``secret``, ``passwd``, ``api_key``, ``apikey``, ``auth``, ``credentials``, ``mysql_pwd``, ``privatekey``,
  ``private_key``, ``token``, ``bearer``), so a hand-written deployment is covered too. The handler's own declared
  settings are not the job's secrets and are left out.

Each value goes to :func:`~scheduler_dedup.handler.core.safe_text.hide_values`, which
:func:`~scheduler_dedup.handler.core.safe_text.scrub_secrets` (every answer, record, log line) then applies.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from scheduler_dedup.handler.config.environment import job_environment
from scheduler_dedup.handler.core.safe_text import hide_values
from scheduler_dedup.handler.core.variables import VARIABLES

log = logging.getLogger("scheduler_dedup")

SECRET_ENV = "DEDUP_SECRET_ENV"
SECRET_FILES = "DEDUP_SECRET_FILES"
#: Sentry's default sensitive field names (the page in the module docstring), compared lower-cased, as parts.
SECRET_NAME_PARTS = ("password", "secret", "passwd", "api_key", "apikey", "auth", "credential", "mysql_pwd",
                     "privatekey", "private_key", "token", "bearer")
#: Bytes read of one mounted secret file at most (a Secret Manager version holds at most 64 KiB).
MAX_SECRET_FILE_BYTES = 65536


def split_names(raw: str) -> list[str]:
    """A comma-separated list of names or paths, blanks dropped."""
    return [item.strip() for item in raw.split(",") if item.strip()]


def is_secret_name(name: str) -> bool:
    """True when the variable ``name`` holds a secret by its name (:data:`SECRET_NAME_PARTS`), and is not one of
    the handler's own declared settings."""
    lowered = name.lower()
    return name not in VARIABLES and any(part in lowered for part in SECRET_NAME_PARTS)


def secret_values(environ: Mapping[str, str]) -> list[str]:
    """The values of the job's secret variables and mounted secret files in ``environ`` (the raw environment).

    A listed file that cannot be read is logged as a WARNING (its name, never content) and skipped.
    """
    names = set(split_names(environ.get(SECRET_ENV, ""))) | {n for n in environ if is_secret_name(n)}
    values = [environ[n] for n in sorted(names) if environ.get(n)]
    for path in split_names(environ.get(SECRET_FILES, "")):
        try:
            with open(path, "rb") as file:
                content = file.read(MAX_SECRET_FILE_BYTES).decode("utf-8", "surrogateescape")
        except OSError as exc:
            log.warning("%s lists %s, which could not be read (%s): its value is not scrubbed", SECRET_FILES, path,
                        type(exc).__name__)
            continue
        values.append(content)
        values.extend(line for line in content.splitlines() if line.strip() != content.strip())
    return values


def learn_secret_values(environ: Mapping[str, str] | None = None) -> int:
    """Register the job's secret values in ``environ`` (default this process's, ``os.environ``) for scrubbing
    (:func:`secret_values`); returns how many."""
    return hide_values(secret_values(job_environment(environ)))
