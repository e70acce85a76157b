"""An explicit provider is honoured: the component's project is the provider's, or a mismatch is refused."""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_gcp as gcp
import pytest

from scheduler_dedup.infra.job.component import DedupScheduledJob
from scheduler_dedup.infra.errors import DedupConfigError
from scheduler_dedup.infra.stack.mock_run import RegisteredResource, run_program
from scheduler_dedup.infra.stores.store import DedupStore

JOB = {"schedule": "0 * * * *", "region": "us-central1", "image": "us-docker.pkg.dev/p/r/h:1", "job": "jobs:run"}


def _projects(resources: list[RegisteredResource]) -> set[Any]:
    return {r.inputs.get("project") for r in resources if r.custom and "project" in r.inputs
            and not r.type.startswith("pulumi:providers:")}


def _job(config: dict[str, str], **args: Any) -> list[RegisteredResource]:
    def program() -> None:
        provider = gcp.Provider("prov", project="prov-proj")
        DedupScheduledJob("nightly", {**JOB, **args}, opts=pulumi.ResourceOptions(provider=provider))  # type: ignore[typeddict-item]

    return run_program(program, config)


@pytest.mark.parametrize("config", [{}, {"gcp:project": "config-proj"}], ids=["no gcp:project", "gcp:project"])
def test_children_are_created_in_the_project_of_the_provider_the_component_was_given(config: dict[str, str]) -> None:
    """Without gcp:project this was refused with "no project"; with it, every child mixed provider prov and
    project=config-proj."""
    resources = _job(config)
    assert _projects(resources) == {"prov-proj"}
    (service,) = [r for r in resources if r.type == "gcp:cloudrunv2/service:Service"]
    env = {e["name"]: e.get("value") for e in service.inputs["template"]["containers"][0]["envs"]}
    assert env["GOOGLE_CLOUD_PROJECT"] == "prov-proj"


def test_a_project_other_than_the_provider_s_is_refused_at_preview() -> None:
    with pytest.raises(DedupConfigError, match="not the project of the provider 'prov'") as info:
        _job({"gcp:project": "config-proj"}, project="other-proj")
    assert info.value.field == "project"
    assert _projects(_job({}, project="prov-proj")) == {"prov-proj"}


def test_a_provider_without_a_project_and_no_project_input_is_refused_naming_the_provider(
        monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in ("GOOGLE_PROJECT", "GOOGLE_CLOUD_PROJECT", "GCLOUD_PROJECT", "CLOUDSDK_CORE_PROJECT"):
        monkeypatch.delenv(variable, raising=False)  # a provider without project reads them

    def program() -> None:
        provider = gcp.Provider("bare")
        DedupScheduledJob("nightly", JOB, opts=pulumi.ResourceOptions(provider=provider))  # type: ignore[arg-type]

    with pytest.raises(DedupConfigError, match="the provider 'bare' the component was given has no project"):
        run_program(program, {"gcp:project": "config-proj"})


def test_the_store_takes_the_project_of_its_provider_too() -> None:
    def program() -> None:
        provider = gcp.Provider("prov", project="prov-proj")
        DedupStore("shared", {"location": "eur3"}, opts=pulumi.ResourceOptions(providers={"gcp": provider}))

    assert _projects(run_program(program, {"gcp:project": "config-proj"})) == {"prov-proj"}
