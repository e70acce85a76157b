"""Create a Spanner run records' table where it is missing: ``scheduler-dedup store init --store spanner`` and the
local emulator's set-up. The statements are :mod:`.schema`'s, the same the component applies.

:func:`init_table` is idempotent: it reads the database's schema (``INFORMATION_SCHEMA``) and sends only what is
missing (the table; on an older table, new record columns, the row deletion policy, the history index), saying
what it did. A table that differs from the schema where the store relies on it is refused, with every difference
named (:func:`table_problems`), before anything is sent. On the emulator it also creates the instance and the
database; on Spanner those must exist (the component creates them, or `gcloud spanner instances create` /
`gcloud spanner databases create`).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scheduler_dedup.handler.core.errors import StoreRefusedError
from scheduler_dedup.handler.stores.spanner import schema as spanner_schema

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
               client: Any = None, emulator: bool = False) -> list[str]:
    """Make ``table`` in ``projects/project/instances/instance/databases/database`` hold run records.

    Args:
        project, instance, database: where the table lives.
        table: the run records' table (``DEDUP_COLLECTION``).
        say: called with one line per thing done or found.
        client: a ``google.cloud.spanner.Client`` (default: :func:`admin_client`).
        emulator: whether ``client`` talks to the emulator (whose caller knows: it set ``SPANNER_EMULATOR_HOST``).

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
    """The DDL that makes ``table`` of ``db`` (a ``google.cloud.spanner_v1.database.Database``) hold run records.

    Raises:
        StoreRefusedError: the table exists but differs from the schema in a way no added statement mends
            (:func:`table_problems`); nothing is sent.
    """
    with db.snapshot(multi_use=True) as snap:
        tables = {row[0]: row[1] for row in snap.execute_sql(
            "SELECT TABLE_NAME, ROW_DELETION_POLICY_EXPRESSION FROM INFORMATION_SCHEMA.TABLES "
            "WHERE TABLE_SCHEMA = ''")}
        name = next((t for t in tables if t.lower() == table.lower()), None)
        if name is None:
            return spanner_schema.ddl_statements(table)
        where = {"params": {"t": name}, "param_types": {"t": _string_type()}}
        columns = {row[0].lower(): ColumnInfo(row[0], row[1], row[2] == "YES", row[3] is not None,
                                              row[4] not in (None, "NEVER"))
                   for row in snap.execute_sql(
                       "SELECT COLUMN_NAME, SPANNER_TYPE, IS_NULLABLE, COLUMN_DEFAULT, IS_GENERATED "
                       "FROM INFORMATION_SCHEMA.COLUMNS WHERE TABLE_SCHEMA = '' AND TABLE_NAME = @t", **where)}
        commit_timestamps = {row[0].lower() for row in snap.execute_sql(
            "SELECT COLUMN_NAME FROM INFORMATION_SCHEMA.COLUMN_OPTIONS WHERE TABLE_SCHEMA = '' AND TABLE_NAME = @t "
            "AND OPTION_NAME = 'allow_commit_timestamp' AND UPPER(OPTION_VALUE) = 'TRUE'", **where)}
        primary_key = [row[0].lower() for row in snap.execute_sql(
            "SELECT COLUMN_NAME FROM INFORMATION_SCHEMA.INDEX_COLUMNS WHERE TABLE_SCHEMA = '' AND TABLE_NAME = @t "
            "AND INDEX_NAME = 'PRIMARY_KEY' ORDER BY ORDINAL_POSITION", **where)]
        indexes = {row[0].lower() for row in snap.execute_sql(
            "SELECT INDEX_NAME FROM INFORMATION_SCHEMA.INDEXES WHERE TABLE_SCHEMA = '' AND TABLE_NAME = @t", **where)}
    needed = [spanner_schema.KEY_COLUMN, spanner_schema.VERSION_COLUMN, spanner_schema.CREATE_TIME_COLUMN]
    absent = [c for c in needed if c not in columns]
    if absent:
        raise StoreRefusedError(f"table {name} exists but is not a run records' table (no column "
                                f"{', '.join(absent)}): choose another DEDUP_COLLECTION", store="Spanner")
    problems = table_problems(name, columns, commit_timestamps, primary_key, tables[name])
    if problems:
        raise StoreRefusedError(
            f"table {name} exists but cannot hold run records as the store writes them: {'; '.join(problems)}. "
            "alter it to match the schema (the DDL of spanner_schema.create_table_ddl) or choose another "
            "DEDUP_COLLECTION; nothing was sent",
            store="Spanner")
    statements = [spanner_schema.add_column_ddl(name, c) for c in spanner_schema.COLUMNS_BY_NAME if c not in columns]
    if not tables[name]:
        statements.append(f"ALTER TABLE {name} ADD {spanner_schema.row_deletion_policy()}")
    if spanner_schema.index_name(name).lower() not in indexes:
        statements.append(spanner_schema.create_index_ddl(name))
    return statements


