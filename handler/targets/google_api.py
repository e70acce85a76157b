"""The HTTP session Google APIs are called through (the proxy targets, trust mode's premise check, the run check's
job state), with google-auth and requests imported only when one is made."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import requests

_CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"


def google_api_session(auth: str = "google") -> "requests.Session":
    """The session Google APIs are called through: an ``AuthorizedSession`` on Application Default Credentials
    (cloud-platform scope), or a plain one with ``DEDUP_TARGET_AUTH=none`` (tests: no credentials looked up).

    Raises:
        google.auth.exceptions.DefaultCredentialsError: no Application Default Credentials.
    """
    import requests

    if auth == "none":
        return requests.Session()
    import google.auth
    from google.auth.transport.requests import AuthorizedSession

    from scheduler_dedup.handler.core.deadline import google_auth_request

    credentials, _ = google.auth.default(scopes=[_CLOUD_PLATFORM_SCOPE])
    # Token refreshes go through a transport the call's total deadline bounds (core.deadline.google_auth_request).
    return AuthorizedSession(credentials, auth_request=google_auth_request())
