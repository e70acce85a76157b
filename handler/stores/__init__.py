"""Run stores behind one contract (:mod:`.base`): Firestore (:mod:`.firestore`), Memorystore for Redis (:mod:`.redis`),
Spanner (:mod:`.spanner`).

:func:`open_store` builds the store that ``DEDUP_STORE`` names. Each store's module is imported only when it
is used, so a handler on one store never loads another store's client library.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from scheduler_dedup.handler.config.settings import Settings
    from scheduler_dedup.handler.stores.base import RunStore

#: ``DEDUP_STORE`` value -> the environment variable that points its client at a local emulator instead.
EMULATOR_VARIABLES = {
    "firestore": "FIRESTORE_EMULATOR_HOST",
    "spanner": "SPANNER_EMULATOR_HOST",
}
# Redis has no emulator variable: DEDUP_REDIS_URL names a local redis-server and a Memorystore instance alike.

#: ``DEDUP_STORE`` value -> ``module:factory``; the factory takes ``(settings, collection)``.
_FACTORIES = {
    "firestore": "scheduler_dedup.handler.stores.firestore.store:from_settings",
    "redis": "scheduler_dedup.handler.stores.redis.store:from_settings",
    "spanner": "scheduler_dedup.handler.stores.spanner.store:from_settings",
}


def open_store(settings: "Settings", collection: str | None = None) -> "RunStore":
    """The run store ``settings.store`` names, on ``collection`` (default ``settings.collection``).

    Raises:
        StoreRefusedError: the store's client cannot be created (no credentials, say).
        ConfigError: ``settings.store`` names no store (the settings refuse that already), or its client library
            is not installed (the message names the extra to install, e.g. ``scheduler-dedup[spanner]``).
    """
    from scheduler_dedup.handler.core.errors import ConfigError

    target = _FACTORIES.get(settings.store)
    if target is None:
        raise ConfigError(f"DEDUP_STORE={settings.store!r} is not a run store: use one of {', '.join(_FACTORIES)}")
    module, _, name = target.partition(":")
    try:
        factory = getattr(importlib.import_module(module), name)
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.startswith("scheduler_dedup"):
            raise
        raise ConfigError(f"DEDUP_STORE={settings.store} needs its client library, which is not installed "
                          f"({exc.name}): pip install 'scheduler-dedup[{settings.store}]'") from exc
    store: RunStore = factory(settings, collection or settings.collection)
    return store
