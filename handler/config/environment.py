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

from scheduler_dedup.handler.core.variables import DeclaredEnvironment, declared


def read_environment(environ: Mapping[str, str] | None = None) -> DeclaredEnvironment:
    """``environ`` (default this process's environment, ``os.environ``) as the declared variables' view.

    Reading a variable that is not declared raises
    :class:`~scheduler_dedup.handler.core.variables.UndeclaredVariableError` (a programming error).
    """
    return declared(os.environ if environ is None else environ)


def job_environment(environ: Mapping[str, str] | None = None) -> Mapping[str, str]:
    """``environ`` (default ``os.environ``) whole: the job's own variables, which are not the handler's settings and
    are read only to learn the job's secret values (:mod:`~scheduler_dedup.handler.config.secret_values`)."""
    return os.environ if environ is None else environ
