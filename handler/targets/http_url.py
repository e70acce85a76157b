"""The HTTP target (an ``https://`` URL): POST ``{"run_id", "job_name", "schedule_time", "previous_schedule_time"}``
once per run.

The call carries ``Idempotency-Key: <run id>`` and a Google-signed ID token for ``DEDUP_TARGET_AUDIENCE`` (by
default :func:`~scheduler_dedup.handler.callers.audience.target_audience` of the URL). The target cannot see the
endpoint's state: a retry after a lost answer calls again with the same key, so only an endpoint that deduplicates
on it (``@idempotent_endpoint``) runs once. The result is the status code; the body is never read. The URL is
shown only as :func:`~scheduler_dedup.handler.core.safe_text.shown_url` does: a webhook URL's path is its secret.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from scheduler_dedup.handler.core.deadline import (CredentialDeadlineExceeded, google_auth_request, remaining_seconds,
                                                   total_deadline)
from scheduler_dedup.handler.core.safe_text import hide_url, scrub_secrets
from scheduler_dedup.handler.protocol.job import ScheduledRun
from scheduler_dedup.handler.targets.call import HttpSession, TargetRetryableError, call, previous_rfc3339, rfc3339
from scheduler_dedup.handler.targets.settings import DEFAULT_TIMEOUT_SECONDS


class IdTokenSource:
    """Google-signed ID tokens for one audience, cached until 5 minutes before they expire.

    Uses ``google.oauth2.id_token.fetch_id_token`` (metadata server on Cloud Run, or a service
    account key file): https://googleapis.dev/python/google-auth/latest/reference/google.oauth2.id_token.html
    A fetch, and a wait for another caller's fetch, end by the current total deadline
    (:func:`~scheduler_dedup.handler.core.deadline.google_auth_request`).

    Raises (from :meth:`token`):
        google.auth.exceptions.DefaultCredentialsError: no credentials can mint ID tokens.
        CredentialDeadlineExceeded: no token by the current deadline.
    """

    def __init__(self, audience: str):
        self.audience = audience
        self._lock = threading.Lock()
        self._token = ""
        self._expires = 0.0

    def token(self) -> str:
        left = remaining_seconds()
        if not self._lock.acquire(timeout=-1 if left is None else left):
            raise CredentialDeadlineExceeded("another run's ID token fetch did not end within this call's deadline")
        try:
            if time.time() < self._expires - 300:
                return self._token
            import google.auth.jwt
            import google.oauth2.id_token

            token = google.oauth2.id_token.fetch_id_token(google_auth_request(), self.audience)
            claims = google.auth.jwt.decode(token, verify=False)
            self._token, self._expires = token, float(claims.get("exp", 0))
            return token
        finally:
            self._lock.release()


class HttpTarget:
    """POST to a URL once per run with ``Idempotency-Key: <run id>`` (see the module docstring).

    Args:
        url: the endpoint.
        session: a plain session (the ID token is added per call).
        token: returns the bearer ID token, or None for no ``Authorization`` header (tests).
        timeout_seconds: how long the call may take in all, the ID token's fetch included, seconds.
    """

    def __init__(self, url: str, session: HttpSession, token: Callable[[], str] | None,
                 timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS):
        self.url, self.session, self.token, self.timeout = url, session, token, timeout_seconds
        self.shown_url = hide_url(url)  # from now on no text of this process shows the URL whole

    def __call__(self, run: ScheduledRun) -> dict[str, Any]:
        """Call the endpoint.

        Returns:
            ``{"target": "http", "url": shown URL, "status_code": int}``; the URL as
            :func:`~scheduler_dedup.handler.core.safe_text.shown_url` shows it (scheme, host, a hash of the rest).

        Raises:
            TargetRetryableError, NonRetryableJobError: see :func:`~scheduler_dedup.handler.targets.call.call`.
        """
        headers = {"Idempotency-Key": run.run_id}
        started, left = time.monotonic(), self.timeout
        if self.token is not None:
            try:
                with total_deadline(self.timeout):  # the fetch, and the POST below, share the call's timeout
                    headers["Authorization"] = f"Bearer {self.token()}"
            except Exception as exc:  # metadata server hiccup: retry later, do not record failed
                within = f" within {self.timeout:g} s" if isinstance(exc, CredentialDeadlineExceeded) else ""
                raise TargetRetryableError(f"could not mint an ID token for the HTTP target{within}: "
                                           f"{scrub_secrets(repr(exc))[:200]}") from exc
            left = round(self.timeout - (time.monotonic() - started), 3)
            if left <= 0:
                raise TargetRetryableError(f"POST {self.shown_url}: the ID token took the whole {self.timeout:g} s; "
                                           "nothing was sent")
        body = {"run_id": run.run_id, "job_name": run.job_name, "schedule_time": rfc3339(run),
                "previous_schedule_time": previous_rfc3339(run)}
        response = call(self.session, "POST", self.url, left, f"POST {self.shown_url}", "http", json=body,
                         headers=headers, body_limit=0)  # only the status is used: the body is never read
        return {"target": "http", "url": self.shown_url, "status_code": response.status_code}
