"""The Firestore store's settings and their checks, without the Firestore client (the component and the policy pack
use them too).

Its environment variables are declared here (:func:`~scheduler_dedup.handler.core.variables.declare`), once, for the
reference page. The collection is ``DEDUP_COLLECTION`` and the project ``GOOGLE_CLOUD_PROJECT``, as for every store.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from scheduler_dedup.handler.core.errors import ConfigError
from scheduler_dedup.handler.core.variables import declare

if TYPE_CHECKING:
    from scheduler_dedup.handler.config.settings import Settings

DEFAULT_DATABASE = "(default)"
DATABASE_VARIABLE = "DEDUP_DATABASE"
EMULATOR_VARIABLE = "FIRESTORE_EMULATOR_HOST"
# Database ids: https://cloud.google.com/firestore/docs/manage-databases#database_id
DATABASE_ID_RE = re.compile(r"^(\(default\)|[a-z][a-z0-9-]{2,61}[a-z0-9])$")

declare(DATABASE_VARIABLE, "store", """
    Firestore database id: `(default)`, or 4 to 63 characters of lower-case letters, digits and `-`, starting with a
    letter ([database ids](https://cloud.google.com/firestore/docs/manage-databases#database_id)).""",
        default=DEFAULT_DATABASE, component="the job's database (`database_id`, default `<name>-dedup`)")
declare(EMULATOR_VARIABLE, "local", """
    `host:port` of a Firestore emulator: the Firestore client then talks to it instead of Firestore, without
    credentials. `scheduler-dedup demo`, `run-local` and the tests set it for the emulator they start.""",
        reader="the Firestore client")


def database_problem(database: str) -> str | None:
    """Why ``database`` is not a Firestore database id (the message names ``DEDUP_DATABASE`` and the fix), or None."""
    if DATABASE_ID_RE.match(database):
        return None
    return (f"{DATABASE_VARIABLE}={database!r} is not a Firestore database id: use (default) or 4-63 characters of "
            "lower-case letters, digits and '-', starting with a letter")


@dataclass(frozen=True)
class FirestoreConfig:
    """The Firestore store's own settings, read from the environment by :meth:`from_env` (the core
    :class:`~scheduler_dedup.handler.config.settings.Settings` holds it as ``store_config``).

    Attributes:
        database: ``DEDUP_DATABASE``, the Firestore database id (default ``(default)``).
        emulator_host: ``FIRESTORE_EMULATOR_HOST``, ``host:port`` of an emulator, or None (real Firestore). The
            Firestore client reads the variable itself; the store names it in its hints.
    """

    database: str = DEFAULT_DATABASE
    emulator_host: str | None = None
    where: ClassVar[Mapping[str, str]] = {"database": DATABASE_VARIABLE}

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> "FirestoreConfig":
        """Read the Firestore variables of ``env``."""
        return cls(database=env.get(DATABASE_VARIABLE, DEFAULT_DATABASE),
                   emulator_host=env.get(EMULATOR_VARIABLE, "").strip() or None)

    @staticmethod
    def env_problem(env: Mapping[str, str], store: str) -> str | None:
        """Why ``env`` (for a handler on ``store``) is refused because of a Firestore variable, or None: a
        ``DEDUP_DATABASE`` that is no database id is refused whatever the store (on Firestore by :meth:`check`)."""
        raw = env.get(DATABASE_VARIABLE)
        return None if raw is None or store == "firestore" else database_problem(raw)

    def check(self, settings: "Settings") -> None:
        """The Firestore settings' checks.

        Raises:
            ConfigError: ``DEDUP_DATABASE`` is no database id.
        """
        problem = database_problem(self.database)
        if problem:
            raise ConfigError(problem)
