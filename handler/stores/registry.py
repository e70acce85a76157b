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
from importlib.metadata import EntryPoint, entry_points

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
#: Entry point values deferred by an import cycle, with their error; those reported as failing after it.
_DEFERRED: dict[str, ImportError] = {}
_REPORTED: set[str] = set()


def store_ids() -> tuple[str, ...]:
    """The ``DEDUP_STORE`` values, :attr:`StoreKind.id` of each registered store."""
    _register_deferred()
    return tuple(kind.id for kind in STORES)


def find(store_id: str) -> StoreKind | None:
    """The registered store whose ``DEDUP_STORE`` value is ``store_id``, or None."""
    _register_deferred()
    return next((kind for kind in STORES if kind.id == store_id), None)


def store_names() -> tuple[str, ...]:
    """Every name a registered store goes by, in :data:`STORES` order: its ``DEDUP_STORE`` id, then its component
    kind where that differs (``redis``, ``memorystore``: the docs call the Redis store Memorystore)."""
    return tuple(name for kind in STORES for name in dict.fromkeys((kind.id, kind.component_kind)))


def named(name: str) -> StoreKind | None:
    """The registered store ``name`` names, by its id or its component kind, in any case (``memorystore`` and
    ``redis`` are the same store), or None."""
    _register_deferred()
    wanted = str(name).strip().lower()
    return next((kind for kind in STORES if wanted in (kind.id, kind.component_kind)), None)


def store_name_problem(name: str, setting: str, component: bool = False) -> str | None:
    """Why ``name`` names no registered store (:func:`named`), with the closest name (difflib), or None.

    Args:
        name: the store as written.
        setting: what it was written in, named in the message (``DEDUP_STORE``, ``--store``).
        component: list each store by its component kind first (``memorystore (or redis)``), as the component's
            ``kind`` input is written; else by its ``DEDUP_STORE`` id first.
    """
    import difflib

    if named(name) is not None:
        return None
    pairs = [(kind.component_kind, kind.id) if component else (kind.id, kind.component_kind) for kind in STORES]
    names = ", ".join(f"{first} (or {second})" if first != second else first for first, second in pairs)
    close = difflib.get_close_matches(str(name).strip().lower(), store_names(), n=1, cutoff=0.6)
    hint = f"did you mean {close[0]!r}? " if close else ""
    return f"{setting}={name!r} is not a run store: {hint}use one of {names}"


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
    return [_load(point) for point in entry_points(group=ENTRY_POINT_GROUP)]


def _load(point: EntryPoint) -> StoreKind:
    """The ``StoreKind`` ``point`` names.

    Raises:
        TypeError: it names something else (the message names the entry point).
        ImportError: its module cannot be imported (yet).
    """
    kind = point.load()
    if not isinstance(kind, StoreKind):
        raise TypeError(f"entry point {point.name} = {point.value!r} of group {ENTRY_POINT_GROUP!r} names a "
                        f"{type(kind).__name__}, not a StoreKind: point it at the store's StoreKind")
    return kind


def register_installed() -> list[StoreKind]:
    """:func:`register` every store of :func:`installed` not registered yet (on import of this module); returns
    those registered now. A store whose id clashes with a registered one is skipped with a warning.

    An entry point that fails to import while this module is being imported (its module imports a module of ours
    that is itself still importing this one, e.g. ``scheduler_dedup.local.servers.store_servers``: a cycle) is
    deferred, not fatal: :func:`store_ids`, :func:`find` and :func:`named` try it again once the imports are done.
    """
    added = []
    for point in entry_points(group=ENTRY_POINT_GROUP):
        try:
            kind = _load(point)
        except ImportError as exc:
            _DEFERRED[point.value] = exc
            continue
        _DEFERRED.pop(point.value, None)
        if kind in STORES:
            continue
        try:
            added.append(register(kind))
        except ValueError as exc:
            logging.getLogger("scheduler_dedup").warning("installed store not registered: %s", exc)
    return added


def _register_deferred() -> None:
    """Try again the entry points :func:`register_installed` deferred; one that still fails is logged once, with
    its error (a store that cannot be imported is not a run store)."""
    if not _DEFERRED:
        return
    failed = dict(_DEFERRED)
    register_installed()
    for value, exc in _DEFERRED.items():
        if value in failed and value not in _REPORTED:
            _REPORTED.add(value)
            logging.getLogger("scheduler_dedup").warning(
                "installed store %s could not be imported (%s): it is not registered; if its module imports "
                "scheduler_dedup.local or the stores package at import, name those pieces by dotted path instead",
                value, exc)


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
