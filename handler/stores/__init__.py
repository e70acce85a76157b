"""Run stores behind one contract (:mod:`.base`), one folder each (:mod:`.firestore`, :mod:`.redis`,
:mod:`.spanner`), each described by a :class:`~.kind.StoreKind` (:mod:`.kind`) registered in :mod:`.registry`, and
the wire vocabulary the fault proxy reads their calls with (:mod:`.wire`).

:func:`open_store` builds the store that ``DEDUP_STORE`` names (:func:`store_opener`: its library now, its client
later). Each store's modules are imported only when it is used, so a handler on one store never loads another
store's client library.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from scheduler_dedup.handler.stores import registry

if TYPE_CHECKING:
    from collections.abc import Callable

    from scheduler_dedup.handler.config.settings import Settings
    from scheduler_dedup.handler.stores.base import RunStore

#: ``DEDUP_STORE`` value -> the environment variable that points its client at a local emulator instead
#: (:attr:`~scheduler_dedup.handler.stores.kind.StoreKind.emulator_variable`; a store without one is left out).
EMULATOR_VARIABLES = {kind.id: kind.emulator_variable for kind in registry.STORES if kind.emulator_variable}


def store_opener(settings: "Settings", collection: str | None = None) -> "Callable[[], RunStore]":
    """Import the client library of the run store ``settings.store`` names, now, and return what opens the store on
    ``collection`` (default ``settings.collection``) later: the client, its connections and threads are made only
    when the returned function is called.

    Raises:
        ConfigError: ``settings.store`` names no store (the settings refuse that already), or its client library
            is not installed (the message names the extra to install, e.g. ``scheduler-dedup[spanner]``).
    """
    from scheduler_dedup.handler.core.errors import ConfigError
    from scheduler_dedup.handler.stores.kind import load

    kind = registry.find(settings.store)
    if kind is None:
        raise ConfigError(f"DEDUP_STORE={settings.store!r} is not a run store: use one of "
                          f"{', '.join(registry.store_ids())}")
    try:
        factory = load(kind.factory)
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.startswith("scheduler_dedup"):
            raise
        raise ConfigError(f"DEDUP_STORE={settings.store} needs its client library, which is not installed "
                          f"({exc.name}): pip install 'scheduler-dedup[{kind.extra or kind.id}]'") from exc
    return functools.partial(factory, settings, collection or settings.collection)


def open_store(settings: "Settings", collection: str | None = None) -> "RunStore":
    """The run store ``settings.store`` names, on ``collection`` (default ``settings.collection``).

    Raises:
        StoreRefusedError: the store's client cannot be created (no credentials, say).
        ConfigError: as :func:`store_opener`.
    """
    return store_opener(settings, collection)()
