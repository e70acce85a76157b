"""Downstream targets: Workflows, a Cloud Run job, a Cloud Build trigger or an HTTP URL, each given the run id
as its idempotency token, and what each downstream answer means for the run.
"""