@dataclass(frozen=True)
class ColumnInfo:
    """One column of an existing table, as ``INFORMATION_SCHEMA.COLUMNS`` reports it.

    Attributes:
        name: the column's name as created.
        type: ``SPANNER_TYPE``, e.g. ``STRING(MAX)``.
        nullable: ``IS_NULLABLE`` is ``YES``.
        has_default: the column has a ``DEFAULT``.
        generated: the column is generated (``AS (...)``): no write may set it.
    """

    name: str
    type: str
    nullable: bool
    has_default: bool = False
    generated: bool = False


def table_problems(table: str, columns: Mapping[str, ColumnInfo], commit_timestamps: set[str],
                   primary_key: Sequence[str], policy_expression: str | None) -> list[str]:
    """What in an existing run records' table breaks the store's writes or replays, or deletes records before their
    ``expire_at`` (an absent record column or policy is not a problem: ``store init`` adds it).

    Args:
        table: the table's name, for the fix named.
        columns: lower-cased column name -> the column.
        commit_timestamps: lower-cased names of the columns with ``allow_commit_timestamp=true``.
        primary_key: lower-cased primary key columns, in order.
        policy_expression: ``ROW_DELETION_POLICY_EXPRESSION``, or None/"" without a policy.

    Returns:
        One phrase per problem (empty: the table serves as it is).
    """
    problems: list[str] = []
    key = spanner_schema.KEY_COLUMN
    if list(primary_key) != [key]:
        problems.append(f"its primary key is ({', '.join(primary_key)}), not ({key})")
    key_type = columns[key].type.upper()
    length = key_type[len("STRING("):-1] if key_type.startswith("STRING(") and key_type.endswith(")") else ""
    if not (length == "MAX" or (length.isdigit() and int(length) >= 64)):
        problems.append(f"column {key} is {columns[key].type}, but run ids are 64-character strings (STRING(64))")
    for stamp in (spanner_schema.VERSION_COLUMN, spanner_schema.CREATE_TIME_COLUMN):
        if columns[stamp].type.upper() != "TIMESTAMP" or stamp not in commit_timestamps:
            problems.append(f"column {stamp} must be TIMESTAMP OPTIONS (allow_commit_timestamp=true) (every write "
                            "stores its commit timestamp there)")
    for column in spanner_schema.COLUMNS:
        found = columns.get(column.name.lower())
        if found is None:
            continue
        if found.type.upper() != column.type or found.generated:
            problems.append(f"column {found.name} is {found.type}{' (generated)' if found.generated else ''}, "
                            f"not {column.type}")
        elif column.commit_timestamp and column.name.lower() not in commit_timestamps:
            problems.append(f"column {found.name} lacks OPTIONS (allow_commit_timestamp=true)")
        if not found.nullable:
            problems.append(f"column {found.name} is NOT NULL, but the store writes NULL to it")
    ours = {key, spanner_schema.VERSION_COLUMN, spanner_schema.CREATE_TIME_COLUMN,
            *(c.name.lower() for c in spanner_schema.COLUMNS)}
    for lowered, found in columns.items():
        if lowered not in ours and not found.nullable and not found.has_default and not found.generated:
            problems.append(f"column {found.name} is NOT NULL without a DEFAULT, but the store never writes it "
                            "(give it a DEFAULT or make it nullable)")
    if policy_expression:
        policy = spanner_schema.policy_of_expression(policy_expression)
        if policy is None or policy.column.lower() != spanner_schema.TTL_COLUMN:
            problems.append(f"its row deletion policy is {policy_expression}, which deletes records whatever their "
                            f"{spanner_schema.TTL_COLUMN} (the retention) says (`ALTER TABLE {table} REPLACE "
                            f"{spanner_schema.row_deletion_policy()}`)")
    return problems


def _string_type() -> Any:
    from google.cloud.spanner_v1 import param_types

    return param_types.STRING


def delete_all_rows(client: Any, instance: str, database: str, patience_seconds: float = 15.0) -> bool:
    """Delete every row of every table of a database in one Commit (the emulator's wipe between tests).

    Returns:
        True once deleted; False if the emulator kept aborting the Commit for ``patience_seconds`` because another
        transaction is open on the database (one a client left behind can stay open for good:
        https://github.com/GoogleCloudPlatform/cloud-spanner-emulator/issues/137).
    """
    from google.api_core.exceptions import Aborted, RetryError
    from google.api_core.retry import Retry, if_exception_type
    from google.cloud.spanner_v1.keyset import KeySet

    db = client.instance(instance).database(database)
    with db.snapshot() as snap:
        tables = [row[0] for row in snap.execute_sql(
            "SELECT TABLE_NAME FROM INFORMATION_SCHEMA.TABLES WHERE TABLE_SCHEMA = ''")]

    def commit() -> None:
        with db.batch() as batch:
            for table in tables:
                batch.delete(table, KeySet(all_=True))

    if tables:
        try:
            Retry(predicate=if_exception_type(Aborted), initial=0.5, maximum=2.0, timeout=patience_seconds)(commit)()
        except RetryError:
            return False
    return True
