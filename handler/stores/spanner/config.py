"""The Spanner store's settings and their checks, without the Spanner client (the component and the policy pack use
them too).

Its environment variables are declared here (:func:`~scheduler_dedup.handler.core.variables.declare`), once, for the
reference page. The table is ``DEDUP_COLLECTION`` and the project ``GOOGLE_CLOUD_PROJECT``, as for Firestore.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from scheduler_dedup.handler.core.errors import ConfigError
from scheduler_dedup.handler.stores.spanner.schema import database_id_problem, instance_id_problem, table_name_problem
from scheduler_dedup.handler.core.variables import declare
from scheduler_dedup.handler.stores.firestore import config as firestore_config

if TYPE_CHECKING:
    from scheduler_dedup.handler.config.settings import Settings

#: Variables that name a Spanner store's database; set while ``DEDUP_STORE`` is another store, they are a mistake.
SPANNER_VARIABLES = ("DEDUP_SPANNER_INSTANCE", "DEDUP_SPANNER_DATABASE")
EMULATOR_VARIABLE = "SPANNER_EMULATOR_HOST"

declare("DEDUP_SPANNER_INSTANCE", "store", """
    With `DEDUP_STORE=spanner`, required: the Spanner instance id (2 to 64 lower-case letters, digits and `-`, a
    letter first, not ending in `-`; [instance ids](https://cloud.google.com/spanner/docs/create-manage-instances)).
    See [Spanner](../stores.md#cloud-spanner).""",
        component="the store's instance (a job on a `DedupStore` of kind `spanner`, or `spanner_instance`)")
declare("DEDUP_SPANNER_DATABASE", "store", """
    With `DEDUP_STORE=spanner`, required: the Spanner database id holding the run records' table `DEDUP_COLLECTION`
    (2 to 30 lower-case letters, digits, `_` and `-`, a letter first;
    [database ids](https://cloud.google.com/spanner/docs/create-manage-databases)). `scheduler-dedup store init
    --store spanner` creates the table and its index.""",
        component="the store's database (a job's own: `database_id`, default `<name, cut to 24>-dedup`)")
declare(EMULATOR_VARIABLE, "local", """
    `host:port` of a Spanner emulator: the Spanner client then talks to it over plain gRPC, without credentials.
    `scheduler-dedup demo --store spanner`, `run-local --store spanner`, `store init` and the tests use it.""",
        reader="the Spanner client")


@dataclass(frozen=True)
class SpannerConfig:
    """The Spanner store's own settings, read from the environment by :meth:`from_env` (the core
    :class:`~scheduler_dedup.handler.config.settings.Settings` holds it as ``store_config``). The table is
    ``DEDUP_COLLECTION`` and the project ``GOOGLE_CLOUD_PROJECT``, as for Firestore.

    Attributes:
        instance: ``DEDUP_SPANNER_INSTANCE``, "" when unset.
        database: ``DEDUP_SPANNER_DATABASE``, "" when unset.
        emulator_host: ``SPANNER_EMULATOR_HOST``, ``host:port`` of an emulator, or None (real Spanner).
    """

    instance: str = ""
    database: str = ""
    emulator_host: str | None = None
    where: ClassVar[Mapping[str, str]] = {"instance": SPANNER_VARIABLES[0], "database": SPANNER_VARIABLES[1]}

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> "SpannerConfig":
        """Read the Spanner variables of ``env``."""
        return cls(instance=env.get("DEDUP_SPANNER_INSTANCE", "").strip(),
                   database=env.get("DEDUP_SPANNER_DATABASE", "").strip(),
                   emulator_host=env.get(EMULATOR_VARIABLE, "").strip() or None)

    @staticmethod
    def env_problem(env: Mapping[str, str], store: str) -> str | None:
        """Why ``env`` (for a handler on ``store``) is refused because of a Spanner variable, or None: one set while
        ``DEDUP_STORE`` is another store; or, on Spanner, a Firestore database named (``DEDUP_DATABASE``) where the
        Spanner database was meant."""
        if store == "spanner":
            database = env.get(firestore_config.DATABASE_VARIABLE, firestore_config.DEFAULT_DATABASE)
            if database != firestore_config.DEFAULT_DATABASE:
                return (f"DEDUP_DATABASE={database!r} names a Firestore database, but DEDUP_STORE=spanner: name the "
                        "Spanner database in DEDUP_SPANNER_DATABASE and remove DEDUP_DATABASE")
            return None
        given = [name for name in SPANNER_VARIABLES if env.get(name, "").strip()]
        if given:
            return (f"{' and '.join(given)} set, but DEDUP_STORE={store}: set DEDUP_STORE=spanner to use that Spanner "
                    f"database, or remove {' and '.join(given)}")
        return None

    def check(self, settings: "Settings") -> None:
        """The Spanner settings' checks: both ids present and well-formed, and the table name a Spanner table's.

        Raises:
            ConfigError: the first problem, naming the variable and the fix.
        """
        missing = [name for name, value in zip(SPANNER_VARIABLES, (self.instance, self.database)) if not value]
        if missing:
            raise ConfigError(f"DEDUP_STORE=spanner needs {' and '.join(missing)}: set the Spanner instance and "
                              "database ids that hold the run records' table (`scheduler-dedup store init --store "
                              "spanner` creates the table)")
        problem = (instance_id_problem(self.instance) or database_id_problem(self.database)
                   or table_name_problem(settings.collection))
        if problem:
            raise ConfigError(problem)
