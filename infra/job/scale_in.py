"""A job longer than its attempt deadline can be killed by scale-in: the rule the component and the pack share.

Once Scheduler hangs up at the attempt deadline, a job that runs inside the handler keeps running with no
request in flight, and Cloud Run may remove an instance that is processing no request:

* Cloud Run, "Set minimum instances for services" (https://cloud.google.com/run/docs/configuring/min-instances):
  "Cloud Run removes instances that are not processing requests (idle). With minimum instances set, Cloud Run keeps
  at least the number of minimum instances running, even if they're not processing requests."
* Cloud Run, "About instance autoscaling" (https://cloud.google.com/run/docs/about-instance-autoscaling): "When a
  revision does not receive any traffic, by default it is scaled in to zero instances. [...] If you are using CPU
  outside of requests, you should set minimum instances equal to 1."

The killed job's lease is no longer renewed; a retry takes the run over once it expires and runs the job again.
Jobs that run elsewhere (a Workflows execution, a Cloud Run job execution, an HTTP call the handler waits for
within the deadline) are not at risk.

This module imports neither pulumi nor pulumi_policy.
"""

from __future__ import annotations

MIN_INSTANCES_PAGE = "https://cloud.google.com/run/docs/configuring/min-instances"
AUTOSCALING_PAGE = "https://cloud.google.com/run/docs/about-instance-autoscaling"


def scale_in_advisory(job_runs_in_handler: bool, min_instances: int, attempt_deadline_seconds: float) -> str | None:
    """The advisory when a job may outlive the attempt deadline on an instance Cloud Run may scale in, with the
    remedies; None when the job runs elsewhere or an instance is kept.

    Args:
        job_runs_in_handler: the job is a Python callable the handler runs (``DEDUP_JOB``), not a proxy target.
        min_instances: the service's minimum instances (0 is Cloud Run's default).
        attempt_deadline_seconds: the Scheduler job's attempt deadline.
    """
    if not job_runs_in_handler or min_instances >= 1:
        return None
    return (f"the job runs inside the handler's Cloud Run service with minimum instances {min_instances}: a job longer "
            f"than the {attempt_deadline_seconds:g} s attempt deadline keeps running after Scheduler hangs up, with no "
            "request in flight, and Cloud Run \"removes instances that are not processing requests\" "
            f"({MIN_INSTANCES_PAGE}; {AUTOSCALING_PAGE}: \"If you are using CPU outside of requests, you should set "
            "minimum instances equal to 1\"). Scale-in would kill the job and a retry would run it again once its "
            "lease expires. For jobs that may outlive the attempt deadline, set minimum instances to 1 "
            "(DedupScheduledJob min_instance_count=1, stack config scheduler-dedup:minInstanceCount: 1; the instance "
            "is billed while it lives), or run the job as a Cloud Run job (cloud_run_job_target), which Cloud Run runs "
            "to completion whatever the request")
