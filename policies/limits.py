"""Google Cloud limits and defaults the rules enforce, each with its source. All durations in seconds."""

from __future__ import annotations

from typing import Final

from scheduler_dedup.handler import config as handler_config
from scheduler_dedup.handler.record import TTL_FIELD, TTL_OWNER_ENV

# Cloud Scheduler, REST reference for projects.locations.jobs (field attemptDeadline):
# https://cloud.google.com/scheduler/docs/reference/rest/v1/projects.locations.jobs
# "For HTTP targets, the default is 3 minutes. The deadline must be in the interval [15 seconds, 30 minutes]."
SCHEDULER_HTTP_DEADLINE_MIN_S: Final = 15.0
SCHEDULER_HTTP_DEADLINE_MAX_S: Final = 1800.0
SCHEDULER_HTTP_DEADLINE_DEFAULT_S: Final = 180.0

# Cloud Scheduler RetryConfig (same page, RetryConfig): "Values greater than 5 and negative values are not
# allowed" for retryCount (default 0); minBackoffDuration default 5 s; maxBackoffDuration default 1 hour;
# maxDoublings default 5; maxRetryDuration default 0 (= unlimited, bounded by retryCount).
SCHEDULER_RETRY_COUNT_MAX: Final = 5
SCHEDULER_RETRY_COUNT_DEFAULT: Final = 0
SCHEDULER_MIN_BACKOFF_DEFAULT_S: Final = 5.0
SCHEDULER_MAX_BACKOFF_DEFAULT_S: Final = 3600.0
SCHEDULER_MAX_DOUBLINGS_DEFAULT: Final = 5

# Cloud Run request timeout: default 300 s (5 min), at most 3600 s (60 min).
# https://cloud.google.com/run/docs/configuring/request-timeout
CLOUD_RUN_TIMEOUT_DEFAULT_S: Final = 300.0
CLOUD_RUN_TIMEOUT_MAX_S: Final = 3600.0

# The handler's settings and their defaults (handler/config.py, Settings.from_env).
ENV_COLLECTION: Final = "DEDUP_COLLECTION"
ENV_DATABASE: Final = "DEDUP_DATABASE"
ENV_LEASE: Final = "DEDUP_LEASE_SECONDS"
ENV_RETENTION: Final = "DEDUP_RETENTION_SECONDS"
DEFAULT_COLLECTION: Final = handler_config.DEFAULT_COLLECTION
DEFAULT_DATABASE: Final = handler_config.DEFAULT_DATABASE
DEFAULT_LEASE_S: Final = float(handler_config.DEFAULT_LEASE_SECONDS)
DEFAULT_RETENTION_S: Final = float(handler_config.DEFAULT_RETENTION_SECONDS)
EXPIRY_FIELD: Final = TTL_FIELD
ENV_TTL_OWNER: Final = TTL_OWNER_ENV

# Basic (primitive) roles: https://cloud.google.com/iam/docs/roles-overview#basic
PRIMITIVE_ROLES: Final = ("roles/owner", "roles/editor", "roles/viewer")
# Principals that make a resource public: https://cloud.google.com/iam/docs/principal-identifiers
PUBLIC_MEMBERS: Final = ("allUsers", "allAuthenticatedUsers")
