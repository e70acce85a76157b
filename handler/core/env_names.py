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
``GOOGLE_CLOUD_PROJECT``, ``THREADS``, nor one that changes where the handler's store, credentials, metadata server,
TLS trust or proxy go (:data:`REDIRECTING_ENV`, :func:`redirecting_variable`; the handler's start-up and the pack's
``dedup-handler-environment`` refuse them too).

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

_AUTH_VARS = "https://googleapis.dev/python/google-auth/latest/reference/google.auth.environment_vars.html"
_GRPC_VARS = "https://github.com/grpc/grpc/blob/master/doc/environment_variables.md"
_REQUESTS_VARS = "https://requests.readthedocs.io/en/latest/user/advanced/ (Proxies, SSL Cert Verification)"
#: Variables that change where the handler's clients go or whom they trust, any case (``https_proxy`` as
#: ``HTTPS_PROXY``: requests, curl and gRPC read both): name (upper case) -> (what it redirects, its source).
REDIRECTING_ENV: dict[str, tuple[str, str]] = {
    "FIRESTORE_EMULATOR_HOST": ("the Firestore run store, to an unauthenticated emulator",
                                "https://cloud.google.com/firestore/docs/emulator"),
    "DATASTORE_EMULATOR_HOST": ("Firestore's client, to an emulator", "https://cloud.google.com/datastore/docs/tools/datastore-emulator"),
    "SPANNER_EMULATOR_HOST": ("the Spanner run store, to an unauthenticated emulator",
                              "https://cloud.google.com/spanner/docs/emulator"),
    "GOOGLE_APPLICATION_CREDENTIALS": ("the handler's credentials, to a key file instead of its runtime account",
                                       _AUTH_VARS),
    "CLOUDSDK_CONFIG": ("where Application Default Credentials look for a user's credentials", _AUTH_VARS),
    "GCE_METADATA_HOST": ("the metadata server the handler's tokens come from", _AUTH_VARS),
    "GCE_METADATA_ROOT": ("the metadata server the handler's tokens come from", _AUTH_VARS),
    "GCE_METADATA_IP": ("the metadata server the handler's tokens come from", _AUTH_VARS),
    "GOOGLE_API_USE_CLIENT_CERTIFICATE": ("Google API calls, to mutual-TLS endpoints", _AUTH_VARS),
    "GOOGLE_API_USE_MTLS_ENDPOINT": ("Google API calls, to mutual-TLS endpoints",
                                     "https://googleapis.dev/python/google-api-core/latest/client_options.html"),
    "GOOGLE_CLOUD_UNIVERSE_DOMAIN": ("every Google API call, to another domain than googleapis.com",
                                     "https://googleapis.dev/python/google-api-core/latest/client_options.html"),
    "REQUESTS_CA_BUNDLE": ("the certificates HTTPS calls trust (requests)", _REQUESTS_VARS),
    "CURL_CA_BUNDLE": ("the certificates HTTPS calls trust (requests)", _REQUESTS_VARS),
    "SSL_CERT_FILE": ("the certificates TLS trusts (OpenSSL's default verify paths)",
                      "https://docs.python.org/3/library/ssl.html#ssl.get_default_verify_paths"),
    "SSL_CERT_DIR": ("the certificates TLS trusts (OpenSSL's default verify paths)",
                     "https://docs.python.org/3/library/ssl.html#ssl.get_default_verify_paths"),
    "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": ("the certificates gRPC calls (Firestore, Spanner) trust", _GRPC_VARS),
    "HTTPS_PROXY": ("HTTPS and gRPC calls, through a proxy", _REQUESTS_VARS),
    "HTTP_PROXY": ("HTTP and gRPC calls (the metadata server's included), through a proxy", _REQUESTS_VARS),
    "ALL_PROXY": ("every HTTP call, through a proxy", _REQUESTS_VARS),
    "NO_PROXY": ("which calls skip the platform's proxy", _REQUESTS_VARS),
    "GRPC_PROXY": ("gRPC calls (Firestore, Spanner), through a proxy", _GRPC_VARS),
    "NO_GRPC_PROXY": ("which gRPC calls skip the platform's proxy", _GRPC_VARS),
}


def redirecting_variable(name: Any) -> str | None:
    """Why variable ``name`` (any case) may not be set beside the handler: it changes where the handler's store,
    credentials, metadata, TLS trust or proxy go (:data:`REDIRECTING_ENV`), with its source; None for other names."""
    entry = REDIRECTING_ENV.get(name.upper()) if isinstance(name, str) else None
    if entry is None:
        return None
    what, source = entry
    return (f"{name!r} redirects {what} ({source}): the handler's environment is the component's, so no job "
            "variable may set it; remove it (emulators and proxies are for the local tools, which set them "
            "themselves)")
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
    if jobs_own and redirecting_variable(name):
        return redirecting_variable(name)
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
