"""What one run store brings: a :class:`StoreKind` record, each piece named by a dotted path.

Every piece is a string (``module`` or ``module:attribute``) imported only when used (:func:`load`), so naming a
store costs nothing: a handler on Firestore never imports the Redis or Spanner client, and the handler never imports
pulumi (the store's component piece and pack rules live in ``infra/stores/`` and ``policies/rules/stores/``, and come
in through the paths its record names). The records are listed in :mod:`.registry`. This module imports nothing of ours, so each store's package can declare its record here.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, ClassVar, Protocol


class StoreConfig(Protocol):
    """What a store's ``config`` class provides: its own settings, read and checked by itself, so the core
    settings know no store. Its no-argument instance is the settings of an environment that sets none."""

    #: Its variables that say where its records are, by what each names (``database``, ``instance``): a command
    #: that reads records elsewhere (``scheduler-dedup runs --database/--instance``) sets them from its options.
    where: ClassVar[Mapping[str, str]]

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> "StoreConfig":
        """Read the store's variables (``ConfigError`` for a value that does not parse)."""
        ...

    @staticmethod
    def env_problem(env: Mapping[str, str], store: str) -> str | None:
        """Why ``env`` for a handler on ``store`` is refused because of this store's variables, or None."""
        ...

    def check(self, settings: Any) -> None:
        """Check these settings beside the core ones (``settings``, the core
        :class:`~scheduler_dedup.handler.config.settings.Settings`) (``ConfigError`` naming the variable and the fix)."""
        ...


@dataclass(frozen=True)
class StoreKind:
    """One run store and where each of its pieces lives.

    Attributes:
        id: the store's canonical kind id, its ``DEDUP_STORE`` value (``redis``).
        display_name: its name in messages (``Memorystore for Redis``).
        factory: ``module:function`` taking ``(settings, collection)`` and returning a connected
            :class:`~scheduler_dedup.handler.stores.base.RunStore`.
        schema: module of its record layout (fields, indexes, DDL).
        values: module of how record values and their limits map onto the store.
        wire: ``module:attribute``, the wire classifier the fault proxy names each call's protocol step with (a
            :class:`~scheduler_dedup.handler.stores.wire.GrpcWire`, or a function of the call).
        local_server: ``module:class`` of its real local server for tests, the demo and ``run-local``
            (:class:`~scheduler_dedup.local.servers.store_servers.StoreServer`).
        requirements: its client library, pinned, for the deploy archive of a handler on this store only.
        component: module of its ``DedupStore`` children (imports pulumi; never the handler's).
        pack_rules: module of its policy pack rules, each declared with
            :func:`scheduler_dedup.policies.rules.base.rule` (the pack's :data:`~scheduler_dedup.policies.rules.RULES`
            adds them).
        config: ``module:class`` of its own settings (:class:`StoreConfig`), or None when it has none beyond the
            core settings.
        emulator_variable: the environment variable that points its client at a local emulator, or None
            (a Redis URL names a local server and Memorystore alike).
        extra: the ``pip install 'scheduler-dedup[EXTRA]'`` that installs its client, or None when a core
            dependency does.
        component_kind: its declared alias, the ``DedupStore`` ``kind`` (stack key ``storeKind``), when the
            component names it after the managed service (``memorystore``); default :attr:`id`.
    """

    id: str
    display_name: str
    factory: str
    schema: str
    values: str
    wire: str
    local_server: str
    requirements: tuple[str, ...]
    component: str
    pack_rules: str
    config: str | None = None
    emulator_variable: str | None = None
    extra: str | None = None
    component_kind: str = ""

    def __post_init__(self) -> None:
        if not self.component_kind:
            object.__setattr__(self, "component_kind", self.id)


#: Pieces every store must bring, with what each is for (the registry's check names the missing ones).
REQUIRED_PIECES: dict[str, str] = {
    "display_name": "its name in messages",
    "factory": "module:function building its RunStore from (settings, collection)",
    "schema": "module of its record layout",
    "values": "module of its value mapping and limits",
    "wire": "module:attribute of its wire classifier, for the fault proxy",
    "local_server": "module:class of its real local server, for the contract suite",
    "requirements": "its pinned client library, for the deploy archive",
    "component": "module of its DedupStore children (infra/stores/)",
    "pack_rules": "module of its policy pack rules (policies/rules/stores/)",
}
#: The pieces named by a dotted path, resolved by the registry's check.
DOTTED_PIECES = ("factory", "schema", "values", "wire", "local_server", "component", "pack_rules", "config")

assert set(REQUIRED_PIECES) | {"config", "emulator_variable", "extra", "component_kind", "id"} == {
    f.name for f in fields(StoreKind)}


def load(path: str) -> Any:
    """The object ``module:attribute`` names, or the module ``module`` names, imported now.

    Raises:
        ModuleNotFoundError: the module (or one it imports) is not installed.
        AttributeError: the module has no such attribute.
    """
    module, _, attribute = path.partition(":")
    loaded = importlib.import_module(module)
    return getattr(loaded, attribute) if attribute else loaded
