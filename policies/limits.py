"""Google Cloud limits and defaults the rules enforce, each with its source. All durations in seconds."""

from __future__ import annotations

from typing import Final

from scheduler_dedup.handler.config import settings as handler_config
from scheduler_dedup.handler.stores.firestore import config as firestore_config
from scheduler_dedup.handler.schedule.retry_windows import APP_ENGINE_TARGET, ATTEMPT_DEADLINES, HTTP_TARGET
from scheduler_dedup.handler.core.record import TTL_FIELD, TTL_OWNER_ENV

# Cloud Scheduler, REST reference for projects.locations.jobs (field attemptDeadline), one table for the component
# and the pack (scheduler_dedup.handler.schedule.retry_windows.ATTEMPT_DEADLINES): HTTP targets [15 s, 30 min], default 3 min;
# App Engine targets [15 s, 24 h], unset or 0 the service's default (10 min with automatic scaling).
SCHEDULER_HTTP_DEADLINE_MIN_S: Final = float(ATTEMPT_DEADLINES[HTTP_TARGET].min_seconds)
SCHEDULER_HTTP_DEADLINE_MAX_S: Final = float(ATTEMPT_DEADLINES[HTTP_TARGET].max_seconds)
SCHEDULER_HTTP_DEADLINE_DEFAULT_S: Final = float(ATTEMPT_DEADLINES[HTTP_TARGET].default_seconds)
SCHEDULER_APP_ENGINE_DEADLINE_MAX_S: Final = float(ATTEMPT_DEADLINES[APP_ENGINE_TARGET].max_seconds)

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

# The handler's settings and their defaults (handler/config/settings.py, Settings.from_env; the Firestore database
# is the Firestore store's, handler/stores/firestore/config.py).
ENV_COLLECTION: Final = "DEDUP_COLLECTION"
ENV_DATABASE: Final = firestore_config.DATABASE_VARIABLE
ENV_LEASE: Final = "DEDUP_LEASE_SECONDS"
ENV_RETENTION: Final = "DEDUP_RETENTION_SECONDS"
DEFAULT_COLLECTION: Final = handler_config.DEFAULT_COLLECTION
DEFAULT_DATABASE: Final = firestore_config.DEFAULT_DATABASE
DEFAULT_LEASE_S: Final = float(handler_config.DEFAULT_LEASE_SECONDS)
DEFAULT_RETENTION_S: Final = float(handler_config.DEFAULT_RETENTION_SECONDS)
EXPIRY_FIELD: Final = TTL_FIELD
ENV_TTL_OWNER: Final = TTL_OWNER_ENV

# Basic (primitive) roles: https://cloud.google.com/iam/docs/roles-overview#basic
PRIMITIVE_ROLES: Final = ("roles/owner", "roles/editor", "roles/viewer")
# Principals that make a resource public: https://cloud.google.com/iam/docs/principal-identifiers
PUBLIC_MEMBERS: Final = ("allUsers", "allAuthenticatedUsers")
