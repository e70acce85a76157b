"""The run stores, one registration each: every list of stores derives from :data:`STORES`.

``DEDUP_STORE`` values and :func:`~scheduler_dedup.handler.stores.open_store`, the settings' store checks, the deploy
archive's pins, the emulator variables, the local servers and the contract suite, the component's store kinds and the
pack's store rules all read this list. A store is one folder, ``handler/stores/<store>/``, whose ``__init__`` declares
its :class:`~scheduler_dedup.handler.stores.kind.StoreKind`, plus one line here. A store from another distribution
declares its ``StoreKind`` as an entry point of group :data:`ENTRY_POINT_GROUP` and is registered on import
(:func:`installed`). :func:`problems` tells what a store fails to bring.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from importlib.metadata import entry_points

from scheduler_dedup.handler.stores.firestore import STORE as FIRESTORE
from scheduler_dedup.handler.stores.kind import DOTTED_PIECES, REQUIRED_PIECES, StoreKind, load
from scheduler_dedup.handler.stores.redis import STORE as REDIS
from scheduler_dedup.handler.stores.spanner import STORE as SPANNER

#: The registered stores, in the order messages, commands and tests list them. One line per store.
STORES: list[StoreKind] = [
    FIRESTORE,
    REDIS,
    SPANNER,
]
DEFAULT_STORE = FIRESTORE.id
#: The entry point group a store from another distribution declares its ``StoreKind`` in, e.g. in its pyproject.toml:
#: ``[project.entry-points."scheduler_dedup.stores"]`` ``mystore = "my_package.store:STORE"``
#: (https://packaging.python.org/en/latest/specifications/entry-points/).
ENTRY_POINT_GROUP = "scheduler_dedup.stores"


def store_ids() -> tuple[str, ...]:
    """The ``DEDUP_STORE`` values, :attr:`StoreKind.id` of each registered store."""
    return tuple(kind.id for kind in STORES)


def find(store_id: str) -> StoreKind | None:
    """The registered store whose ``DEDUP_STORE`` value is ``store_id``, or None."""
    return next((kind for kind in STORES if kind.id == store_id), None)


def by_component_kind(component_kind: str) -> StoreKind | None:
    """The registered store a ``DedupStore`` ``kind`` names (its declared alias, e.g. ``memorystore``), or None."""
    return next((kind for kind in STORES if kind.component_kind == component_kind), None)


def register(kind: StoreKind) -> StoreKind:
    """Add a store (tests register a toy store this way); returns it.

    Raises:
        ValueError: its id or component kind is taken already.
    """
    for other in STORES:
        if kind.id in (other.id, other.component_kind) or kind.component_kind in (other.id, other.component_kind):
            raise ValueError(f"store {kind.id!r} (component kind {kind.component_kind!r}) clashes with the "
                             f"registered store {other.id!r}: give it a kind id of its own")
    STORES.append(kind)
    return kind


def installed() -> list[StoreKind]:
    """The stores installed distributions declare in :data:`ENTRY_POINT_GROUP`, each loaded (its ``StoreKind``
    only: the store's client is imported when it is opened).

    Raises:
        TypeError: an entry point names something that is not a ``StoreKind`` (the message names the entry point).
    """
    found = []
    for point in entry_points(group=ENTRY_POINT_GROUP):
        kind = point.load()
        if not isinstance(kind, StoreKind):
            raise TypeError(f"entry point {point.name} = {point.value!r} of group {ENTRY_POINT_GROUP!r} names a "
                            f"{type(kind).__name__}, not a StoreKind: point it at the store's StoreKind")
        found.append(kind)
    return found


def register_installed() -> list[StoreKind]:
    """:func:`register` every store of :func:`installed` not registered yet (on import of this module); returns
    those registered now. A store whose id clashes with a registered one is skipped with a warning."""
    added = []
    for kind in installed():
        if kind in STORES:
            continue
        try:
            added.append(register(kind))
        except ValueError as exc:
            logging.getLogger("scheduler_dedup").warning("installed store not registered: %s", exc)
    return added


@contextmanager
def registered(kind: StoreKind) -> Iterator[StoreKind]:
    """:func:`register` ``kind`` for the block, and remove it after."""
    register(kind)
    try:
        yield kind
    finally:
        STORES.remove(kind)


def problems(kind: StoreKind, *, resolve: bool = True) -> list[str]:
    """What ``kind`` fails to bring, one sentence per missing or broken piece, naming the fix; empty when complete.

    Args:
        kind: the store.
        resolve: also import every dotted piece (its client library too), so a path that names nothing is found.
    """
    found: list[str] = []
    for piece, what in REQUIRED_PIECES.items():
        if not getattr(kind, piece):
            found.append(f"store {kind.id!r} brings no {piece} ({what}): set {piece}= in its StoreKind "
                         f"(handler/stores/{kind.id}/__init__.py)")
    if not all(pin.count("==") == 1 for pin in kind.requirements):
        found.append(f"store {kind.id!r} has an unpinned requirement in {kind.requirements!r}: pin each as NAME==VERSION")
    if resolve:
        for piece in DOTTED_PIECES:
            path = getattr(kind, piece)
            if not path:
                continue
            try:
                load(path)
            except (ImportError, AttributeError) as exc:
                found.append(f"store {kind.id!r}: its {piece} {path!r} names nothing importable ({exc})")
    return found


register_installed()
