"""Caller verification: the handler's second gate after Cloud Run IAM, since anyone who reaches the service can set
``X-CloudScheduler-*`` headers.

With ``DEDUP_OIDC_AUDIENCE`` and ``DEDUP_ALLOWED_CALLERS`` set, every request must carry a Google-signed OIDC ID
token, read from the header Cloud Run checked (:func:`identity_token`) and held to :func:`token_problem`; its
signature is checked against Google's certificates (:class:`SigningKeys`), or, for a token Cloud Run already verified
(signature removed), trusted only while trust mode's premise holds (:mod:`.trust_premise`). A refusal (401, 403; 500
``auth_unavailable`` when the certificates cannot be fetched) comes before the store is touched and never shows the
token. :class:`CallerVerifier` is what the app calls; :func:`build_caller_verifier` picks the mode. The checks and
their sources: docs/targets-and-auth.md.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Mapping
from typing import Any, Protocol

import google.auth.exceptions
import google.auth.jwt
import requests
from werkzeug.http import parse_cache_control_header

from scheduler_dedup.handler.callers.audience import handler_accepts
from scheduler_dedup.handler.callers.oidc_settings import CallerAuthSettings
from scheduler_dedup.handler.core.logs import LogField
from scheduler_dedup.handler.schedule.run_key import HeaderSource
from scheduler_dedup.handler.core.safe_text import scrub_secrets
from scheduler_dedup.handler.core.statuses import DELIVERY, code
from scheduler_dedup.handler.core.deadline import read_bounded, total_deadline, with_total_deadline

log = logging.getLogger("scheduler_dedup")

GOOGLE_ISSUERS = ("https://accounts.google.com", "accounts.google.com")
#: Certificates are reused this long when the endpoint sends no ``Cache-Control: max-age``, seconds.
DEFAULT_CERTS_TTL_SECONDS = 3600.0
#: Longest ``max-age`` honoured, seconds: a day (Google publishes new keys days before it signs with them).
MAX_CERTS_TTL_SECONDS = 86400.0
#: An unknown ``kid`` refetches the certificates at most this often, seconds: a stream of forged ``kid`` values
#: cannot turn every request into a fetch.
KID_REFETCH_INTERVAL_SECONDS = 30.0
#: Bytes of the certificate endpoint's answer read at most (Google's holds two or three PEM certificates, ~4 KB).
MAX_CERTS_BYTES = 256 * 1024
#: Leeway on ``iat`` and ``exp``, seconds (OpenID Connect Core 1.0 section 3.1.3.7 allows "a small leeway";
#: google-auth's ``clock_skew_in_seconds``).
CLOCK_SKEW_SECONDS = 60
#: Longest ``exp - iat`` accepted, seconds: Google's ID tokens live one hour
#: (https://cloud.google.com/docs/authentication/token-types#id-lifetime).
MAX_TOKEN_LIFETIME_SECONDS = 3600
#: The one algorithm Google signs ID tokens with (the ``alg`` of https://www.googleapis.com/oauth2/v3/certs keys).
TOKEN_ALGORITHM = "RS256"
#: What Cloud Run puts in place of the signature of a token it verified.
REMOVED_SIGNATURE = "SIGNATURE_REMOVED_BY_GOOGLE"
#: The header Cloud Run checks first; when present, ``Authorization`` is neither checked nor used for identity.
SERVERLESS_AUTHORIZATION = "X-Serverless-Authorization"
AUTHORIZATION = "Authorization"

#: ``(body, status)`` of a refusal.
Refusal = tuple[dict[str, Any], int]


class CallerVerifier(Protocol):
    """A verification mode: decides from a request's headers whether its caller may be served."""

    def check(self, headers: HeaderSource) -> Refusal | None:
        """None if the caller is allowed, else the ``(body, status)`` to answer (401, 403 or 500)."""
        ...


class TrustPremise(Protocol):
    """What trust mode relies on (:class:`~scheduler_dedup.handler.callers.trust_premise.ServicePremise`)."""

    def refusal_reason(self) -> str | None:
        """None while Cloud Run IAM is known to guard this service, else why trust mode must refuse."""
        ...


class CallerRefused(Exception):
    """A request's caller is refused; ``refusal`` is the ``(body, status)`` to answer."""

    def __init__(self, refusal: Refusal):
        super().__init__(refusal[0]["error"])
        self.refusal = refusal


