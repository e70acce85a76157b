"""A Python job on a Cloud Run function runs with CPU allocated per request: the advisory the component and the pack
share.

The handler renews the job's lease from a background thread while the job runs, also after Scheduler hung up at its
attempt deadline. With request-based billing Cloud Run throttles CPU outside request processing
(https://cloud.google.com/run/docs/configuring/billing-settings,
https://cloud.google.com/run/docs/tips/general#avoid_background_activities), and a function deployed through the
Cloud Functions API has no setting for CPU always allocated (its ``ServiceConfig`` has none:
https://cloud.google.com/functions/docs/reference/rest/v2/projects.locations.functions#serviceconfig). So a job that
outlives its attempt deadline there may see its renewals stall, its lease expire, and a retry run it again.

This module imports neither pulumi nor pulumi_policy.
"""

from __future__ import annotations

BILLING_PAGE = "https://cloud.google.com/run/docs/configuring/billing-settings"


def function_cpu_advisory(job_runs_in_handler: bool) -> str | None:
    """The advisory for a Python job served by a Cloud Run function (CPU per request), with the remedies; None for a
    proxy target, whose call the handler waits for within the attempt deadline, while its request is in flight.

    Args:
        job_runs_in_handler: the job is a Python callable the handler runs (``DEDUP_JOB``), not a proxy target.
    """
    if not job_runs_in_handler:
        return None
    return ("the handler is a Cloud Run function built from job_source, which has CPU allocated only while a request "
            "is processed (request-based billing; the Cloud Functions API has no CPU-always-allocated setting, "
            f"{BILLING_PAGE}): a job longer than its attempt deadline keeps running after Scheduler hangs up, its "
            "lease renewals can stall, and a retry can run it a second time. Keep each run well within the attempt "
            "deadline (attempt_deadline_seconds, up to 1800 s), or build the handler's image yourself and give image "
            "instead of job_source: the Cloud Run service then has CPU always allocated (cpu_always_allocated, "
            "default true)")
