"""Which URLs count as Google's for the handler's endpoint settings: an exact allow-list, never a domain suffix.

Every ``*.googleapis.com`` host is Google's front end, but not every one answers as the API the handler means:
``storage.googleapis.com/<bucket>/certs.json`` and ``www.googleapis.com/storage/v1/b/<bucket>/o/<object>?alt=media``
serve anyone's public object. So each setting names one host (and the certificate URL one path), each from the page
that documents it (:data:`GOOGLE_ENDPOINTS`). The handler's start-up checks
(:mod:`scheduler_dedup.handler.service.startup`), and through them the component and the policy pack, call
:func:`google_endpoint_problem`. This module imports nothing of ours.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit


@dataclass(frozen=True)
class GoogleEndpoint:
    """The one Google URL a setting may name.

    Attributes:
        host: the exact host name (lower case).
        path: the exact path (the certificate URL), or ``""`` for an API base URL (no path but ``/``).
        source: the page that names the host (and path).
        risk: what whoever answers another URL gets, for messages.
    """

    host: str
    path: str
    source: str
    risk: str


_API_RISK = "receives the runtime account's access token"

#: The handler's endpoint settings -> the one Google URL each may name.
GOOGLE_ENDPOINTS: dict[str, GoogleEndpoint] = {
    # Google's token-signing keys as {kid: x509 PEM}, the form the handler reads: google-auth's
    # _GOOGLE_OAUTH2_CERTS_URL (https://googleapis.dev/python/google-auth/latest/reference/google.oauth2.id_token.html);
    # the same keys as JWKs are the jwks_uri of https://accounts.google.com/.well-known/openid-configuration
    # (https://developers.google.com/identity/openid-connect/openid-connect#discovery).
    "DEDUP_OIDC_CERTS_URL": GoogleEndpoint(
        "www.googleapis.com", "/oauth2/v1/certs",
        "https://googleapis.dev/python/google-auth/latest/reference/google.oauth2.id_token.html",
        "signs tokens the handler accepts"),
    "DEDUP_RUN_API": GoogleEndpoint(
        "run.googleapis.com", "", "https://cloud.google.com/run/docs/reference/rest (Service endpoint)", _API_RISK),
    "DEDUP_WORKFLOWS_API": GoogleEndpoint(
        "workflowexecutions.googleapis.com", "",
        "https://cloud.google.com/workflows/docs/reference/executions/rest (Service endpoint)", _API_RISK),
    "DEDUP_CLOUD_BUILD_API": GoogleEndpoint(
        "cloudbuild.googleapis.com", "", "https://cloud.google.com/build/docs/api/reference/rest (Service endpoint)",
        _API_RISK),
    "DEDUP_SCHEDULER_API": GoogleEndpoint(
        "cloudscheduler.googleapis.com", "",
        "https://cloud.google.com/scheduler/docs/reference/rest (Service endpoint)", _API_RISK),
}


def google_url(name: str) -> str:
    """The one Google URL setting ``name`` may hold (``https://run.googleapis.com``)."""
    endpoint = GOOGLE_ENDPOINTS[name]
    return f"https://{endpoint.host}{endpoint.path}"


def google_endpoint_problem(name: str, url: str) -> str | None:
    """Why ``url`` is not the Google endpoint setting ``name`` (a key of :data:`GOOGLE_ENDPOINTS`) may name, or None.

    Accepted: ``https://`` on exactly the listed host, no user, no port but 443, the listed path (an API base URL:
    none, or ``/``), no query or fragment. A message names the variable, what was given, the one URL accepted and
    its source.
    """
    endpoint = GOOGLE_ENDPOINTS[name]
    parts = urlsplit(url.strip())
    try:
        port = parts.port
    except ValueError:
        port = -1
    host = (parts.hostname or "").lower()
    path_ok = parts.path == endpoint.path or (not endpoint.path and parts.path == "/")
    if (parts.scheme == "https" and host == endpoint.host and port in (None, 443) and parts.username is None
            and path_ok and not parts.query and not parts.fragment):
        return None
    shown = f"{parts.scheme or '?'}://{parts.netloc.rsplit('@', 1)[-1] or '?'}{parts.path}"  # no user: it may hold a password
    return (f"{name} points at {shown}, not {google_url(name)} (the one Google URL it may name: {endpoint.source}): "
            f"it is for tests only (whoever answers it {endpoint.risk})")
