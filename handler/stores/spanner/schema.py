"""The Spanner schema of a run records' table, written once: the component, ``store init`` and the local emulator
create exactly this DDL, and the store reads and writes exactly these columns. Pure strings: imports nothing from
the Spanner client, so the component and the policy pack can use it.

One table per collection (``DEDUP_COLLECTION``), one row per run id:

- ``run_id STRING(64) NOT NULL``, the primary key (a SHA-256 in hex);
- one column per record field the protocol and run history write (:data:`COLUMNS`);
- ``update_time``: the record's version, ``TIMESTAMP OPTIONS (allow_commit_timestamp=true)``, set to the commit
  timestamp by every write; Spanner's commit timestamps of writes to one row strictly increase
  (https://cloud.google.com/spanner/docs/commit-timestamp), so a conditional write fenced on it is a
  compare-and-set; ``create_time`` is the commit timestamp of the row's insert;
- ``expire_at``, the TTL column: ``ROW DELETION POLICY (OLDER_THAN(expire_at, INTERVAL 0 DAY))`` deletes a row
  after ``expire_at`` passes, typically within 72 hours (https://cloud.google.com/spanner/docs/ttl). The retention
  itself is in ``expire_at`` (the handler's ``DEDUP_RETENTION_SECONDS`` after the run finished);
- a secondary index on ``(job_name, schedule_time DESC)`` for the run history query (one job's runs, newest
  first). Not ``NULL_FILTERED``: the emulator refuses queries through such an index unless told not to check, and
  production Spanner only serves them where it can prove the query filters NULLs; the rows of ``idempotent`` keys
  (no job name) cost one small index entry each.

Identifier rules: https://cloud.google.com/spanner/docs/reference/standard-sql/lexical#identifiers (tables and
indexes: 1 to 128 characters, a letter first, then letters, digits and ``_``), instance ids
https://cloud.google.com/spanner/docs/create-manage-instances (2 to 64 characters: lower-case letters, digits and
``-``, a letter first, not ending in ``-``) and database ids
https://cloud.google.com/spanner/docs/create-manage-databases (2 to 30 characters: lower-case letters, digits,
``_`` and ``-``, a letter first, not ending in ``_`` or ``-``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from scheduler_dedup.handler.core.record import TTL_FIELD

#: The primary key column (the run id).
KEY_COLUMN = "run_id"
#: The version column: the commit timestamp of the row's last write (the contract's ``update_time``).
VERSION_COLUMN = "update_time"
#: The commit timestamp of the row's insert (the contract's ``create_time``).
CREATE_TIME_COLUMN = "create_time"
#: The TTL column of the row deletion policy.
TTL_COLUMN = TTL_FIELD
#: Days after ``expire_at`` at which the row deletion policy deletes a row (``expire_at`` holds the retention).
TTL_INTERVAL_DAYS = 0

#: Longest table or index name (https://cloud.google.com/spanner/quotas#tables).
MAX_NAME_LENGTH = 128
_INDEX_SUFFIX = "_by_job_schedule"


@dataclass(frozen=True)
class Column:
    """One record field's column.

    Attributes:
        name: the record field and column name.
        type: the GoogleSQL type (``STRING(MAX)``, ``INT64``, ``FLOAT64``, ``BOOL``, ``TIMESTAMP``, ``JSON``).
        commit_timestamp: True if the column has ``allow_commit_timestamp=true``: it may hold the write's commit
            timestamp (the contract's ``SERVER_TIME``), and never a time in the future.
    """

    name: str
    type: str
    commit_timestamp: bool = False

    @property
    def ddl(self) -> str:
        """The column's definition in ``CREATE TABLE`` / ``ALTER TABLE ... ADD COLUMN``."""
        options = " OPTIONS (allow_commit_timestamp=true)" if self.commit_timestamp else ""
        return f"{self.name} {self.type}{options}"


#: The record's fields (every field :mod:`scheduler_dedup.handler.protocol.idempotency`, the lease keeper and the Scheduler
#: handler write), each a nullable column; SQL NULL is a field that is absent or None. These are the columns of the
#: ``CREATE TABLE`` statement, which never changes: see :data:`ADDED_COLUMNS`.
CREATED_COLUMNS: tuple[Column, ...] = (
    Column("status", "STRING(MAX)"),
    Column("attempt_id", "STRING(MAX)"),
    Column("previous_attempt_id", "STRING(MAX)"),
    Column("lease_seconds", "FLOAT64"),
    Column("lease_expires", "TIMESTAMP"),
    Column("claimed_at", "TIMESTAMP", commit_timestamp=True),
    Column("heartbeat_at", "TIMESTAMP", commit_timestamp=True),
    Column("finished_at", "TIMESTAMP", commit_timestamp=True),
    Column("claim_deadline", "TIMESTAMP"),
    Column("attempts", "INT64"),
    Column(TTL_COLUMN, "TIMESTAMP"),
    Column("result", "JSON"),
    Column("result_dropped", "STRING(MAX)"),
    Column("error", "STRING(MAX)"),
    Column("output", "STRING(MAX)"),
    Column("releases", "INT64"),
    Column("job_name", "STRING(MAX)"),
    Column("schedule_time", "TIMESTAMP"),
    Column("project", "STRING(MAX)"),
    Column("location", "STRING(MAX)"),
    Column("manual", "BOOL"),
    Column("schedule", "STRING(MAX)"),
    Column("time_zone", "STRING(MAX)"),
    Column("schedule_since", "TIMESTAMP"),
)
#: Columns added since: each is an ``ALTER TABLE ... ADD COLUMN`` appended to :func:`ddl_statements`, never a change
#: of the ``CREATE TABLE``. The component hands those statements to ``gcp.spanner.Database`` ``ddls``, which applies
#: appended statements to an existing database but replaces the database when an earlier statement changes
#: (https://www.pulumi.com/registry/packages/gcp/api-docs/spanner/database/, ``ddls``), and it is protected. (A store
#: of several tables made before a column was added sees its later tables' statements move behind that table's
#: additions: add the columns with ``scheduler-dedup store init`` and keep the old statements there.)
ADDED_COLUMNS: tuple[Column, ...] = (
    # The fields of an ``idempotent`` / ``idempotent_endpoint`` record (handler/protocol/idempotent.py, payload.py).
    Column("key", "STRING(MAX)"),
    Column("scope", "STRING(MAX)"),
    Column("function", "STRING(MAX)"),
    Column("payload_fingerprint", "STRING(MAX)"),
    # Where a delivery's catch-up stopped for lack of time (handler/protocol/catch_up.py).
    Column("catch_up_left", "TIMESTAMP"),
    # When a run forwarded downstream was recorded finished (handler/protocol/downstream_outcome.py).
    Column("settled_at", "TIMESTAMP"),
)
#: Every column of the record's fields.
COLUMNS: tuple[Column, ...] = (*CREATED_COLUMNS, *ADDED_COLUMNS)
#: Column name -> column, for the fields above.
COLUMNS_BY_NAME = {column.name: column for column in COLUMNS}
#: Every column a read returns, key and times first.
READ_COLUMNS: tuple[str, ...] = (KEY_COLUMN, VERSION_COLUMN, CREATE_TIME_COLUMN, *COLUMNS_BY_NAME)

_NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
INSTANCE_ID_RE = re.compile(r"^[a-z][-a-z0-9]{0,62}[a-z0-9]$")
DATABASE_ID_RE = re.compile(r"^[a-z][a-z0-9_\-]{0,28}[a-z0-9]$")
# GoogleSQL reserved keywords (https://cloud.google.com/spanner/docs/reference/standard-sql/lexical#reserved_keywords):
# an unquoted table name must not be one.
_RESERVED = frozenset("""
ALL AND ANY ARRAY AS ASC ASSERT_ROWS_MODIFIED AT BETWEEN BY CASE CAST COLLATE CONTAINS CREATE CROSS CUBE CURRENT
DEFAULT DEFINE DESC DISTINCT ELSE END ENUM ESCAPE EXCEPT EXCLUDE EXISTS EXTRACT FALSE FETCH FOLLOWING FOR FROM FULL
GROUP GROUPING GROUPS HASH HAVING IF IGNORE IN INNER INTERSECT INTERVAL INTO IS JOIN LATERAL LEFT LIKE LIMIT LOOKUP
MERGE NATURAL NEW NO NOT NULL NULLS OF ON OR ORDER OUTER OVER PARTITION PRECEDING PROTO RANGE RECURSIVE RESPECT RIGHT
ROLLUP ROWS SELECT SET SOME STRUCT TABLESAMPLE THEN TO TREAT TRUE UNBOUNDED UNION UNNEST USING WHEN WHERE WINDOW WITH
WITHIN
""".split())


def table_name_problem(table: str, setting: str = "DEDUP_COLLECTION") -> str | None:
    """Why ``table`` cannot name a run records' table in Spanner, or None.

    Args:
        table: the table name (the handler's ``DEDUP_COLLECTION``).
        setting: the setting named in the message.
    """
    longest = MAX_NAME_LENGTH - len(_INDEX_SUFFIX)
    if not _NAME_RE.match(table) or len(table) > longest:
        return (f"{setting}={table!r} is not a Spanner table name: use 1 to {longest} letters, digits and '_', "
                "starting with a letter (the history index's name adds "
                f"{_INDEX_SUFFIX!r}), e.g. scheduler_runs")
    if table.upper() in _RESERVED:
        return f"{setting}={table!r} is a GoogleSQL reserved keyword: choose another table name, e.g. scheduler_runs"
    return None


def instance_id_problem(instance: str, setting: str = "DEDUP_SPANNER_INSTANCE") -> str | None:
    """Why ``instance`` is not a Spanner instance id, or None."""
    if INSTANCE_ID_RE.match(instance):
        return None
    return (f"{setting}={instance!r} is not a Spanner instance id: use 2 to 64 lower-case letters, digits and '-', "
            "starting with a letter and not ending with '-', e.g. scheduler-dedup")


def database_id_problem(database: str, setting: str = "DEDUP_SPANNER_DATABASE") -> str | None:
    """Why ``database`` is not a Spanner database id, or None."""
    if DATABASE_ID_RE.match(database):
        return None
    return (f"{setting}={database!r} is not a Spanner database id: use 2 to 30 lower-case letters, digits, '_' and "
            "'-', starting with a letter and not ending with '_' or '-', e.g. scheduler-dedup")


def index_name(table: str) -> str:
    """The run history index of ``table``."""
    return f"{table}{_INDEX_SUFFIX}"


def row_deletion_policy(interval_days: int = TTL_INTERVAL_DAYS) -> str:
    """The ``ROW DELETION POLICY`` clause on the TTL column."""
    return f"ROW DELETION POLICY (OLDER_THAN({TTL_COLUMN}, INTERVAL {interval_days} DAY))"


def create_table_ddl(table: str) -> str:
    """``CREATE TABLE`` of a run records' table, with its row deletion policy."""
    columns = [f"{KEY_COLUMN} STRING(64) NOT NULL",
               f"{VERSION_COLUMN} TIMESTAMP NOT NULL OPTIONS (allow_commit_timestamp=true)",
               f"{CREATE_TIME_COLUMN} TIMESTAMP NOT NULL OPTIONS (allow_commit_timestamp=true)",
               *(column.ddl for column in CREATED_COLUMNS)]
    body = ",\n".join(f"  {c}" for c in columns)
    return f"CREATE TABLE {table} (\n{body},\n) PRIMARY KEY ({KEY_COLUMN}),\n  {row_deletion_policy()}"


def create_index_ddl(table: str) -> str:
    """``CREATE INDEX`` of the run history query: one job's runs, newest first."""
    return f"CREATE INDEX {index_name(table)} ON {table} (job_name, schedule_time DESC)"


def ddl_statements(table: str) -> list[str]:
    """Every statement a run records' table needs, in order: the table, its index, then one ``ADD COLUMN`` per column
    of :data:`ADDED_COLUMNS` (statements are only ever appended to this list).

    Raises:
        ValueError: ``table`` is not a Spanner table name (:func:`table_name_problem`).
    """
    problem = table_name_problem(table, "table")
    if problem:
        raise ValueError(problem)
    return [create_table_ddl(table), create_index_ddl(table), *(add_column_ddl(table, c.name) for c in ADDED_COLUMNS)]


def add_column_ddl(table: str, column: str) -> str:
    """``ALTER TABLE ... ADD COLUMN`` of one record field missing from an older table (``store init`` adds them)."""
    return f"ALTER TABLE {table} ADD COLUMN {COLUMNS_BY_NAME[column].ddl}"


# -- reading DDL back (the policy pack and the component check what a database's statements hold) --------------

_CREATE_TABLE_RE = re.compile(r"CREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?`?(?P<table>[A-Za-z][A-Za-z0-9_]*)`?\s*\(", re.IGNORECASE)
_OLDER_THAN = (r"OLDER_THAN\s*\(\s*`?(?P<column>[A-Za-z][A-Za-z0-9_]*)`?\s*,\s*INTERVAL\s+(?P<days>\d+)\s+DAY\s*\)")
_POLICY_RE = re.compile(r"ROW\s+DELETION\s+POLICY\s*\(\s*" + _OLDER_THAN + r"\s*\)", re.IGNORECASE)
_EXPRESSION_RE = re.compile(r"\s*" + _OLDER_THAN + r"\s*", re.IGNORECASE)
_ALTER_POLICY_RE = re.compile(r"ALTER\s+TABLE\s+`?(?P<table>[A-Za-z][A-Za-z0-9_]*)`?\s+"
                              r"(ADD|REPLACE)\s+ROW\s+DELETION\s+POLICY", re.IGNORECASE)
_DROP_POLICY_RE = re.compile(r"ALTER\s+TABLE\s+`?(?P<table>[A-Za-z][A-Za-z0-9_]*)`?\s+DROP\s+ROW\s+DELETION\s+POLICY",
                             re.IGNORECASE)


@dataclass(frozen=True)
class DeletionPolicy:
    """A table's row deletion policy as DDL states it.

    Attributes:
        column: the TIMESTAMP column it deletes by.
        interval_days: the days added to that column.
    """

    column: str
    interval_days: int


def policy_of_expression(expression: str) -> DeletionPolicy | None:
    """The policy of a row deletion policy expression as ``INFORMATION_SCHEMA.TABLES`` reports it
    (``OLDER_THAN(expire_at, INTERVAL 0 DAY)``), or None if it is not of that form."""
    found = _EXPRESSION_RE.fullmatch(expression)
    return DeletionPolicy(found["column"], int(found["days"])) if found else None


def deletion_policies(statements: list[str]) -> dict[str, DeletionPolicy | None]:
    """Each table that ``statements`` create, with the row deletion policy the statements leave it with.

    Reads ``CREATE TABLE [IF NOT EXISTS] ... ROW DELETION POLICY (OLDER_THAN(col, INTERVAL n DAY))`` and the
    ``ALTER TABLE ... ADD | REPLACE | DROP ROW DELETION POLICY`` statements after it, in order. Table names are
    matched case-insensitively, as GoogleSQL does.

    Returns:
        Lower-cased table name -> its policy, or None when it has none.
    """
    policies: dict[str, DeletionPolicy | None] = {}
    for statement in statements:
        created = _CREATE_TABLE_RE.search(statement)
        altered = _ALTER_POLICY_RE.search(statement)
        dropped = _DROP_POLICY_RE.search(statement)
        policy = _POLICY_RE.search(statement)
        found = DeletionPolicy(policy["column"], int(policy["days"])) if policy else None
        if created and statement.lstrip().upper().startswith("CREATE"):
            policies[created["table"].lower()] = found
        elif altered:
            policies[altered["table"].lower()] = found
        elif dropped:
            policies[dropped["table"].lower()] = None
    return policies
