"""``scheduler-dedup store init``: create what a run store needs before a handler uses it, where that is a table."""

from __future__ import annotations

import os
import sys

import click

from scheduler_dedup.handler.config.settings import DEFAULT_COLLECTION
from scheduler_dedup.local.commands.console import make_console
from scheduler_dedup.local.commands.store_option import StoreName

_EXIT_ERROR = 2


@click.group()
def store() -> None:
    """Set up a run store."""


@store.command()
@click.option("--store", "kind", required=True, type=StoreName(), help="the run store (DEDUP_STORE).")
@click.option("--project", envvar="GOOGLE_CLOUD_PROJECT", required=True,
              help="project id of the store [env GOOGLE_CLOUD_PROJECT].")
@click.option("--instance", envvar="DEDUP_SPANNER_INSTANCE", default=None,
              help="Spanner instance id [env DEDUP_SPANNER_INSTANCE].")
@click.option("--database", envvar="DEDUP_SPANNER_DATABASE", default=None,
              help="Spanner database id [env DEDUP_SPANNER_DATABASE].")
@click.option("--collection", envvar="DEDUP_COLLECTION", default=DEFAULT_COLLECTION, show_default=True,
              help="the run records' collection (on Spanner: table) [env DEDUP_COLLECTION].")
def init(kind: str, project: str, instance: str | None, database: str | None, collection: str) -> None:
    """Create the run records' table and its history index in an existing Spanner database (on the emulator,
    SPANNER_EMULATOR_HOST set, also the instance and database). Idempotent: a second run changes nothing; on a
    table made by an older version it adds the missing columns, row deletion policy or index. Prints what it did.

    Needs roles/spanner.databaseAdmin on the database (the handler's roles/spanner.databaseUser cannot change
    the schema).

    \b
    Example:
      scheduler-dedup store init --store spanner --project my-project --instance dedup --database dedup
    """
    console, err = make_console(), make_console(stderr=True)
    if kind == "firestore":
        console.print("Firestore needs nothing created: a collection exists once a record is written. Its TTL "
                      "policy (field expire_at) and the history index (job_name ASC, schedule_time DESC) come with "
                      "the component's DedupStore.")
        return
    missing = [name for name, value in (("--instance", instance), ("--database", database)) if not value]
    if missing:
        raise click.UsageError(f"--store spanner needs {' and '.join(missing)}: the Spanner instance and database "
                               "that hold the table")
    from scheduler_dedup.handler.core.errors import StoreRefusedError
    from scheduler_dedup.handler.stores.spanner import schema as spanner_schema
    from scheduler_dedup.handler.stores.spanner.admin import init_table

    assert instance is not None and database is not None
    for option, problem in (("--instance", spanner_schema.instance_id_problem(instance, "--instance")),
                            ("--database", spanner_schema.database_id_problem(database, "--database")),
                            ("--collection", spanner_schema.table_name_problem(collection, "--collection"))):
        if problem:
            raise click.BadParameter(problem, param_hint=option)
    where = "the emulator at " + os.environ["SPANNER_EMULATOR_HOST"] if os.environ.get("SPANNER_EMULATOR_HOST") \
        else "Spanner"
    console.print(f"Setting up table {collection} in projects/{project}/instances/{instance}/databases/{database} "
                  f"on {where}")
    try:
        init_table(project, instance, database, collection, say=console.print,
                   emulator=bool(os.environ.get("SPANNER_EMULATOR_HOST")))
    except StoreRefusedError as exc:
        err.print(f"[red]error:[/] {exc}")
        sys.exit(_EXIT_ERROR)
    except Exception as exc:  # google.auth's DefaultCredentialsError, an unreachable endpoint
        err.print(f"[red]error:[/] {type(exc).__name__}: {exc}\nCheck your credentials (`gcloud auth "
                  "application-default login`) or set SPANNER_EMULATOR_HOST to use an emulator.")
        sys.exit(_EXIT_ERROR)
