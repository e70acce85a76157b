"""Caller verification: the handler's second gate after Cloud Run IAM.

The ``X-CloudScheduler-*`` headers can be set by anyone who can reach the service. When
``DEDUP_OIDC_AUDIENCE`` and ``DEDUP_ALLOWED_CALLERS`` are both set, every request must carry
``Authorization: Bearer <Google-signed OIDC ID token>`` (what Cloud Scheduler sends with an
``oidc_token`` on the job) whose

- signature verifies against Google's certificates (``DEDUP_OIDC_CERTS_URL``, default
  https://www.googleapis.com/oauth2/v1/certs; fetched at most once per :data:`CERTS_TTL_SECONDS`),
- ``exp`` is in the future and ``iat`` not in it (60 s clock skew allowed),
- ``aud`` is one of the accepted audiences, compared exactly
  (:func:`scheduler_dedup.handler.audience.handler_accepts`),
- ``iss`` is ``https://accounts.google.com`` or ``accounts.google.com``,
- ``email`` is one of the allowed service accounts and ``email_verified`` is true.

Anything else is refused **before Firestore is touched**: 401 ``unauthorized`` (missing,
malformed, unsigned, badly signed, expired, wrong audience or issuer) or 403 ``forbidden`` (a
valid token for an email that is not allowed). If the certificates cannot be fetched the answer
is 500 ``auth_unavailable``, so Scheduler retries instead of dropping the run.

**Tokens Cloud Run already verified.** When Cloud Run IAM admits a request (the service is private),
Cloud Run forwards the token with its signature replaced by ``SIGNATURE_REMOVED_BY_GOOGLE``
(https://cloud.google.com/run/docs/troubleshooting#signature-removed), so no signature can be
checked in the container. With ``DEDUP_TRUST_CLOUD_RUN_IAM=true`` (the component sets it, because it
enforces Cloud Run IAM and grants no public invoker), such a token's claims are checked as above
without the signature: Cloud Run verified it. Without it, such tokens are refused (401) with a
message naming the variable. Never set it on a service that allows unauthenticated invocations:
there Cloud Run checks nothing, and a caller could send an unsigned token in that form.

Verification: https://googleapis.dev/python/google-auth/latest/reference/google.oauth2.id_token.html
(``verify_token``); Cloud Scheduler's OIDC token:
https://cloud.google.com/scheduler/docs/http-target-auth
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import google.auth.exceptions
import google.auth.transport
import google.auth.transport.requests
import google.oauth2.id_token

from scheduler_dedup.handler.audience import handler_accepts, split_audiences
from scheduler_dedup.handler.callers import parse_allowed_callers
from scheduler_dedup.handler.errors import ConfigError
from scheduler_dedup.handler.logs import LogField

log = logging.getLogger("scheduler_dedup")

GOOGLE_CERTS_URL = "https://www.googleapis.com/oauth2/v1/certs"
GOOGLE_ISSUERS = ("https://accounts.google.com", "accounts.google.com")
#: How long fetched certificates are reused, seconds (Google rotates keys over days).
CERTS_TTL_SECONDS = 3600.0
CLOCK_SKEW_SECONDS = 60
#: What Cloud Run puts in place of the signature of a token it verified.
REMOVED_SIGNATURE = "SIGNATURE_REMOVED_BY_GOOGLE"

#: ``(body, status)`` of a refusal.
Refusal = tuple[dict[str, Any], int]


@dataclass(frozen=True)
class CallerAuthSettings:
    """Accepted audiences and callers.

    Attributes:
        audiences: accepted ``aud`` values (``DEDUP_OIDC_AUDIENCE``, comma-separated; usually the
            service URL, which is what Cloud Scheduler's ``oidc_token.audience`` defaults to).
        allowed_callers: accepted ``email`` claims, service-account emails, lower-cased
            (``DEDUP_ALLOWED_CALLERS``, comma-separated emails or ``serviceAccount:EMAIL`` members; any
            other member type is refused, see :mod:`scheduler_dedup.handler.callers`).
        certs_url: certificate endpoint (``DEDUP_OIDC_CERTS_URL``; override in tests only).
        trust_cloud_run_iam: accept tokens whose signature Cloud Run removed after verifying them
            (``DEDUP_TRUST_CLOUD_RUN_IAM``, ``true``/``false``, default false); only for services that
            enforce Cloud Run IAM.
    """

    audiences: tuple[str, ...]
    allowed_callers: frozenset[str]
    certs_url: str = GOOGLE_CERTS_URL
    trust_cloud_run_iam: bool = False

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> "CallerAuthSettings | None":
        """The settings, or None when verification is off (neither variable set).

        Raises:
            ConfigError: only one of the two variables is set, one is empty of values, or an allowed
                caller is not a service account (:func:`~scheduler_dedup.handler.callers.normalise_caller`).
        """
        audiences = split_audiences(env.get("DEDUP_OIDC_AUDIENCE", ""))
        raw_callers = env.get("DEDUP_ALLOWED_CALLERS", "")
        if not audiences and not raw_callers.strip(" ,"):
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
        trust = env.get("DEDUP_TRUST_CLOUD_RUN_IAM", "false").strip().lower()
        if trust not in ("true", "false"):
            raise ConfigError(f"DEDUP_TRUST_CLOUD_RUN_IAM={trust!r} is not true or false: set true only if the service "
                              "enforces Cloud Run IAM (no allUsers invoker)")
        return cls(audiences, callers, certs_url, trust == "true")


class _CachingRequest(google.auth.transport.Request):
    """A google-auth transport request that reuses GET responses for ``ttl_seconds`` (the certs)."""

    def __init__(self, ttl_seconds: float):
        self._inner = google.auth.transport.requests.Request()
        self._ttl = ttl_seconds
        self._lock = threading.Lock()
        self._cache: dict[str, tuple[float, google.auth.transport.Response]] = {}

    def __call__(self, url: str, method: str = "GET", body: Any = None, headers: Any = None, timeout: Any = None,
                 **kwargs: Any) -> google.auth.transport.Response:
        if method != "GET":
            return self._inner(url, method=method, body=body, headers=headers, timeout=timeout, **kwargs)
        with self._lock:
            hit = self._cache.get(url)
            if hit is not None and time.monotonic() < hit[0]:
                return hit[1]
            response = self._inner(url, method="GET", headers=headers, timeout=timeout or 10, **kwargs)
            if response.status == 200:
                self._cache[url] = (time.monotonic() + self._ttl, response)
            return response


class CallerVerifier:
    """Verifies the caller's Google-signed OIDC ID token.

    Args:
        settings: the accepted audiences and callers.
        certs_ttl_seconds: how long fetched certificates are reused, seconds.
    """

    def __init__(self, settings: CallerAuthSettings, certs_ttl_seconds: float = CERTS_TTL_SECONDS):
        self.settings = settings
        self._request = _CachingRequest(certs_ttl_seconds)

    def check(self, authorization: str | None) -> Refusal | None:
        """None if the caller is allowed, else the ``(body, status)`` to answer (401, 403 or 500).

        Args:
            authorization: the request's ``Authorization`` header, or None.
        """
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return _refuse(401, "unauthorized", "missing Authorization: Bearer <Google-signed OIDC ID token>; give "
                           "the Scheduler job an oidc_token with the handler's audience")
        parts = token.strip().split(".")
        if len(parts) == 3 and parts[2] == REMOVED_SIGNATURE:
            return self._check_claims(*self._platform_verified_claims(parts[1]))
        try:
            claims = google.oauth2.id_token.verify_token(
                token.strip(), self._request, audience=list(self.settings.audiences),
                certs_url=self.settings.certs_url, clock_skew_in_seconds=CLOCK_SKEW_SECONDS)
        except google.auth.exceptions.TransportError as exc:
            log.error("could not fetch OIDC certificates: %s", exc, extra={LogField.OUTCOME: "auth_unavailable"})
            return _refuse(500, "auth_unavailable", "could not fetch the token-signing certificates; retry")
        except (ValueError, google.auth.exceptions.GoogleAuthError) as exc:
            return _refuse(401, "unauthorized", f"invalid ID token: {exc}")
        return self._check_claims(claims, None)

    def _platform_verified_claims(self, payload: str) -> tuple[dict[str, Any], Refusal | None]:
        """Claims of a token Cloud Run verified and forwarded without its signature (see the module docstring)."""
        if not self.settings.trust_cloud_run_iam:
            return {}, _refuse(401, "unauthorized", "the ID token's signature was removed by Cloud Run, so it cannot be "
                               "checked here: set DEDUP_TRUST_CLOUD_RUN_IAM=true if this service enforces Cloud Run IAM "
                               "(no allUsers invoker)")
        try:
            claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        except (ValueError, binascii.Error):
            return {}, _refuse(401, "unauthorized", "invalid ID token: its claims are not base64url JSON")
        if not isinstance(claims, dict):
            return {}, _refuse(401, "unauthorized", "invalid ID token: its claims are not a JSON object")
        now = time.time()
        exp = claims.get("exp")
        if not isinstance(exp, (int, float)) or exp + CLOCK_SKEW_SECONDS < now:
            return claims, _refuse(401, "unauthorized", "invalid ID token: expired or without exp")
        if not handler_accepts(str(claims.get("aud")), self.settings.audiences):
            return claims, _refuse(401, "unauthorized", f"invalid ID token: audience {claims.get('aud')!r} is not in "
                                   "DEDUP_OIDC_AUDIENCE")
        return claims, None

    def _check_claims(self, claims: Mapping[str, Any], refusal: Refusal | None) -> Refusal | None:
        """The checks every accepted token passes: Google issuer, verified and allowed email."""
        if refusal is not None:
            return refusal
        if claims.get("iss") not in GOOGLE_ISSUERS:
            return _refuse(401, "unauthorized", f"ID token issuer {claims.get('iss')!r} is not Google")
        email = str(claims.get("email") or "").lower()
        if not email or claims.get("email_verified") is not True:
            return _refuse(403, "forbidden", "ID token has no verified email; use a service account's OIDC token")
        if email not in self.settings.allowed_callers:
            return _refuse(403, "forbidden", f"caller {email} is not in DEDUP_ALLOWED_CALLERS")
        return None


def _refuse(status: int, kind: str, error: str) -> Refusal:
    log.warning("refused caller: %s", error, extra={LogField.OUTCOME: kind, LogField.HTTP_STATUS: status})
    return {"status": kind, "error": error}, status