def identity_token(headers: HeaderSource) -> tuple[str, str]:
    """``(header name, token)`` of the header Cloud Run checked.

    ``X-Serverless-Authorization`` when the request has it (then ``Authorization`` is ignored), else
    ``Authorization``; names compared case-insensitively.

    Raises:
        CallerRefused: 401, the header holds no bearer token or is sent more than once.
    """
    found: dict[str, list[str]] = {}
    for name, value in headers.items():
        if name.lower() in (SERVERLESS_AUTHORIZATION.lower(), AUTHORIZATION.lower()):
            found.setdefault(name.lower(), []).append(value)
    header = SERVERLESS_AUTHORIZATION if SERVERLESS_AUTHORIZATION.lower() in found else AUTHORIZATION
    values = found.get(header.lower(), [])
    if len(values) > 1 or any("," in value for value in values):  # WSGI servers comma-join repeated headers
        raise CallerRefused(_refuse("unauthorized", f"{header} is sent more than once; send one bearer token"))
    scheme, _, token = (values[0] if values else "").strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise CallerRefused(_refuse(
            "unauthorized", f"missing {AUTHORIZATION}: Bearer <Google-signed OIDC ID token> (or "
            f"{SERVERLESS_AUTHORIZATION}); give the Scheduler job an oidc_token with the handler's audience"))
    return header, token.strip()


def token_problem(header: Mapping[str, Any], claims: Mapping[str, Any], audiences: tuple[str, ...],
                  now: float | None = None) -> str | None:
    """Why a token with this JOSE ``header`` and these ``claims`` is not a well-formed Google ID token for us, or None.

    Checks ``alg``, ``kid``, ``iat``, ``exp``, the lifetime and ``aud`` (see the module docstring); issuer and
    email are :meth:`OidcVerifier._caller_problem`'s. ``now`` is seconds since the epoch (default: the clock).
    """
    now = time.time() if now is None else now
    if header.get("alg") != TOKEN_ALGORITHM:
        return f"its algorithm is {str(header.get('alg'))[:20]!r}, not {TOKEN_ALGORITHM} (Google signs ID tokens so)"
    if not isinstance(header.get("kid"), str) or not header["kid"]:
        return "its header names no signing key (kid)"
    iat, exp = claims.get("iat"), claims.get("exp")
    for name, value in (("iat", iat), ("exp", exp)):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return f"it has no numeric {name} claim"
    assert isinstance(iat, (int, float)) and isinstance(exp, (int, float))
    if exp - iat > MAX_TOKEN_LIFETIME_SECONDS:
        return (f"it is valid for {exp - iat:.0f} s, longer than Google's ID tokens ({MAX_TOKEN_LIFETIME_SECONDS} s): "
                "it was not minted by Google")
    if iat > now + CLOCK_SKEW_SECONDS:
        return "it was issued in the future"
    if exp < now - CLOCK_SKEW_SECONDS:
        return "it has expired"
    if not handler_accepts(str(claims.get("aud")), audiences):
        return f"its audience {str(claims.get('aud'))[:200]!r} is not in DEDUP_OIDC_AUDIENCE"
    return None


