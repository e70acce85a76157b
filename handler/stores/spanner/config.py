"""The Spanner store's settings and their checks, without the Spanner client (the component and the policy pack use
them too).

Its environment variables are declared here (:func:`~scheduler_dedup.handler.core.variables.declare`), once, for the
reference page. The table is ``DEDUP_COLLECTION`` and the project ``GOOGLE_CLOUD_PROJECT``, as for Firestore.
"""

from __future__ import annotations

from scheduler_dedup.handler.core.errors import ConfigError
from scheduler_dedup.handler.stores.spanner.schema import database_id_problem, instance_id_problem, table_name_problem
from scheduler_dedup.handler.core.variables import declare

#: Variables that name a Spanner store's database; set while ``DEDUP_STORE`` is another store, they are a mistake.
SPANNER_VARIABLES = ("DEDUP_SPANNER_INSTANCE", "DEDUP_SPANNER_DATABASE")

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
declare("SPANNER_EMULATOR_HOST", "local", """
    `host:port` of a Spanner emulator: the Spanner client then talks to it over plain gRPC, without credentials.
    `scheduler-dedup demo --store spanner`, `run-local --store spanner`, `store init` and the tests use it.""",
        reader="the Spanner client")


def check_spanner_settings(store: str, instance: str, database: str, firestore_database: str, collection: str,
                           default_firestore_database: str) -> None:
    """The Spanner settings' checks: present with ``DEDUP_STORE=spanner``, absent otherwise, and well-formed.

    Args:
        store: ``DEDUP_STORE``.
        instance, database: ``DEDUP_SPANNER_INSTANCE`` and ``DEDUP_SPANNER_DATABASE`` ("" when unset).
        firestore_database: ``DEDUP_DATABASE``, which a Spanner store must leave at ``default_firestore_database``.
        collection: ``DEDUP_COLLECTION``, the table's name on Spanner.

    Raises:
        ConfigError: the first problem, naming the variable and the fix.
    """
    values = (instance, database)
    if store != "spanner":
        given = [name for name, value in zip(SPANNER_VARIABLES, values) if value]
        if given:
            raise ConfigError(f"{' and '.join(given)} set, but DEDUP_STORE={store}: set DEDUP_STORE=spanner to use "
                              f"that Spanner database, or remove {' and '.join(given)}")
        return
    missing = [name for name, value in zip(SPANNER_VARIABLES, values) if not value]
    if missing:
        raise ConfigError(f"DEDUP_STORE=spanner needs {' and '.join(missing)}: set the Spanner instance and database "
                          "ids that hold the run records' table (`scheduler-dedup store init --store spanner` "
                          "creates the table)")
    if firestore_database != default_firestore_database:
        raise ConfigError(f"DEDUP_DATABASE={firestore_database!r} names a Firestore database, but DEDUP_STORE=spanner: "
                          "name the Spanner database in DEDUP_SPANNER_DATABASE and remove DEDUP_DATABASE")
    problem = instance_id_problem(instance) or database_id_problem(database) or table_name_problem(collection)
    if problem:
        raise ConfigError(problem)
