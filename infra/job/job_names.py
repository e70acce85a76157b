"""The GCP names a :class:`~scheduler_dedup.infra.job.component.DedupScheduledJob` derives from its resource prefix,
project and region (:func:`derive_job_names`), and their check against Google's naming rules
(:data:`~scheduler_dedup.infra.project.resource_names.NAME_RULES`) at preview (:func:`name_problems`).

A derived name Google would refuse is derived again in a form it accepts where one exists (the source bucket of a
prefix holding "google" takes a hashed name); any other refusal names the input to change.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from scheduler_dedup.infra.errors import DedupConfigError
from scheduler_dedup.infra.project.resource_names import name_problem, short_hash

#: The suffixes of the service accounts the component may create (Scheduler caller, runtime, source build).
ACCOUNT_SUFFIXES = ("sched", "runtime", "build")
#: Room left in an alert policy's display name for the policy's own title, after ``scheduler-dedup NAME: ``.
ALERT_TITLE_ROOM = 120


def account_id(prefix: str, suffix: str) -> str:
    """A service account id (6-30 chars, [a-z][-a-z0-9]*[a-z0-9]) from the component prefix.

    A prefix too long to fit is cut and given 4 hex digits of its SHA-256, so two components
    whose names share their first characters still get distinct accounts.
    """
    room = 30 - len(suffix) - 1
    if len(prefix) <= room:
        return f"{prefix}-{suffix}"
    return f"{prefix[: room - 5].rstrip('-')}-{short_hash(prefix, digits=4)}-{suffix}"


def bucket_name(prefix: str, project: str, region: str) -> str:
    """The source bucket's name: ``<prefix>-source-<8 hex>``, or ``dedup-source-<16 hex>`` when Cloud Storage would
    refuse the first (a prefix holding "google", or starting "goog").

    Bucket names are global, so the hash covers project, region and prefix: two projects' jobs of one name, and a
    region move (a new bucket while the old one still exists), get distinct buckets.
    """
    name = f"{prefix}-source-{short_hash(project, region, prefix)}"
    if name_problem("bucket", name) is None:
        return name
    return f"dedup-source-{short_hash(project, region, prefix, digits=16)}"


@dataclass(frozen=True)
class JobNames:
    """Every GCP name a job derives (all plain strings, checked by :func:`name_problems`).

    Attributes:
        service: the Cloud Run service (or Cloud Run function) serving the handler.
        scheduler_job: the Scheduler job id; the watchdog's is ``<scheduler_job>-watchdog``.
        bucket: the source bucket of a source deploy.
        repository: the Artifact Registry repository of the built images.
        accounts: service account id by suffix (:data:`ACCOUNT_SUFFIXES`).
        alert_prefix: what every alert policy's display name starts with.
    """

    service: str
    scheduler_job: str
    bucket: str
    repository: str
    accounts: dict[str, str] = field(default_factory=dict)
    alert_prefix: str = ""

    @property
    def watchdog_job(self) -> str:
        return f"{self.scheduler_job}-watchdog"

    def each(self) -> Iterator[tuple[str, str, str]]:
        """``(what, rule kind, name)`` of every derived name."""
        yield "Cloud Run service", "service", self.service
        yield "Scheduler job", "scheduler_job", self.scheduler_job
        yield "watchdog Scheduler job", "scheduler_job", self.watchdog_job
        yield "source bucket", "bucket", self.bucket
        yield "image repository", "repository", self.repository
        for suffix, account in self.accounts.items():
            yield f"{suffix} service account", "service_account_id", account
        yield "alert policy display name", "alert_policy", f"{self.alert_prefix}{'x' * ALERT_TITLE_ROOM}"


def derive_job_names(name: str, prefix: str, project: str, region: str) -> JobNames:
    """The names a job with Pulumi name ``name`` and resource prefix ``prefix`` gives its resources."""
    return JobNames(
        service=prefix[:49].rstrip("-"), scheduler_job=prefix[:500], bucket=bucket_name(prefix, project, region),
        repository=f"{prefix[:55].rstrip('-')}-images",
        accounts={suffix: account_id(prefix, suffix) for suffix in ACCOUNT_SUFFIXES},
        alert_prefix=f"scheduler-dedup {name}: ",
    )


def name_problems(names: JobNames, prefix_field: str) -> list[DedupConfigError]:
    """A :class:`DedupConfigError` per derived name Google would refuse, naming the input it derives from.

    Args:
        prefix_field: ``resource_prefix`` when given, else ``name`` (the component's name).
    """
    found = []
    for what, kind, value in names.each():
        problem = name_problem(kind, value)
        if problem:
            source = "name" if kind == "alert_policy" else prefix_field
            found.append(DedupConfigError(source, f"derives the {what} {problem}: choose another {source}"))
    return found
