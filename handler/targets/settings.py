"""The proxy target's settings (``DEDUP_TARGET_TYPE``, ``DEDUP_TARGET`` and the rest), checked when read: a
wrong one stops the instance at start-up with a message naming the variable and the fix.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlparse

from scheduler_dedup.handler.callers.audience import misspelt_target_audience, target_audience
from scheduler_dedup.handler.core.errors import ConfigError
from scheduler_dedup.handler.core.google_endpoints import google_url
from scheduler_dedup.handler.core.safe_text import hide_url
from scheduler_dedup.handler.core.variables import declared

TARGET_TYPES = ("python", "workflows", "cloud_run_job", "cloud_build_trigger", "http")
DEFAULT_WORKFLOWS_API = google_url("DEDUP_WORKFLOWS_API")
DEFAULT_RUN_API = google_url("DEDUP_RUN_API")
DEFAULT_CLOUD_BUILD_API = google_url("DEDUP_CLOUD_BUILD_API")
DEFAULT_TIMEOUT_SECONDS = 30.0

# Resource ids: letters, digits, '-', '_'; only a (legacy, domain-scoped) project id also holds '.' and ':'
# (example.com:my-project). Nothing that would change the request path or query, or append a custom method
# (":run" after the id: https://google.aip.dev/136) (https://cloud.google.com/workflows/docs/reference/rest/v1/projects.locations.workflows).
_PROJECT = r"[A-Za-z0-9][A-Za-z0-9._:-]*"
_ID = r"[A-Za-z0-9][A-Za-z0-9_-]*"
_WORKFLOW_RE = re.compile(rf"^projects/{_PROJECT}/locations/{_ID}/workflows/{_ID}$")
_RUN_JOB_RE = re.compile(rf"^projects/{_PROJECT}/locations/{_ID}/jobs/{_ID}$")
BUILD_TRIGGER_RE = re.compile(rf"^projects/(?P<project>{_PROJECT})/locations/{_ID}/triggers/(?P<trigger>{_ID})$")


@dataclass(frozen=True)
class TargetSettings:
    """The proxy target's settings.

    Attributes:
        type: ``python`` | ``workflows`` | ``cloud_run_job`` | ``cloud_build_trigger`` | ``http``
            (``DEDUP_TARGET_TYPE``).
        target: workflow name, job name, trigger name or URL (``DEDUP_TARGET``); empty for ``python``.
        timeout_seconds: how long each downstream call may take in all, body included, seconds
            (``DEDUP_TARGET_TIMEOUT_SECONDS``).
        workflows_api: Workflows Executions API base URL (``DEDUP_WORKFLOWS_API``).
        run_api: Cloud Run Admin API base URL (``DEDUP_RUN_API``).
        cloud_build_api: Cloud Build API base URL (``DEDUP_CLOUD_BUILD_API``, default
            ``https://cloudbuild.googleapis.com``; tests point it at a local fake).
        auth: ``google`` (default) or ``none`` (``DEDUP_TARGET_AUTH``; **test only**: no
            credentials are looked up and no ``Authorization`` header is sent).
        audience: ID-token audience of an HTTP target (``DEDUP_TARGET_AUDIENCE``); empty means
            :func:`~scheduler_dedup.handler.callers.audience.target_audience` of the URL (per host kind: the origin
            of a ``*.run.app`` URL, the full function URL on ``*.cloudfunctions.net``, else the origin).
    """

    type: str = "python"
    target: str = ""
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS
    workflows_api: str = DEFAULT_WORKFLOWS_API
    run_api: str = DEFAULT_RUN_API
    cloud_build_api: str = DEFAULT_CLOUD_BUILD_API
    auth: str = "google"
    audience: str = ""

    def __post_init__(self) -> None:
        if self.type not in TARGET_TYPES:
            raise ConfigError(f"DEDUP_TARGET_TYPE={self.type!r} is unknown: use one of {', '.join(TARGET_TYPES)}")
        if self.auth not in ("google", "none"):
            raise ConfigError(f"DEDUP_TARGET_AUTH={self.auth!r} is unknown: use google (or none, in tests only)")
        if not 0 < self.timeout_seconds <= 3600:
            raise ConfigError(f"DEDUP_TARGET_TIMEOUT_SECONDS={self.timeout_seconds:g} is out of range: use 0 < "
                              "seconds <= 3600, shorter than the Scheduler job's attempt deadline")
        for name, url in (("DEDUP_WORKFLOWS_API", self.workflows_api), ("DEDUP_RUN_API", self.run_api),
                          ("DEDUP_CLOUD_BUILD_API", self.cloud_build_api)):
            if urlparse(url).scheme not in ("http", "https") or not urlparse(url).netloc:
                raise ConfigError(f"{name}={url!r} is not a base URL: use e.g. https://host (no trailing path)")
        if self.type == "python":
            if self.target:
                raise ConfigError(f"DEDUP_TARGET={self.target!r} is set but DEDUP_TARGET_TYPE is python: set "
                                  "DEDUP_TARGET_TYPE to workflows, cloud_run_job, cloud_build_trigger or http, or "
                                  "unset DEDUP_TARGET")
            return
        if not self.target:
            raise ConfigError(f"DEDUP_TARGET is not set: DEDUP_TARGET_TYPE={self.type} needs it ({_EXAMPLES[self.type]})")
        if self.type == "workflows" and not _WORKFLOW_RE.match(self.target):
            raise ConfigError(f"DEDUP_TARGET={self.target!r} is not a workflow name: use {_EXAMPLES['workflows']}")
        if self.type == "cloud_run_job" and not _RUN_JOB_RE.match(self.target):
            raise ConfigError(f"DEDUP_TARGET={self.target!r} is not a Cloud Run job name: use "
                              f"{_EXAMPLES['cloud_run_job']}")
        if self.type == "cloud_build_trigger" and not BUILD_TRIGGER_RE.match(self.target):
            raise ConfigError(f"DEDUP_TARGET={self.target!r} is not a Cloud Build trigger name: use "
                              f"{_EXAMPLES['cloud_build_trigger']} (T: the trigger's id or name; a global trigger's "
                              "location is global)")
        if self.type == "http":
            # A webhook URL carries its secret in its path: once read, no text of this process shows it whole,
            # these refusals included (ConfigError scrubs its message).
            shown = hide_url(self.target)
            parsed = urlparse(self.target)
            if parsed.scheme not in ("https", "http") or not parsed.netloc:
                raise ConfigError(f"DEDUP_TARGET={shown!r} is not a URL: use {_EXAMPLES['http']}")
            if self.auth == "google" and not self.audience:
                try:
                    target_audience(self.target)
                except ValueError as exc:
                    raise ConfigError(f"DEDUP_TARGET={shown!r}: {exc}; or set DEDUP_TARGET_AUDIENCE") from None
            problem = misspelt_target_audience(self.audience, self.target) if self.audience else None
            if problem:
                raise ConfigError(f"DEDUP_TARGET_AUDIENCE={problem}, or unset it for the default")
            if parsed.scheme == "http" and self.auth == "google":
                raise ConfigError(f"DEDUP_TARGET={shown!r} is plain http: the ID token would travel "
                                  f"unencrypted; use {_EXAMPLES['http']}")

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> "TargetSettings":
        """Read the target settings from ``env``.

        Raises:
            ConfigError: a variable is invalid; the message names it and the fix.
        """
        env = declared(env)
        raw_timeout = env.get("DEDUP_TARGET_TIMEOUT_SECONDS", "").strip()
        try:
            timeout = float(raw_timeout) if raw_timeout else DEFAULT_TIMEOUT_SECONDS
        except ValueError:
            raise ConfigError(f"DEDUP_TARGET_TIMEOUT_SECONDS={raw_timeout!r} is not a number of seconds: use e.g. "
                              "DEDUP_TARGET_TIMEOUT_SECONDS=30") from None
        return cls(
            type=(env.get("DEDUP_TARGET_TYPE") or "python").strip(),
            target=(env.get("DEDUP_TARGET") or "").strip(),
            timeout_seconds=timeout,
            workflows_api=(env.get("DEDUP_WORKFLOWS_API") or DEFAULT_WORKFLOWS_API).rstrip("/"),
            run_api=(env.get("DEDUP_RUN_API") or DEFAULT_RUN_API).rstrip("/"),
            cloud_build_api=(env.get("DEDUP_CLOUD_BUILD_API") or DEFAULT_CLOUD_BUILD_API).rstrip("/"),
            auth=(env.get("DEDUP_TARGET_AUTH") or "google").strip(),
            audience=(env.get("DEDUP_TARGET_AUDIENCE") or "").strip(),
        )


_EXAMPLES = {
    "workflows": "DEDUP_TARGET=projects/P/locations/L/workflows/W",
    "cloud_run_job": "DEDUP_TARGET=projects/P/locations/L/jobs/J",
    "cloud_build_trigger": "DEDUP_TARGET=projects/P/locations/L/triggers/T",
    "http": "DEDUP_TARGET=https://service-xyz.a.run.app/path",
}