class SigningKeys:
    """Google's token-signing certificates, ``{kid: PEM}``, cached as the endpoint's ``Cache-Control`` says.

    Args:
        certs_url: the endpoint (``{kid: x509 PEM}``, as https://www.googleapis.com/oauth2/v1/certs).
        timeout_seconds: how long one fetch may take in all (connect, headers, body), seconds; also the longest a
            caller waits for the fetch in flight.

    :meth:`certs_for` refetches once when a token names a ``kid`` the cached set lacks (a key rotated in since
    the last fetch), at most once per :data:`KID_REFETCH_INTERVAL_SECONDS`.

    **Single flight, no queue.** At most one fetch is in flight. A caller that needs fresh certificates while one
    is in flight does not start another: if the cached set (expired or not) holds its ``kid`` it uses that at
    once, else it waits for that one fetch's result, at most ``timeout_seconds``. So no caller ever waits for more
    than one fetch, however slow the endpoint, and a flood of forged tokens costs one fetch at a time.
    """

    def __init__(self, certs_url: str, timeout_seconds: float = 10.0):
        self.certs_url = certs_url
        self._session = with_total_deadline(requests.Session())
        self._timeout = timeout_seconds
        self._lock = threading.Lock()  # held only to read or swap the state below, never during a fetch
        self._certs: dict[str, str] = {}
        self._expires = 0.0
        self._last_kid_refetch = float("-inf")
        self._in_flight: _Fetch | None = None

    def certs_for(self, kid: str) -> dict[str, str]:
        """The certificates, fresh per their ``max-age``, refetched (rate-limited) if ``kid`` is not among them.

        Raises:
            google.auth.exceptions.TransportError: the endpoint could not be read (not 200, not JSON, unreachable,
                slower than ``timeout_seconds``), or the fetch in flight did not end within ``timeout_seconds``.
        """
        with self._lock:
            now = time.monotonic()
            stale = now >= self._expires
            unknown_kid = kid not in self._certs and now - self._last_kid_refetch >= KID_REFETCH_INTERVAL_SECONDS
            if not stale and not unknown_kid:
                return self._certs
            fetch = self._in_flight
            if fetch is not None and kid in self._certs:
                return self._certs  # stale while the fetch in flight revalidates them
            leader = fetch is None
            if fetch is None:
                fetch = self._in_flight = _Fetch()
                if not stale:
                    self._last_kid_refetch = now
        if leader:
            self._lead(fetch)
        elif not fetch.done.wait(self._timeout):
            raise google.auth.exceptions.TransportError("the certificate fetch in flight did not end within "
                                                        f"{self._timeout:g} s")
        if fetch.error is not None:
            raise fetch.error
        return fetch.certs

    def _lead(self, fetch: "_Fetch") -> None:
        """Make the one fetch, publish its result to the cache and to every caller waiting for it."""
        try:
            certs, ttl = self._fetch()
            with self._lock:
                self._certs, self._expires = certs, time.monotonic() + ttl
            fetch.certs = certs
        except google.auth.exceptions.TransportError as exc:
            fetch.error = exc
        finally:
            with self._lock:
                self._in_flight = None
            fetch.done.set()

    def _fetch(self) -> tuple[dict[str, str], float]:
        """``(certificates, seconds they may be reused)`` from one GET, which ends within ``timeout_seconds`` in all."""
        try:
            with total_deadline(self._timeout) as watch:
                response = self._session.get(self.certs_url, timeout=self._timeout, stream=True)
                data, complete = read_bounded(response, MAX_CERTS_BYTES)
                cut = watch.fired
        except requests.RequestException as exc:
            raise google.auth.exceptions.TransportError(
                f"the certificate endpoint could not be read within {self._timeout:g} s "
                f"({type(exc).__name__})") from exc
        if cut:
            raise google.auth.exceptions.TransportError(f"the certificate endpoint did not answer within "
                                                        f"{self._timeout:g} s in all")
        if response.status_code != 200:
            raise google.auth.exceptions.TransportError(f"HTTP {response.status_code} from the certificate endpoint")
        if not complete:
            raise google.auth.exceptions.TransportError(f"the certificate endpoint answered more than "
                                                        f"{MAX_CERTS_BYTES} bytes")
        try:
            certs = json.loads(data.decode("utf-8"))
        except ValueError:
            raise google.auth.exceptions.TransportError("the certificate endpoint did not answer JSON") from None
        if not isinstance(certs, dict) or not all(isinstance(v, str) for v in certs.values()):
            raise google.auth.exceptions.TransportError("the certificate endpoint did not answer {kid: certificate}")
        return certs, _max_age(response.headers)


