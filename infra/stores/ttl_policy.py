"""One TTL field per collection group: who owns the TTL policy of a collection group, for component and pack.

Firestore, "Manage data retention with TTL policies", Limits and constraints
(https://cloud.google.com/firestore/docs/ttl): "You can mark only one field per collection group as a TTL field."
A TTL policy is therefore one setting of a collection group (in a project and database), whatever its field: a
second ``gcp.firestore.Field`` with a TTL on the same collection group, on another field (``delete_after``), is
refused by Firestore or replaces the first, and two owners of one setting remove it for each other on destroy.
:func:`ttl_policy_key` is the one key the component's per-program registry
(:func:`scheduler_dedup.infra.stores.base.claim_ttl_policy`) and the pack's ``firestore-ttl-single-owner`` both use.

This module imports neither pulumi nor pulumi_policy.
"""

from __future__ import annotations

from typing import Any

TTL_PAGE = "https://cloud.google.com/firestore/docs/ttl"
TTL_LIMIT = "You can mark only one field per collection group as a TTL field."


def ttl_policy_key(project: Any, database: Any, collection_group: Any) -> tuple[Any, Any, Any]:
    """The key of the one TTL policy a collection group can have: ``(project, database id, collection group)``;
    the field is not part of it."""
    return (project, database, collection_group)


def second_ttl_owner(first: str, second: str, first_field: str, second_field: str, collection_group: str,
                     database: str) -> str:
    """The message for ``second`` claiming the TTL policy of a collection group that ``first`` owns, with the fix."""
    fields = (f"TTL field {first_field!r}" if first_field == second_field else
              f"TTL fields {first_field!r} and {second_field!r}")
    return (f"{first} and {second} both set a TTL policy on collection group {collection_group!r} of database "
            f"{database!r} ({fields}): Firestore allows one TTL field per collection group (\"{TTL_LIMIT}\", "
            f"{TTL_PAGE}), and destroying either owner would remove it for both. Keep one owner: a DedupStore (one per "
            "database) and store= on every job that uses it, and keep other TTL fields on other collections")
