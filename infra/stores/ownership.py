"""What a stack may own of a project's run-record stores, for component and pack: the project's ``(default)``
Firestore database is only ever adopted (:func:`default_database_problem`).

This module imports neither pulumi nor pulumi_policy.
"""

from __future__ import annotations

from typing import Any, Optional

#: The id of a project's default Firestore database.
DEFAULT_DATABASE_ID = "(default)"


def default_database_problem(database_id: Any, create_database: bool) -> Optional[str]:
    """Why the stack must not create ``database_id``, or None: ``(default)`` is the project's own database.

    App Engine, Firebase and every client that names no database use ``(default)``
    (https://cloud.google.com/firestore/docs/manage-databases#the_default_database): where one of them made it,
    creating it fails at ``up`` with 409 "Database already exists"; where the stack made it, the stack owns the
    database every other app of the project uses, and ``destroy`` would delete it with all their collections.
    """
    if create_database and database_id == DEFAULT_DATABASE_ID:
        return ("'(default)' is the project's default Firestore database, which App Engine, Firebase and other apps "
                "of the project use: a stack never creates or owns it. Adopt it with create_database: false (the TTL "
                "policy and indexes are still set on it), or name a database of the stack's own in database_id")
    return None
