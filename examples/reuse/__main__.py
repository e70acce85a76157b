"""Reuse the component from your own Pulumi program (docs/deploying.md, "Reuse from your own stacks").

Run offline: ``scheduler-dedup check --program examples/reuse --stack dev`` (tests/test_docs_snippets.py does).
"""

import pulumi

from scheduler_dedup.infra import DedupScheduledJob, DedupScheduledJobArgs

nightly = DedupScheduledJob("nightly-report", DedupScheduledJobArgs(
    schedule="0 3 * * *", time_zone="Europe/Berlin", region="europe-west1",
    job_source="jobs/", job="report:run",
    attempt_deadline_seconds=600, retry={"retry_count": 3, "min_backoff_seconds": 120},
))
pulumi.export("url", nightly.service_url)
