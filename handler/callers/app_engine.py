"""Caller verification on App Engine: the request reached the handler from Cloud Scheduler's App Engine target.

That target carries no OIDC token, so with ``DEDUP_APP_ENGINE_CALLER=true`` every request must carry a header App
Engine sets itself and strips from external requests, ``X-Appengine-Cron: true`` or ``X-AppEngine-QueueName: __cron``,
or it is refused with 403 before the store is touched (never 503: App Engine retries a 503 outside the retry count).
``X-CloudScheduler`` alone proves nothing. The proof holds only behind App Engine's front end, and an app's
administrators can set these headers; the sources and limits: docs/targets-and-auth.md#on-app-engine.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from scheduler_dedup.handler.core.errors import ConfigError
from scheduler_dedup.handler.core.logs import LogField
from scheduler_dedup.handler.schedule.run_key import HeaderSource
from scheduler_dedup.handler.core.statuses import DELIVERY, code
from scheduler_dedup.handler.core.variables import declared

log = logging.getLogger("scheduler_dedup")

#: The setting: ``true`` turns the check on (the component sets it on an App Engine deployment).
APP_ENGINE_CALLER_ENV = "DEDUP_APP_ENGINE_CALLER"
#: Why a handler on App Engine serves without the check (``DEDUP_APP_ENGINE_CALLER=false`` needs it).
APP_ENGINE_OPEN_REASON_ENV = "DEDUP_APP_ENGINE_OPEN_REASON"
#: Set by App Engine's runtime on every instance (https://cloud.google.com/appengine/docs/standard/python3/runtime#environment_variables).
APP_ENGINE_RUNTIME_ENV = ("GAE_APPLICATION", "GAE_SERVICE")
#: Set by App Engine's Cron Service (Cloud Scheduler's App Engine target); stripped from external requests.
CRON_HEADER = "X-Appengine-Cron"
#: App Engine's queue header; ``__cron`` for cron deliveries; stripped from external requests.
QUEUE_NAME_HEADER = "X-AppEngine-QueueName"
CRON_QUEUE_NAME = "__cron"
#: The OIDC settings an App Engine target can never satisfy (it sends no token).
_OIDC_VARIABLES = ("DEDUP_OIDC_AUDIENCE", "DEDUP_ALLOWED_CALLERS")

#: ``(body, status)`` of a refusal.
Refusal = tuple[dict[str, Any], int]


@dataclass(frozen=True)
class AppEngineCallerSettings:
    """The App Engine caller check's setting.

    Attributes:
        required: every request must prove it came from Cloud Scheduler through App Engine
            (``DEDUP_APP_ENGINE_CALLER``, ``true``/``false``; unset: true on App Engine, false elsewhere).
        open_reason: why a handler on App Engine serves without the check (``DEDUP_APP_ENGINE_OPEN_REASON``), or "".
    """

    required: bool = False
    open_reason: str = ""

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> "AppEngineCallerSettings":
        """Read ``DEDUP_APP_ENGINE_CALLER`` (and, on App Engine, ``DEDUP_APP_ENGINE_OPEN_REASON``).

        Fails closed on App Engine (``GAE_APPLICATION`` or ``GAE_SERVICE`` set, as App Engine's runtime sets them):
        App Engine has no IAM gate in front of the app, so unset means the check is on, and ``false`` needs a
        reason in ``DEDUP_APP_ENGINE_OPEN_REASON``.

        Raises:
            ConfigError: not ``true``/``false``; ``false`` on App Engine without a reason; or ``true`` (set or
                implied) together with ``DEDUP_OIDC_AUDIENCE`` / ``DEDUP_ALLOWED_CALLERS`` (an App Engine target
                carries no OIDC token, so every delivery would be refused); the message names the variables and the
                fix.
        """
        env = declared(env)
        on_app_engine = any(env.get(name, "").strip() for name in APP_ENGINE_RUNTIME_ENV)
        raw = env.get(APP_ENGINE_CALLER_ENV, "").strip().lower() or ("true" if on_app_engine else "false")
        if raw not in ("true", "false"):
            raise ConfigError(f"{APP_ENGINE_CALLER_ENV}={raw!r} is not true or false: set true when the handler is "
                              "served on App Engine behind a Scheduler job with an App Engine target")
        required = raw == "true"
        reason = env.get(APP_ENGINE_OPEN_REASON_ENV, "").strip()
        if on_app_engine and not required and not reason:
            raise ConfigError(f"{APP_ENGINE_CALLER_ENV}=false on App Engine, which has no IAM gate: anyone could run "
                              f"the job or claim a coming run; set {APP_ENGINE_CALLER_ENV}=true, or say why the app is "
                              f"open on purpose in {APP_ENGINE_OPEN_REASON_ENV}")
        oidc = [name for name in _OIDC_VARIABLES if env.get(name, "").strip(" ,")]
        if required and oidc:
            raise ConfigError(f"{APP_ENGINE_CALLER_ENV}=true and {' and '.join(oidc)} are both set: a Scheduler job's "
                              f"App Engine target sends no OIDC token, so every delivery would be refused; unset "
                              f"{' and '.join(oidc)} on App Engine (or {APP_ENGINE_CALLER_ENV} on Cloud Run)")
        if on_app_engine and reason and not required:
            log.warning("App Engine caller check off (%s=false): %s", APP_ENGINE_CALLER_ENV, reason)
        return cls(required, reason if not required else "")


def _values(headers: HeaderSource, name: str) -> list[str]:
    wanted = name.lower()
    return [part.strip() for key, value in headers.items() if key.lower() == wanted for part in value.split(",")]


class AppEngineCallerCheck:
    """Refuses requests that do not carry App Engine's proof of a Scheduler (cron) delivery."""

    def check(self, headers: HeaderSource) -> Refusal | None:
        """None if the request carries ``X-Appengine-Cron: true`` or ``X-AppEngine-QueueName: __cron``, else
        ``({"status": "forbidden", "error": ...}, code(DELIVERY, "forbidden"))`` (403).

        Args:
            headers: the request's headers (Flask's ``request.headers`` or a dict).
        """
        if "true" in (v.lower() for v in _values(headers, CRON_HEADER)) or \
                CRON_QUEUE_NAME in _values(headers, QUEUE_NAME_HEADER):
            return None
        error = (f"not a Cloud Scheduler delivery through App Engine: neither {CRON_HEADER}: true nor "
                 f"{QUEUE_NAME_HEADER}: {CRON_QUEUE_NAME} is present (App Engine sets them for Scheduler's App Engine "
                 f"target and strips them from external requests); unset {APP_ENGINE_CALLER_ENV} if this handler is "
                 "not served on App Engine")
        status = code(DELIVERY, "forbidden")
        log.warning("refused caller: %s", error, extra={LogField.OUTCOME: "forbidden", LogField.HTTP_STATUS: status})
        return {"status": "forbidden", "error": error}, status