class _Fetch:
    """One certificate fetch in flight: the callers waiting for it wait on ``done``, then read its result."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.certs: dict[str, str] = {}
        self.error: google.auth.exceptions.TransportError | None = None


def _max_age(headers: Mapping[str, str]) -> float:
    """Seconds the certificates may be reused per ``Cache-Control`` (RFC 9111 section 5.2.2.1), capped at a day."""
    value = next((v for k, v in headers.items() if k.lower() == "cache-control"), None)
    if value is None:
        return DEFAULT_CERTS_TTL_SECONDS
    control = parse_cache_control_header(value)
    if control.no_store or control.no_cache:
        return 0.0
    if control.max_age is None:
        return DEFAULT_CERTS_TTL_SECONDS
    return float(min(max(control.max_age, 0), MAX_CERTS_TTL_SECONDS))


class OidcVerifier:
    """Verifies the caller's Google OIDC ID token (see the module docstring).

    Args:
        settings: the accepted audiences and callers.
        premise: trust mode's proof that Cloud Run IAM guards this service; required when
            ``settings.trust_cloud_run_iam`` is set (None there means the caller vouches for it: offline checks).
    """

    def __init__(self, settings: CallerAuthSettings, premise: TrustPremise | None = None):
        self.settings = settings
        self.premise = premise
        self.keys = SigningKeys(settings.certs_url)

    def check(self, headers: HeaderSource) -> Refusal | None:
        """None if the caller is allowed, else the ``(body, status)`` to answer (401, 403 or 500)."""
        if self.settings.trust_cloud_run_iam and self.premise is not None:
            reason = self.premise.refusal_reason()
            if reason is not None:
                return _refuse("unauthorized", f"DEDUP_TRUST_CLOUD_RUN_IAM=true is refused: {reason}")
        try:
            header_name, token = identity_token(headers)
        except CallerRefused as refused:
            return refused.refusal
        try:
            jose, claims, signature = _decode_unverified(token)
        except ValueError as exc:
            return _refuse("unauthorized", f"{header_name} holds no valid ID token: {exc}")
        problem = token_problem(jose, claims, self.settings.audiences)
        if problem is not None:
            return _refuse("unauthorized", f"{header_name} holds no valid ID token: {problem}")
        if signature == REMOVED_SIGNATURE:
            if not self.settings.trust_cloud_run_iam:
                return _refuse("unauthorized", f"the ID token in {header_name} had its signature removed by Cloud "
                               "Run, so it cannot be checked here: set DEDUP_TRUST_CLOUD_RUN_IAM=true if this service "
                               "enforces Cloud Run IAM (no allUsers invoker)")
        else:
            try:
                certs = self.keys.certs_for(str(jose["kid"]))
                claims = google.auth.jwt.decode(token, certs=certs, audience=list(self.settings.audiences),
                                                clock_skew_in_seconds=CLOCK_SKEW_SECONDS)
            except google.auth.exceptions.TransportError as exc:
                log.error("could not fetch OIDC certificates: %s", scrub_secrets(str(exc)),
                          extra={LogField.OUTCOME: "auth_unavailable"})
                return _refuse("auth_unavailable", "could not fetch the token-signing certificates; retry")
            except (ValueError, google.auth.exceptions.GoogleAuthError) as exc:
                return _refuse("unauthorized", f"{header_name} holds no valid ID token: "
                               f"{_library_reason(exc)}")
        return self._caller_problem(claims)

    def _caller_problem(self, claims: Mapping[str, Any]) -> Refusal | None:
        """The checks on who the token names: Google issuer, verified and allowed email, pinned unique id."""
        if claims.get("iss") not in GOOGLE_ISSUERS:
            return _refuse("unauthorized", f"ID token issuer {str(claims.get('iss'))[:200]!r} is not Google")
        email = str(claims.get("email") or "").lower()
        if not email or claims.get("email_verified") is not True:
            return _refuse("forbidden", "ID token has no verified email; use a service account's OIDC token")
        if email not in self.settings.allowed_callers:
            return _refuse("forbidden", f"caller {email[:320]} is not in DEDUP_ALLOWED_CALLERS")
        ids = self.settings.allowed_caller_ids
        if ids and str(claims.get("sub") or "") not in ids:
            return _refuse("forbidden", f"caller {email[:320]} is not the account DEDUP_ALLOWED_CALLER_IDS pins (its "
                           f"unique id, the token's sub, is {str(claims.get('sub'))[:40]!r}): an account deleted and "
                           "recreated under the same email is another account; update DEDUP_ALLOWED_CALLER_IDS")
        return None


def build_caller_verifier(settings: CallerAuthSettings | None, premise: TrustPremise | None) -> CallerVerifier | None:
    """The verification mode the settings ask for, or None when verification is off."""
    if settings is None:
        return None
    return OidcVerifier(settings, premise)


def _decode_unverified(token: str) -> tuple[Mapping[str, Any], Mapping[str, Any], str]:
    """``(JOSE header, claims, signature segment)`` of a compact JWS, unverified (google-auth's own parser).

    Raises:
        ValueError: not three base64url JSON segments; the message never quotes the token.
    """
    if token.count(".") != 2:
        raise ValueError("it is not a JWT (three dot-separated segments)")
    try:
        header = google.auth.jwt.decode_header(token)
        claims = google.auth.jwt.decode(token, verify=False)
    except (ValueError, google.auth.exceptions.GoogleAuthError, UnicodeDecodeError):
        raise ValueError("its segments are not base64url JSON objects") from None
    if not isinstance(header, Mapping) or not isinstance(claims, Mapping):
        raise ValueError("its segments are not JSON objects")
    return header, claims, token.rsplit(".", 1)[1]


def _library_reason(exc: BaseException) -> str:
    """google-auth's reason for refusing a token, without any part of the token (its messages may quote it)."""
    text = scrub_secrets(str(exc))
    if "signature" in text.lower():
        return "its signature does not verify against Google's certificates"
    if "key id" in text.lower() or "certificate for" in text.lower():
        return "it is signed with a key Google does not publish"
    return text[:200]


def _refuse(kind: str, error: str) -> Refusal:
    """The answer ``kind`` (``unauthorized``, ``forbidden``, ``auth_unavailable``) with its delivery status code."""
    error = scrub_secrets(error)
    status = code(DELIVERY, kind)
    log.warning("refused caller: %s", error, extra={LogField.OUTCOME: kind, LogField.HTTP_STATUS: status})
    return {"status": kind, "error": error}, status
