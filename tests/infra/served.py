"""What serves the handler in a registered graph: the function a source deploy builds, or the Cloud Run service of a
prebuilt image; and the handler's plain environment on either."""

from __future__ import annotations

from typing import Any

from scheduler_dedup.infra.stack.mock_run import RegisteredResource

FUNCTION = "gcp:cloudfunctionsv2/function:Function"
SERVICE = "gcp:cloudrunv2/service:Service"


def handler_of(resources: list[RegisteredResource], job: str | None = None) -> RegisteredResource:
    """The one function or service of the graph (of component ``job`` when given)."""
    found = [r for r in resources if r.type in (FUNCTION, SERVICE)
             and (job is None or r.name in (f"{job}-function", f"{job}-service"))]
    assert len(found) == 1, [(r.type, r.name) for r in found]
    return found[0]


def handler_env(resource: RegisteredResource) -> dict[str, Any]:
    """``name -> value`` of the handler's plain environment variables on a function or a Cloud Run service."""
    if resource.type == FUNCTION:
        return dict(resource.inputs["serviceConfig"]["environmentVariables"])
    return {e["name"]: e.get("value") for e in resource.inputs["template"]["containers"][0]["envs"]}


def beyond_function_cpu(findings: list[Any]) -> list[Any]:
    """``findings`` without the one advisory every Python job built from source gets by design: its function has CPU
    per request (the component gives it at preview too; docs/deploying.md, "What builds my code")."""
    return [f for f in findings if not (f.rule == "dedup-cpu-always-allocated" and "Cloud Run function" in f.message)]
