"""The one reader of the process environment: the handler's settings come from the mapping :func:`read_environment`
returns.

The settings classes (the core :class:`~scheduler_dedup.handler.config.settings.Settings`, each store's config, the
target's and the callers' settings) parse that mapping, and every other module takes settings; none reads
``os.environ`` itself. The mapping admits only declared variables (:mod:`scheduler_dedup.handler.core.variables`), so
no variable is read without being documented.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from scheduler_dedup.handler.core.errors import ConfigError
from scheduler_dedup.handler.core.variables import DeclaredEnvironment, declared


def read_environment(environ: Mapping[str, str] | None = None) -> DeclaredEnvironment:
    """``environ`` (default this process's environment, ``os.environ``) as the declared variables' view.

    Reading a variable that is not declared raises
    :class:`~scheduler_dedup.handler.core.variables.UndeclaredVariableError` (a programming error).
    """
    return declared(os.environ if environ is None else environ)


#: The switch that turns ``idempotent`` and ``idempotent_endpoint`` off, for unit tests.
IDEMPOTENCY_DISABLED_ENV = "DEDUP_IDEMPOTENCY_DISABLED"


def idempotency_disabled(environ: Mapping[str, str] | None = None) -> bool:
    """True if ``DEDUP_IDEMPOTENCY_DISABLED`` is ``1`` or ``true`` in ``environ`` (default this process's, read at
    each call, so a test may set it after import); False when it is unset, empty, ``0`` or ``false`` (any case).

    Raises:
        ConfigError: any other value (``yes``, ``on``...), which would otherwise be taken silently one way or the
            other: a unit test meaning to switch ``idempotent`` off would open the real store.
    """
    raw = read_environment(environ).get(IDEMPOTENCY_DISABLED_ENV, "")
    value = raw.strip().lower()
    if value not in ("", "0", "false", "1", "true"):
        raise ConfigError(f"{IDEMPOTENCY_DISABLED_ENV}={raw!r} is neither on nor off: use "
                          f"{IDEMPOTENCY_DISABLED_ENV}=1 (or true) to switch idempotent off in unit tests, or unset it")
    return value in ("1", "true")


def job_environment(environ: Mapping[str, str] | None = None) -> Mapping[str, str]:
    """``environ`` (default ``os.environ``) whole: the job's own variables, which are not the handler's settings and
    are read only to learn the job's secret values (:mod:`~scheduler_dedup.handler.config.secret_values`)."""
    return os.environ if environ is None else environ
