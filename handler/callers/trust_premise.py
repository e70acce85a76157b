"""Trust mode's premise, checked: this Cloud Run service is private and Cloud Run IAM guards it.

``DEDUP_TRUST_CLOUD_RUN_IAM=true`` accepts ID tokens whose signature Cloud Run removed, because Cloud Run verified
them; that holds only while no invoker role goes to ``allUsers`` or ``allAuthenticatedUsers`` and the invoker IAM
check is on. :class:`ServicePremise` reads both of its own service (``DEDUP_SERVICE``) through the Cloud Run Admin
API at start-up and every :data:`RECHECK_SECONDS` (a refusing verdict again after :data:`REFUSED_RECHECK_SECONDS`,
since grants propagate for minutes after a deploy). While it fails, every delivery is refused with 401 naming the
cause. docs/targets-and-auth.md says what the runtime account needs.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import requests

from scheduler_dedup.handler.core.deadline import total_deadline, with_total_deadline
from scheduler_dedup.handler.core.logs import LogField
from scheduler_dedup.handler.core.safe_text import scrub_secrets

log = logging.getLogger("scheduler_dedup")

#: Seconds between two checks of the service's IAM policy while the last one found it private.
RECHECK_SECONDS = 300.0
#: Seconds before a check that refused (public, invoker check off, unreadable) is made again.
REFUSED_RECHECK_SECONDS = 5.0
#: Members that make a binding public (https://cloud.google.com/iam/docs/principal-identifiers).
PUBLIC_MEMBERS = ("allUsers", "allAuthenticatedUsers")
#: How long each Admin API call may take in all (its access token's refresh, connect, headers, body), seconds.
CALL_TIMEOUT_SECONDS = 10.0


class ServicePremise:
    """Whether Cloud Run IAM guards ``service``, as last read from the Cloud Run Admin API.

    Args:
        service: ``projects/P/locations/L/services/S`` (``DEDUP_SERVICE``).
        session: how the API is called (an ``AuthorizedSession`` on the runtime identity; a plain session in tests).
        api: the Admin API's base URL (``DEDUP_RUN_API``), no trailing slash.
        clock: monotonic seconds (tests may pass another clock).
    """

    def __init__(self, service: str, session: requests.Session, api: str,
                 clock: Callable[[], float] = time.monotonic):
        self.service, self.session, self.api, self._clock = service, session, api, clock
        self._lock = threading.Lock()
        self._reason: str | None = "the service's IAM policy has not been read yet"
        self._checked_at = float("-inf")
        self._checking = False

    def refusal_reason(self) -> str | None:
        """None while the last check found the service private, else why trust mode refuses (the cause).

        Checks synchronously when nothing was checked yet or a refusing verdict is older than
        :data:`REFUSED_RECHECK_SECONDS`; starts a background re-check when a passing verdict is older than
        :data:`RECHECK_SECONDS`.
        """
        with self._lock:
            never = self._checked_at == float("-inf")
            refused = self._reason is not None
            interval = REFUSED_RECHECK_SECONDS if refused else RECHECK_SECONDS
            stale = self._clock() - self._checked_at >= interval
            start = stale and not self._checking and not never
            if start:
                self._checking = True
        if never or (start and refused):  # refused anyway: this request may as well wait for the fresh verdict
            self.check()
        elif start:
            threading.Thread(target=self.check, name="dedup-trust-premise", daemon=True).start()
        with self._lock:
            return self._reason

    def check(self) -> str | None:
        """Read the service and its IAM policy now; returns (and keeps) the refusal reason, None when private."""
        try:
            reason = self._read_reason()
        except Exception as exc:  # any failure to read is a reason to refuse, never to trust
            reason = f"the handler could not read {self.service}: {scrub_secrets(str(exc))[:300]}"
        with self._lock:
            self._reason, self._checked_at, self._checking = reason, self._clock(), False
        if reason is not None:
            log.error("trust mode refuses every delivery: %s", reason,
                      extra={LogField.OUTCOME: "trust_premise_failed", LogField.ERROR: reason})
        return reason

    def _read_reason(self) -> str | None:
        service = self._get(f"{self.api}/v2/{self.service}", "the service (run.services.get)")
        if service.get("invokerIamDisabled") is True:
            return (f"{self.service} has invokerIamDisabled=true: Cloud Run checks no token, so a token without its "
                    "signature proves nothing; turn the invoker IAM check back on")
        policy = self._get(f"{self.api}/v2/{self.service}:getIamPolicy",
                           "its IAM policy (run.services.getIamPolicy; grant roles/run.viewer on the service)")
        for binding in policy.get("bindings") or []:
            members = [m for m in (binding.get("members") or []) if m in PUBLIC_MEMBERS]
            if members:
                return (f"{self.service} grants {binding.get('role')} to {', '.join(members)}: the service is public, "
                        "so Cloud Run verifies no token; remove that binding, or set DEDUP_TRUST_CLOUD_RUN_IAM=false "
                        "and let the handler verify signatures")
        return None

    def _get(self, url: str, what: str) -> dict[str, Any]:
        """One Admin API read, its access token's refresh and its body included, within :data:`CALL_TIMEOUT_SECONDS`
        in all (:func:`~scheduler_dedup.handler.core.deadline.total_deadline`)."""
        with total_deadline(CALL_TIMEOUT_SECONDS) as watch:
            try:
                response = with_total_deadline(self.session).get(url, timeout=CALL_TIMEOUT_SECONDS)
                status = response.status_code
                body = response.json() if status == 200 else None
            except ValueError:  # before RequestException: requests' JSONDecodeError is both
                cut = " (cut off at the deadline)" if watch.fired else ""
                raise RuntimeError(f"{what}: the answer is not JSON{cut}") from None
            except requests.RequestException as exc:
                late = " within the deadline" if watch.fired or isinstance(exc, requests.Timeout) else ""
                raise RuntimeError(f"{what}: no answer{late} ({type(exc).__name__})") from None
        if status != 200:
            raise RuntimeError(f"{what}: HTTP {status}")
        if not isinstance(body, dict):
            raise RuntimeError(f"{what}: the answer is not a JSON object")
        return body
