"""The Workflows example (examples/workflows/nightly_export.yaml): every state-changing HTTP call of the workflow
passes the run id on as its ``Idempotency-Key``, so a downstream built with ``idempotent_endpoint`` runs each call
once per run however often Workflows retries it. The check itself is shown to catch a call without the key."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.paths import ROOT

pytestmark = pytest.mark.unit

EXAMPLE = ROOT / "examples" / "workflows" / "nightly_export.yaml"
#: Workflows' HTTP calls that change state (https://cloud.google.com/workflows/docs/reference/stdlib/http/Overview).
STATE_CHANGING = {"http.post": "POST", "http.put": "PUT", "http.patch": "PATCH", "http.delete": "DELETE"}


def http_calls(node: Any, path: str = "") -> Iterator[tuple[str, str, dict[str, Any]]]:
    """``(where, method, args)`` of every ``http.*`` call step, at any depth (try, retry, parallel, switch)."""
    if isinstance(node, dict):
        call = node.get("call")
        if isinstance(call, str) and call.startswith("http."):
            args = node.get("args") or {}
            method = STATE_CHANGING.get(call) or (str(args.get("method", "")).upper() if call == "http.request"
                                                  else call.removeprefix("http.").upper())
            yield path, method, args
        for key, value in node.items():
            yield from http_calls(value, f"{path}/{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from http_calls(value, f"{path}/{index}")


def calls_without_the_key(definition: dict[str, Any]) -> list[str]:
    """The state-changing calls whose ``Idempotency-Key`` is not the run id (``${<param>.run_id}``)."""
    [param] = definition["main"]["params"]
    wanted = f"${{{param}.run_id}}"
    return [f"{where} ({method})" for where, method, args in http_calls(definition)
            if method in STATE_CHANGING.values() and (args.get("headers") or {}).get("Idempotency-Key") != wanted]


def load(path: Path) -> dict[str, Any]:
    definition = yaml.safe_load(path.read_text())
    assert isinstance(definition, dict) and "main" in definition
    return definition


def test_every_state_changing_step_of_the_example_carries_the_run_id() -> None:
    definition = load(EXAMPLE)
    methods = sorted({method for _, method, _ in http_calls(definition)})
    assert methods == ["DELETE", "GET", "POST", "PUT"], methods  # the check saw each kind of call, nested too
    assert calls_without_the_key(definition) == []


@pytest.mark.parametrize("step", ["export", "publish", "cleanup"])
def test_the_check_names_a_state_changing_call_without_the_key(step: str) -> None:
    definition = copy.deepcopy(load(EXAMPLE))
    for entry in definition["main"]["steps"]:
        if step in entry:
            body = entry[step].get("try", entry[step])
            body["args"]["headers"] = {"Idempotency-Key": "${run.job_name}"}
    [missing] = calls_without_the_key(definition)
    assert step in missing


def test_the_example_passes_the_runs_interval_on() -> None:
    """The export gets the run's data interval from the argument the Workflows target sends."""
    [(_, _, export)] = [c for c in http_calls(load(EXAMPLE)) if c[1] == "POST"]
    assert export["body"]["previous_schedule_time"] == "${run.previous_schedule_time}"
    assert export["body"]["schedule_time"] == "${run.schedule_time}"
