"""Create a Spanner run records' table where it is missing: ``scheduler-dedup store init --store spanner`` and the
local emulator's set-up. The statements are :mod:`.spanner_schema`'s, the same the component applies.

:func:`init_table` is idempotent: it reads the database's schema (``INFORMATION_SCHEMA``) and sends only what is
missing (the table; on an older table, new record columns, the row deletion policy, the history index), saying
what it did. On the emulator it also creates the instance and the database; on Spanner those must exist (the
component creates them, or `gcloud spanner instances create` / `gcloud spanner databases create`).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from typing import Any

from scheduler_dedup.handler.errors import StoreRefusedError
from scheduler_dedup.handler.stores import spanner_schema
from scheduler_dedup.handler.stores.spanner import EMULATOR_ENV

#: The instance config of instances the emulator creates.
EMULATOR_CONFIG = "emulator-config"
#: Seconds a schema change or creation may take.
OPERATION_TIMEOUT_SECONDS = 300.0


def admin_client(project: str) -> Any:
    """A ``google.cloud.spanner.Client`` for admin calls on ``project`` (honours ``SPANNER_EMULATOR_HOST``), without
    the client's built-in metrics export (which would need Cloud Monitoring permissions)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        from google.cloud import spanner

    return spanner.Client(project=project, disable_builtin_metrics=True)


def init_table(project: str, instance: str, database: str, table: str, *, say: Callable[[str], None] = print,
               client: Any = None, emulator: bool | None = None) -> list[str]:
    """Make ``table`` in ``projects/project/instances/instance/databases/database`` hold run records.

    Args:
        project, instance, database: where the table lives.
        table: the run records' table (``DEDUP_COLLECTION``).
        say: called with one line per thing done or found.
        client: a ``google.cloud.spanner.Client`` (default: :func:`admin_client`).
        emulator: whether ``client`` talks to the emulator (default: whether ``SPANNER_EMULATOR_HOST`` is set).

    Returns:
        The DDL statements sent (empty when everything was in place).

    Raises:
        ValueError: a name is not a Spanner id or table name.
        StoreRefusedError: the instance or database does not exist on Spanner (not the emulator), or the schema
            change was refused.
    """
    from google.api_core import exceptions as gexc

    problem = (spanner_schema.instance_id_problem(instance, "instance")
               or spanner_schema.database_id_problem(database, "database")
               or spanner_schema.table_name_problem(table, "table"))
    if problem:
        raise ValueError(problem)
    client = client or admin_client(project)
    if emulator is None:
        emulator = bool(os.environ.get(EMULATOR_ENV))
    where = f"projects/{project}/instances/{instance}"
    try:
        inst = client.instance(instance, configuration_name=f"projects/{project}/instanceConfigs/{EMULATOR_CONFIG}",
                               display_name=instance, processing_units=100)
        if not inst.exists():
            if not emulator:
                raise StoreRefusedError(
                    f"the Spanner instance {where} does not exist: create it (the component's DedupStore with "
                    "kind=spanner does, or `gcloud spanner instances create`), then run this again",
                    store="Spanner")
            inst.create().result(OPERATION_TIMEOUT_SECONDS)
            say(f"created instance {where} (emulator)")
        db = inst.database(database)
        if not db.exists():
            if not emulator:
                raise StoreRefusedError(
                    f"the Spanner database {where}/databases/{database} does not exist: create it (the component "
                    "does, or `gcloud spanner databases create`), then run this again", store="Spanner")
            statements = spanner_schema.ddl_statements(table)
            db = inst.database(database, ddl_statements=statements)
            db.create().result(OPERATION_TIMEOUT_SECONDS)
            say(f"created database {where}/databases/{database} (emulator) with table {table} and index "
                f"{spanner_schema.index_name(table)}")
            return statements
        statements = missing_statements(db, table)
        if statements:
            db.update_ddl(statements).result(OPERATION_TIMEOUT_SECONDS)
            for statement in statements:
                say(f"applied: {statement.splitlines()[0]}{' ...' if chr(10) in statement else ''}")
        else:
            say(f"table {table} of {where}/databases/{database} is in place (columns, row deletion policy, index): "
                "nothing to do")
        return statements
    except gexc.GoogleAPICallError as exc:
        raise StoreRefusedError(f"Spanner refused setting up table {table}: {type(exc).__name__}: {exc}",
                                store="Spanner") from exc


def missing_statements(db: Any, table: str) -> list[str]:
    """The DDL that makes ``table`` of ``db`` (a ``google.cloud.spanner_v1.database.Database``) hold run records."""
    with db.snapshot(multi_use=True) as snap:
        tables = {row[0]: row[1] for row in snap.execute_sql(
            "SELECT TABLE_NAME, ROW_DELETION_POLICY_EXPRESSION FROM INFORMATION_SCHEMA.TABLES "
            "WHERE TABLE_SCHEMA = ''")}
        name = next((t for t in tables if t.lower() == table.lower()), None)
        if name is None:
            return spanner_schema.ddl_statements(table)
        columns = {row[0] for row in snap.execute_sql(
            "SELECT COLUMN_NAME FROM INFORMATION_SCHEMA.COLUMNS WHERE TABLE_SCHEMA = '' AND TABLE_NAME = @t",
            params={"t": name}, param_types={"t": _string_type()})}
        indexes = {row[0] for row in snap.execute_sql(
            "SELECT INDEX_NAME FROM INFORMATION_SCHEMA.INDEXES WHERE TABLE_SCHEMA = '' AND TABLE_NAME = @t",
            params={"t": name}, param_types={"t": _string_type()})}
    needed = [spanner_schema.KEY_COLUMN, spanner_schema.VERSION_COLUMN, spanner_schema.CREATE_TIME_COLUMN]
    absent = [c for c in needed if c not in columns]
    if absent:
        raise StoreRefusedError(f"table {name} exists but is not a run records' table (no column "
                                f"{', '.join(absent)}): choose another DEDUP_COLLECTION", store="Spanner")
    statements = [spanner_schema.add_column_ddl(name, c) for c in spanner_schema.COLUMNS_BY_NAME if c not in columns]
    if not tables[name]:
        statements.append(f"ALTER TABLE {name} ADD {spanner_schema.row_deletion_policy()}")
    if spanner_schema.index_name(name) not in indexes:
        statements.append(spanner_schema.create_index_ddl(name))
    return statements


def _string_type() -> Any:
    from google.cloud.spanner_v1 import param_types

    return param_types.STRING


def delete_all_rows(client: Any, instance: str, database: str) -> None:
    """Delete every row of every table of a database in one Commit (the emulator's wipe between tests)."""
    from google.cloud.spanner_v1.keyset import KeySet

    db = client.instance(instance).database(database)
    with db.snapshot() as snap:
        tables = [row[0] for row in snap.execute_sql(
            "SELECT TABLE_NAME FROM INFORMATION_SCHEMA.TABLES WHERE TABLE_SCHEMA = ''")]
    if tables:
        with db.batch() as batch:
            for table in tables:
                batch.delete(table, KeySet(all_=True))
