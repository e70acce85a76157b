"""What runs: the Python job (``job_source`` + ``job``, or ``image``) or one proxy target (Workflows, a Cloud Run
job, a Cloud Build trigger, an https URL), with the ID-token audience of an HTTP target."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pulumi

from scheduler_dedup.handler.callers.audience import misspelt_target_audience, target_audience
from scheduler_dedup.infra.errors import DedupConfigError, read_str
from scheduler_dedup.handler.core.job_spec import job_spec_problem
from scheduler_dedup.infra.job.entry_point import entry_point_problem
from scheduler_dedup.infra.job.inputs import service_account_email


@dataclass(frozen=True)
class Target:
    type: str  # python | workflows | cloud_run_job | cloud_build_trigger | http
    job: str | None = None
    job_source: Path | None = None
    image: str | None = None
    workflow: pulumi.Input[str] | None = None
    cloud_run_job: pulumi.Input[str] | None = None
    cloud_build_trigger: pulumi.Input[str] | None = None
    cloud_build_service_account_email: pulumi.Input[str] | None = None
    http_url: pulumi.Input[str] | None = None
    http_service: pulumi.Input[str] | None = None
    http_audience: str | None = None


def resolve_target(args: Mapping[str, Any]) -> Target:
    """What runs: the python job (source or image) or one proxy target.

    Raises:
        DedupConfigError: the first problem of these inputs (they depend on one another).
    """
    job = read_str(args, "job")
    job_source_str = read_str(args, "job_source")
    image = read_str(args, "image")
    targets = {k: args[k] for k in ("workflow_target", "cloud_run_job_target", "cloud_build_trigger_target",
                                    "http_target") if args.get(k) is not None}
    if len(targets) > 1:
        raise DedupConfigError(sorted(targets)[1], f"give only one proxy target, got {', '.join(sorted(targets))}")
    if targets:
        (key, target), = targets.items()
        if not isinstance(target, Mapping):
            raise DedupConfigError(key, f"must be a mapping, got {target!r}")
        if job_source_str is not None or job is not None or image is not None:
            raise DedupConfigError(key, "a proxy target runs no user code: remove job_source, job and image (the "
                                        "component deploys the bare handler), or remove the target")
        if key == "workflow_target":
            return Target("workflows", workflow=_target_name(target, key, "workflow", "workflows"))
        if key == "cloud_run_job_target":
            return Target("cloud_run_job", cloud_run_job=_target_name(target, key, "job", "jobs"))
        if key == "cloud_build_trigger_target":
            extra = set(target) - {"trigger", "service_account_email"}
            if extra:
                raise DedupConfigError(f"{key}.{sorted(extra)[0]}", "unknown key; valid keys are trigger, "
                                                                    "service_account_email")
            return Target("cloud_build_trigger", cloud_build_trigger=_target_name(target, key, "trigger", "triggers"),
                           cloud_build_service_account_email=service_account_email(
                               target, "service_account_email", field=f"{key}.service_account_email"))
        http_url = target.get("url")
        if isinstance(http_url, str) and not http_url.startswith("https://"):
            raise DedupConfigError(f"{key}.url", f"{http_url!r} must be an https:// URL")
        if http_url is None:
            raise DedupConfigError(f"{key}.url", "is required: the https URL to call")
        http_service = None
        if target.get("cloud_run_service") is not None:
            http_service = _target_name(target, key, "cloud_run_service", "services")
        extra = set(target) - {"url", "cloud_run_service", "audience"}
        if extra:
            raise DedupConfigError(f"{key}.{sorted(extra)[0]}",
                                   "unknown key; valid keys are url, cloud_run_service, audience")
        return Target("http", http_url=http_url, http_service=http_service,
                       http_audience=_http_audience(target.get("audience"), http_url, f"{key}.audience"))
    if job_source_str is None and image is None:
        raise DedupConfigError(
            "job_source",
            "neither job_source nor image nor a proxy target is given: set job_source (a directory with your "
            "job module) and job ('module:function'), or image, or one of workflow_target, "
            "cloud_run_job_target, cloud_build_trigger_target, http_target",
        )
    if job_source_str is not None and image is not None:
        raise DedupConfigError("image", "give job_source or image, not both")
    if job is None:
        raise DedupConfigError("job", "is required with job_source or image: the entry point as 'module:function'")
    spec_problem = job_spec_problem(job)
    if spec_problem:
        raise DedupConfigError("job", f"{job!r} is not 'module:function' ({spec_problem}): use e.g. 'jobs:run'")
    job_source: Path | None = None
    if job_source_str is not None:
        job_source = Path(job_source_str).expanduser().resolve()
        if not job_source.is_dir():
            raise DedupConfigError("job_source", f"{job_source_str!r} is not a directory")
        module = job.split(":")[0].replace(".", "/")
        if not ((job_source / f"{module}.py").is_file() or (job_source / module / "__init__.py").is_file()):
            raise DedupConfigError(
                "job", f"module of {job!r} not found in job_source: expected {module}.py or {module}/__init__.py"
            )
        source = job_source / f"{module}.py"
        problem = entry_point_problem(source if source.is_file() else job_source / module / "__init__.py",
                                       job.split(":")[1])
        if problem:
            raise DedupConfigError("job", f"{job!r}: {problem} (the handler would refuse DEDUP_JOB at start-up)")
    return Target("python", job=job, job_source=job_source, image=image)


def _http_audience(given: Any, url: Any, field: str) -> str | None:
    """The ID-token audience the handler sends to an HTTP target, written out whenever it can be known.

    ``given`` wins, unless it is a misspelling of the one value the target's host accepts
    (:func:`~scheduler_dedup.handler.callers.audience.misspelt_target_audience`); without it, the default for the
    URL's host kind (:func:`~scheduler_dedup.handler.callers.audience.target_audience`: the full function URL on
    ``*.cloudfunctions.net``, else the origin), or None when the URL is an output of another resource
    (the handler then applies the same default at start-up).

    Raises:
        DedupConfigError: not a non-empty string, a misspelling, or a Cloud Functions URL without a function.
    """
    if given is not None:
        if not isinstance(given, str) or not given.strip():
            raise DedupConfigError(field, f"must be a non-empty string, got {given!r}")
        problem = misspelt_target_audience(given.strip(), url) if isinstance(url, str) else None
        if problem:
            raise DedupConfigError(field, problem)
        return given.strip()
    if not isinstance(url, str):
        return None
    try:
        return target_audience(url)
    except ValueError as exc:
        raise DedupConfigError(field.rsplit(".", 1)[0] + ".url", f"{exc}; or set {field}") from None


def _target_name(target: Mapping[str, Any], key: str, field: str, collection: str) -> pulumi.Input[str]:
    value = target.get(field)
    if value is None:
        raise DedupConfigError(f"{key}.{field}", f"is required: projects/P/locations/L/{collection}/NAME")
    if isinstance(value, str) and not re.fullmatch(rf"projects/[^/]+/locations/[^/]+/{collection}/[^/]+", value):
        raise DedupConfigError(f"{key}.{field}", f"{value!r} is not a full name projects/P/locations/L/{collection}/NAME")
    return value
