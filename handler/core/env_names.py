"""Which names a Cloud Run container's environment variable may have: the one rule that the component (a job's
``env``, ``secret_env``), ``run-local`` (``--env``, ``--secret-file``, the handler's local environment) and the
policy pack (every variable of a Cloud Run service or job) apply.

Cloud Run's rules:

* Cloud Run Admin API v2, ``EnvVar.name``, as its client libraries' reference gives it
  (https://cloud.google.com/dotnet/docs/reference/Google.Cloud.Run.V2/2.2.0/Google.Cloud.Run.V2.EnvVar): "Required.
  Name of the environment variable. Must be a C_IDENTIFIER, and mnay not exceed 32768 characters." A C_IDENTIFIER
  is a letter or ``_`` followed by letters, digits and ``_`` (``[A-Za-z_][A-Za-z0-9_]*``), so ``1BAD``, ``MY-VAR``
  and ``my.var`` are not names. Later releases of that reference
  (https://cloud.google.com/python/docs/reference/run/latest/google.cloud.run_v2.types.EnvVar) give only the
  length limit; the stricter documented rule is kept, as such a name is no shell variable either.
* "Environment variables for services" (https://cloud.google.com/run/docs/configuring/services/overview-environment-variables):
  a key cannot be empty, contain ``=`` or have the ``X_GOOGLE_`` prefix; the container runtime contract's variables
  and those Cloud Run sets for functions (``PORT``, ``K_SERVICE``, ``K_REVISION``, ``K_CONFIGURATION``,
  ``FUNCTION_TARGET``, ``FUNCTION_SIGNATURE_TYPE``, https://cloud.google.com/run/docs/container-contract) are
  reserved.

A job's own variable may also not be one the dedup handler reads or the component sets for it: ``DEDUP_*``,
``GOOGLE_CLOUD_PROJECT``, ``THREADS``.

This module imports nothing of ours.
"""

from __future__ import annotations

import re
from typing import Any

#: Names Cloud Run sets in the container (container runtime contract, and functions deployed from source).
CLOUD_RUN_RESERVED_ENV = frozenset({"PORT", "K_SERVICE", "K_REVISION", "K_CONFIGURATION", "FUNCTION_TARGET",
                                    "FUNCTION_SIGNATURE_TYPE"})
#: Names the handler reads or the component sets for it (besides every ``DEDUP_*``).
HANDLER_ENV = frozenset({"GOOGLE_CLOUD_PROJECT", "THREADS"})
HANDLER_ENV_PREFIX = "DEDUP_"
#: Cloud Run Admin API v2, ``EnvVar.name``: "must not exceed 32768 characters".
MAX_ENV_NAME_CHARS = 32768
_C_IDENTIFIER_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_NOT_IDENTIFIER_RE = re.compile(r"[^A-Za-z0-9_]")


def env_name_problem(name: Any, *, jobs_own: bool = True) -> str | None:
    """Why ``name`` cannot be an environment variable of a Cloud Run container, with the fix, or None when it can.

    Args:
        name: the variable's name, as given.
        jobs_own: the name is one of the job's own variables (``env``, ``secret_env``, ``--env``), so the dedup
            handler's names are refused too; False for any variable of a container (the policy pack's check, where
            the component sets the handler's names itself).

    Returns:
        A sentence naming the rule broken and a name that works (the given one made a C_IDENTIFIER), or None.
    """
    if not isinstance(name, str) or not name:
        return f"{name!r} is not a variable name: Cloud Run refuses empty names; use e.g. REPORT_BUCKET"
    if "=" in name:
        return f"{name!r} holds '=', which Cloud Run refuses in a name: use e.g. {_suggest(name.split('=')[0])}"
    if len(name) > MAX_ENV_NAME_CHARS:
        return f"a variable name of {len(name)} characters is longer than Cloud Run's {MAX_ENV_NAME_CHARS}: shorten it"
    if not _C_IDENTIFIER_RE.match(name):
        return (f"{name!r} is not a name Cloud Run takes: a letter or '_' first, then letters, digits and '_' only "
                f"(Cloud Run Admin API, EnvVar.name: \"Must be a C_IDENTIFIER\"); use e.g. {_suggest(name)}")
    if name.upper().startswith("X_GOOGLE_"):
        return f"{name!r} starts with X_GOOGLE_, which Cloud Run reserves: choose another prefix"
    if name in CLOUD_RUN_RESERVED_ENV:
        return f"{name!r} is set by Cloud Run itself ({', '.join(sorted(CLOUD_RUN_RESERVED_ENV))}): choose another name"
    if jobs_own and (name.startswith(HANDLER_ENV_PREFIX) or name in HANDLER_ENV):
        return (f"{name!r} is the dedup handler's ({HANDLER_ENV_PREFIX}*, {', '.join(sorted(HANDLER_ENV))}): set the "
                "component input instead (docs/reference/stack-config.md), or choose another name for your job's value")
    return None


def _suggest(name: str) -> str:
    """``name`` made a C_IDENTIFIER: other characters become ``_``, a leading digit gets a ``_`` before it."""
    fixed = _NOT_IDENTIFIER_RE.sub("_", name)
    if not fixed.strip("_"):
        return "REPORT_BUCKET"
    return f"_{fixed}" if fixed[0].isdigit() else fixed
