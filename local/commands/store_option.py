"""The ``--store`` option's type: any name a registered store goes by (:func:`~scheduler_dedup.handler.stores.registry.named`:
``memorystore`` is ``redis``), given to the command as the store's ``DEDUP_STORE`` id; a wrong name is refused with
the closest one (:func:`~scheduler_dedup.handler.stores.registry.store_name_problem`)."""

from __future__ import annotations

from typing import Any

import click

from scheduler_dedup.handler.stores import registry


class StoreName(click.ParamType):
    """A ``--store`` value, converted to the store's ``DEDUP_STORE`` id.

    Args:
        local_server: accept only stores that have a local server (``run-local``, the demo, the campaigns).
    """

    name = "store"

    def __init__(self, local_server: bool = False):
        self.local_server = local_server

    def _kinds(self) -> list[registry.StoreKind]:
        return [kind for kind in registry.STORES if kind.local_server or not self.local_server]

    def get_metavar(self, param: click.Parameter, ctx: click.Context | None = None) -> str:
        names = [name for kind in self._kinds() for name in dict.fromkeys((kind.id, kind.component_kind))]
        return "[" + "|".join(names) + "]"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        problem = registry.store_name_problem(str(value), "--store")
        kind = registry.named(str(value))
        if problem or kind is None:
            self.fail((problem or "").partition("=")[2] or str(value), param, ctx)
        if kind not in self._kinds():
            known = ", ".join(k.id for k in self._kinds())
            self.fail(f"{value!r} has no local server: use one of {known}", param, ctx)
        return kind.id
