"""Caller verification's settings (``DEDUP_OIDC_AUDIENCE``, ``DEDUP_ALLOWED_CALLERS``, ``DEDUP_OIDC_CERTS_URL``,
``DEDUP_TRUST_CLOUD_RUN_IAM``), read and checked without google-auth: the start-up checks, the component and the
policy pack read them, and only a handler that verifies callers imports the verifier
(:mod:`scheduler_dedup.handler.callers.oidc`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from scheduler_dedup.handler.callers.allowed import parse_allowed_caller_ids, parse_allowed_callers
from scheduler_dedup.handler.callers.audience import split_audiences
from scheduler_dedup.handler.core.errors import ConfigError
from scheduler_dedup.handler.core.google_endpoints import google_url
from scheduler_dedup.handler.core.variables import declared

GOOGLE_CERTS_URL = google_url("DEDUP_OIDC_CERTS_URL")


@dataclass(frozen=True)
class CallerAuthSettings:
    """Accepted audiences and callers.

    Attributes:
        audiences: accepted ``aud`` values (``DEDUP_OIDC_AUDIENCE``, comma-separated; usually the
            service URL, which is what Cloud Scheduler's ``oidc_token.audience`` defaults to).
        allowed_callers: accepted ``email`` claims, service-account emails, lower-cased
            (``DEDUP_ALLOWED_CALLERS``, comma-separated emails or ``serviceAccount:EMAIL`` members; any
            other member type is refused, see :mod:`scheduler_dedup.handler.callers.allowed`).
        allowed_caller_ids: accepted ``sub`` claims, the allowed accounts' unique ids (``DEDUP_ALLOWED_CALLER_IDS``,
            comma-separated); empty: any account of an allowed email.
        certs_url: certificate endpoint (``DEDUP_OIDC_CERTS_URL``; override in tests only).
        trust_cloud_run_iam: accept tokens whose signature Cloud Run removed after verifying them
            (``DEDUP_TRUST_CLOUD_RUN_IAM``, ``true``/``false``, default false); only for services that
            enforce Cloud Run IAM, which the handler then checks itself (``DEDUP_SERVICE``).
    """

    audiences: tuple[str, ...]
    allowed_callers: frozenset[str]
    certs_url: str = GOOGLE_CERTS_URL
    trust_cloud_run_iam: bool = False
    allowed_caller_ids: frozenset[str] = frozenset()

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> "CallerAuthSettings | None":
        """The settings, or None when verification is off (neither variable set).

        Raises:
            ConfigError: only one of the two variables is set, one is empty of values, an allowed
                caller is not a service account (:func:`~scheduler_dedup.handler.callers.allowed.normalise_caller`),
                or ``DEDUP_TRUST_CLOUD_RUN_IAM`` is not ``true``/``false`` or is true with verification off.
        """
        env = declared(env)
        audiences = split_audiences(env.get("DEDUP_OIDC_AUDIENCE", ""))
        raw_callers = env.get("DEDUP_ALLOWED_CALLERS", "")
        trust = env.get("DEDUP_TRUST_CLOUD_RUN_IAM", "false").strip().lower()
        if trust not in ("true", "false"):
            raise ConfigError(f"DEDUP_TRUST_CLOUD_RUN_IAM={trust!r} is not true or false: set true only if the service "
                              "enforces Cloud Run IAM (no allUsers invoker)")
        if not audiences and not raw_callers.strip(" ,"):
            if env.get("DEDUP_ALLOWED_CALLER_IDS", "").strip(" ,"):
                raise ConfigError("DEDUP_ALLOWED_CALLER_IDS is set but caller verification is off: set "
                                  "DEDUP_OIDC_AUDIENCE and DEDUP_ALLOWED_CALLERS, or unset DEDUP_ALLOWED_CALLER_IDS")
            if trust == "true":
                raise ConfigError("DEDUP_TRUST_CLOUD_RUN_IAM=true but caller verification is off: set "
                                  "DEDUP_OIDC_AUDIENCE and DEDUP_ALLOWED_CALLERS, or unset DEDUP_TRUST_CLOUD_RUN_IAM")
            return None
        if not audiences:
            raise ConfigError("DEDUP_ALLOWED_CALLERS is set but DEDUP_OIDC_AUDIENCE is not: set DEDUP_OIDC_AUDIENCE "
                              "to the audience Cloud Scheduler's OIDC token carries (the service URL), or unset both")
        callers = parse_allowed_callers(raw_callers)
        if not callers:
            raise ConfigError("DEDUP_OIDC_AUDIENCE is set but DEDUP_ALLOWED_CALLERS is not: set DEDUP_ALLOWED_CALLERS "
                              "to the Scheduler job's service-account email(s), comma-separated, or unset both")
        certs_url = env.get("DEDUP_OIDC_CERTS_URL", "").strip() or GOOGLE_CERTS_URL
        if not certs_url.startswith(("https://", "http://")):
            raise ConfigError(f"DEDUP_OIDC_CERTS_URL={certs_url!r} is not a URL: unset it to use Google's")
        ids = parse_allowed_caller_ids(env.get("DEDUP_ALLOWED_CALLER_IDS", ""))
        return cls(audiences, callers, certs_url, trust == "true", ids)
