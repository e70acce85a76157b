"""The handler's start-up checks of its environment, in one function that handler, component and policy pack call.

:func:`read_startup_settings` is everything :func:`~scheduler_dedup.handler.service.app.build_handler_from_env` checks
before it serves, except what needs the world (importing the user's job module, Application Default
Credentials, the Firestore client). :func:`startup_problems` runs the same checks on an environment that may
hold values not known yet (a ``pulumi preview`` output), so the component (``DedupScheduledJob``) and the
pack's ``dedup-handler-settings`` rule refuse exactly what would stop the handler at start-up.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from scheduler_dedup.handler.callers.app_engine import AppEngineCallerSettings
from scheduler_dedup.handler.callers.oidc_settings import CallerAuthSettings
from scheduler_dedup.handler.config.settings import Settings
from scheduler_dedup.handler.core.env_names import redirecting_variable
from scheduler_dedup.handler.core.errors import ConfigError
from scheduler_dedup.handler.core.google_endpoints import GOOGLE_ENDPOINTS, google_endpoint_problem
from scheduler_dedup.handler.protocol.job import check_job_spec
from scheduler_dedup.handler.targets.settings import TargetSettings
from scheduler_dedup.handler.core.variables import declared


@dataclass(frozen=True)
class StartupSettings:
    """The handler's checked settings.

    Attributes:
        settings: Firestore, lease and retention settings (:class:`~scheduler_dedup.handler.config.settings.Settings`).
        target: what runs: the python job or a proxy target (:class:`~scheduler_dedup.handler.targets.settings.TargetSettings`).
        caller_auth: caller verification, or None when off
            (:class:`~scheduler_dedup.handler.callers.oidc_settings.CallerAuthSettings`).
        app_engine_caller: the App Engine caller check (``DEDUP_APP_ENGINE_CALLER``;
            :class:`~scheduler_dedup.handler.callers.app_engine.AppEngineCallerSettings`).
    """

    settings: Settings
    target: TargetSettings
    caller_auth: CallerAuthSettings | None
    app_engine_caller: AppEngineCallerSettings = AppEngineCallerSettings()


def _job_spec(env: Mapping[str, str]) -> None:
    env = declared(env)
    if TargetSettings.from_env(env).type == "python":
        check_job_spec(env.get("DEDUP_JOB"))


def _trust_premise(env: Mapping[str, str]) -> None:
    """Trust mode must be able to prove its premise: it needs ``DEDUP_SERVICE`` (:mod:`~scheduler_dedup.handler.callers.trust_premise`)."""
    env = declared(env)
    auth = CallerAuthSettings.from_env(env)
    if auth is not None and auth.trust_cloud_run_iam and not env.get("DEDUP_SERVICE", "").strip():
        raise ConfigError("DEDUP_TRUST_CLOUD_RUN_IAM=true needs DEDUP_SERVICE=projects/P/locations/L/services/S (this "
                          "service's own name), so the handler can check that Cloud Run IAM guards it before it "
                          "trusts tokens without their signature; or set DEDUP_TRUST_CLOUD_RUN_IAM=false")


#: The opt-in of tests and local tools to test endpoints (see :func:`_test_only_settings`).
ALLOW_TEST_ENDPOINTS_ENV = "DEDUP_ALLOW_TEST_ENDPOINTS"
def _is_loopback(host: str) -> bool:
    if host.lower() in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _test_only_settings(env: Mapping[str, str]) -> None:
    """Settings meant for tests stop a deployed handler, unless ``DEDUP_ALLOW_TEST_ENDPOINTS`` is ``1``/``true``.

    Refused: a ``DEDUP_OIDC_CERTS_URL`` or API base URL (``DEDUP_RUN_API``, ``DEDUP_SCHEDULER_API``...) that is not
    the one Google URL :mod:`~scheduler_dedup.handler.core.google_endpoints` lists for it, exact host and all (whoever
    answers the certificate URL signs tokens the handler accepts; an API host receives the runtime account's access
    token), and ``DEDUP_TARGET_AUTH=none`` to an HTTP target whose host is not loopback.

    Raises:
        ConfigError: naming the variable, the value's host and the fix.
    """
    env = declared(env)
    if env.get(ALLOW_TEST_ENDPOINTS_ENV, "").strip().lower() in ("1", "true"):
        return
    for name in GOOGLE_ENDPOINTS:
        url = env.get(name, "").strip()
        problem = google_endpoint_problem(name, url) if url else None
        if problem:
            raise ConfigError(f"{problem}; unset it, or set {ALLOW_TEST_ENDPOINTS_ENV}=1 in a test")
    if (env.get("DEDUP_TARGET_AUTH") or "").strip() == "none" and (env.get("DEDUP_TARGET_TYPE") or "").strip() == "http":
        host = urlsplit((env.get("DEDUP_TARGET") or "").strip()).hostname or ""
        if host and not _is_loopback(host):
            raise ConfigError(f"DEDUP_TARGET_AUTH=none sends the run to {host} without credentials: it is for tests "
                              f"against a loopback server only; set DEDUP_TARGET_AUTH=google (an ID token), or "
                              f"{ALLOW_TEST_ENDPOINTS_ENV}=1 in a test")


def _redirected(env: Mapping[str, str]) -> None:
    """A deployed handler (``K_SERVICE``: Cloud Run; ``GAE_APPLICATION``/``GAE_SERVICE``: App Engine) does not start
    beside a variable that redirects its store, credentials, metadata, TLS trust or proxy
    (:func:`~scheduler_dedup.handler.core.env_names.redirecting_variable`), unless ``DEDUP_ALLOW_TEST_ENDPOINTS`` is
    ``1``/``true`` (the local tools' App Engine server, which sets ``GAE_*`` and an emulator).

    Raises:
        ConfigError: naming every such variable, what it redirects and the fix.
    """
    env = declared(env)
    names = set(env)  # names only: the redirecting variables' values are never read
    deployed = names & {"K_SERVICE", "GAE_APPLICATION", "GAE_SERVICE"}
    if not deployed or env.get(ALLOW_TEST_ENDPOINTS_ENV, "").strip().lower() in ("1", "true"):
        return
    found = [redirecting_variable(name) for name in sorted(names) if redirecting_variable(name)]
    if found:
        raise ConfigError(f"the handler is deployed ({', '.join(sorted(deployed))} set) beside "
                          f"{len(found)} variable(s) that redirect it: " + "; ".join(str(f) for f in found))


#: The start-up checks, each reading the environment on its own (so one refusal does not hide another).
_CHECKS: tuple[Callable[[Mapping[str, str]], Any], ...] = (
    Settings.from_env, TargetSettings.from_env, _job_spec, CallerAuthSettings.from_env, _trust_premise,
    AppEngineCallerSettings.from_env, _test_only_settings, _redirected,
)


def read_startup_settings(env: Mapping[str, str]) -> StartupSettings:
    """Read and check the handler's ``DEDUP_*`` / ``GOOGLE_CLOUD_PROJECT`` environment.

    Runs every check the handler makes before serving that needs no import of the job module, no
    credentials and no Firestore: the settings' ranges and formats, the target's type and name, the
    ``DEDUP_JOB`` format (``module:function``), the ``DEDUP_OIDC_AUDIENCE`` / ``DEDUP_ALLOWED_CALLERS`` pair and
    trust mode's ``DEDUP_SERVICE``, ``DEDUP_APP_ENGINE_CALLER`` (App Engine: no OIDC settings beside it; on App
    Engine, on unless a reason says otherwise) and settings meant for tests (:func:`_test_only_settings`).

    Raises:
        ConfigError: the first refused variable; the message names it and the fix.
    """
    settings = Settings.from_env(env)
    target = TargetSettings.from_env(env)
    _job_spec(env)
    _trust_premise(env)
    _test_only_settings(env)
    _redirected(env)
    return StartupSettings(settings, target, CallerAuthSettings.from_env(env), AppEngineCallerSettings.from_env(env))


def startup_problems(env: Mapping[str, str], unknown: Collection[str] = ()) -> list[str]:
    """The messages :func:`read_startup_settings` would refuse ``env`` with, one per check.

    Args:
        env: the service's environment, variable -> value (every variable the handler will see).
        unknown: variables that will be set but whose values are not known yet (``pulumi preview``). They are
            left out of ``env``, and a refusal naming one of them is not reported: it may pass once known.

    Returns:
        ``ConfigError`` messages (each names its variable and the fix); empty when the handler would start.
    """
    known = {name: value for name, value in env.items() if name not in unknown}
    names = [re.compile(rf"\b{re.escape(name)}\b") for name in unknown]
    problems: list[str] = []
    for check in _CHECKS:
        if check is _job_spec and "DEDUP_TARGET_TYPE" in unknown:
            continue  # python (needs DEDUP_JOB) or a proxy target: not known yet
        try:
            check(known)
        except ConfigError as error:
            message = str(error)
            if not any(name.search(message) for name in names) and message not in problems:
                problems.append(message)
    return problems
