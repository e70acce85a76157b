"""``scripts/e2e-gcp``'s plan, offline: deploy before any run, destroy last, every store asked for, nothing outside
the sandbox project; ``--dry-run`` prints every call in order and runs none; the checks judge real outputs."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from typing import Any

import pytest
from click.testing import CliRunner

from scheduler_dedup.local.commands import e2e_gcp
from scheduler_dedup.local.commands.e2e_gcp import Step, main, plan

pytestmark = pytest.mark.unit

PROJECT = "sandbox-e2e-1"
CHANNEL = f"projects/{PROJECT}/notificationChannels/42"


def _plan(*stores: str) -> list[Step]:
    return plan(PROJECT, region="us-central1", stores=stores, run_id="abc123", channel=CHANNEL, org="acme")


def _words(step: Step) -> list[str]:
    return [str(a) for a in step.argv]


def _first(steps: list[Step], *prefix: str) -> int:
    return next(n for n, s in enumerate(steps) if _words(s)[:len(prefix)] == list(prefix))


def _last(steps: list[Step], *prefix: str) -> int:
    return max(n for n, s in enumerate(steps) if _words(s)[:len(prefix)] == list(prefix))


def test_every_deploy_comes_before_any_run_and_destroy_and_verify_come_last() -> None:
    steps = _plan("firestore", "spanner", "memorystore")
    assert _last(steps, "pulumi", "up") < _first(steps, "gcloud", "scheduler", "jobs", "run")
    assert _last(steps, "curl") < _first(steps, "scheduler-dedup", "runs") < _first(steps, "pulumi", "destroy")
    assert _last(steps, "gcloud", "monitoring", "policies", "list", "--filter", 'displayName:"scheduler-dedup '
                 'e2e-me-abc123:"') < _first(steps, "pulumi", "destroy")
    phases = [s.phase for s in steps]
    assert phases == sorted(phases, key=["deploy", "run", "check", "alerts", "destroy", "verify"].index)
    assert steps[-1].phase == "verify" and all(s.check for s in steps if s.phase == "verify")


def test_every_store_asked_for_gets_a_stack_deployed_run_checked_and_destroyed() -> None:
    steps = _plan("firestore", "spanner", "memorystore")
    ups = [_words(s)[-1] for s in steps if _words(s)[:2] == ["pulumi", "up"]]
    assert ups == ["e2e-fi-abc123", "e2e-sp-abc123", "e2e-me-abc123-store", "e2e-me-abc123"]
    destroys = [_words(s)[-1] for s in steps if _words(s)[:2] == ["pulumi", "destroy"]]
    assert destroys == ["e2e-fi-abc123", "e2e-sp-abc123", "e2e-me-abc123", "e2e-me-abc123-store"]
    removed = [_words(s)[-1] for s in steps if _words(s)[:3] == ["pulumi", "stack", "rm"]]
    assert removed == destroys
    for job in ("e2e-fi-abc123", "e2e-sp-abc123", "e2e-me-abc123"):
        curls = [s for s in steps if _words(s)[0] == "curl" and f"X-CloudScheduler-JobName: {job}" in _words(s)]
        assert len(curls) == 2 and _words(curls[0]) == _words(curls[1]), "two deliveries with the same headers"
        assert any(f'resource.labels.service_name="{job}"' in " ".join(_words(s)) for s in steps if s.phase == "check")
    assert [_words(s)[-1] for s in _plan("spanner") if _words(s)[:2] == ["pulumi", "up"]] == ["e2e-sp-abc123"]


def test_nothing_outside_the_sandbox_project_is_touched() -> None:
    steps = _plan("firestore", "spanner", "memorystore")
    for step in steps:
        words = _words(step)
        if words[0] == "gcloud" and words[1] != "auth":
            assert words[words.index("--project") + 1] == PROJECT, words
        for word in words:
            for named in re.findall(r"projects/([^/\s\"]+)", word):
                assert named == PROJECT, words
        if words[:3] == ["pulumi", "config", "set"] and "gcp:project" in words:
            assert words[words.index("gcp:project") + 1] == PROJECT
    assert sum("gcp:project" in _words(s) for s in steps) == 4  # every stack's provider project is set


def test_dry_run_prints_every_call_in_order_and_runs_none(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError(f"a dry run ran {args[0]}")
    monkeypatch.setattr(subprocess, "run", refuse)
    result = CliRunner().invoke(main, [PROJECT, "--store", "firestore,memorystore", "--run-id", "abc123",
                                       "--dry-run"])
    assert result.exit_code == 0, result.output
    printed = [m[1] for m in (re.match(r"^\[\s*\d+\] \S+\s+(.*)$", line) for line in result.output.splitlines()) if m]
    assert printed == [shlex.join(str(a) for a in s.argv)
                       for s in plan(PROJECT, region="us-central1", stores=["firestore", "memorystore"],
                                     run_id="abc123", channel=f"projects/{PROJECT}/notificationChannels/CHANNEL",
                                     org="organization")]
    assert "<e2e-fi-abc123-token>" in result.output, "the ID token is never printed, only named"


def test_a_bad_store_or_a_channel_of_another_project_is_refused_naming_the_option() -> None:
    bad = CliRunner().invoke(main, [PROJECT, "--store", "firestore,bigtable", "--dry-run"])
    assert bad.exit_code == 2 and "--store" in bad.output and "bigtable" in bad.output
    other = CliRunner().invoke(main, [PROJECT, "--notification-channel", "projects/prod/notificationChannels/1"])
    assert other.exit_code == 2 and "--notification-channel" in other.output


def test_the_checks_fail_a_run_executed_twice_and_pass_one_executed_once() -> None:
    log = e2e_gcp._executions("log")
    line = lambda run, executed: json.dumps({"jsonPayload": {"run_id": run, "executed": executed}})  # noqa: E731
    assert log("\n".join([line("a", True), line("a", False), line("b", True)]), {}) is None
    assert "a" in (log("\n".join([line("a", True), line("a", True)]), {}) or "")
    assert log(line("a", False), {}) is not None, "no execution at all is a failure too"
    records = e2e_gcp._executions("records")
    assert records(json.dumps({"run_id": "a", "status": "completed", "attempts": 1}), {}) is None
    assert records(json.dumps({"run_id": "a", "status": "completed", "attempts": 2}), {}) is not None
    assert e2e_gcp._answered("duplicate")('{"status": "duplicate", "run_id": "r"}', {}) is None
    assert e2e_gcp._answered("duplicate")('{"status": "processed", "run_id": "r"}', {}) is not None
    left = e2e_gcp._nothing_listed("buckets")
    assert left("[]", {}) is None and "e2e-fi" in (left('[{"name": "e2e-fi-abc123-source-1"}]', {}) or "")


def test_each_leftover_listing_filters_on_a_field_its_output_has() -> None:
    """gcloud applies --filter to the listed objects: a key they lack matches nothing, and the check cannot fail.
    ``gcloud run services list`` prints Cloud Run Admin API v1 (Knative) objects, whose name is ``metadata.name``
    (https://cloud.google.com/run/docs/reference/rest/v1/namespaces.services#Service); alert policies are found by
    ``displayName`` (their ``name`` is a number); the others carry their id in ``name``."""
    keys = {tuple(_words(s)[:3]): re.match(r"([\w.]+)~", _words(s)[_words(s).index("--filter") + 1]).group(1)  # type: ignore[union-attr]
            for s in _plan("firestore") if s.phase == "verify"}
    assert keys[("gcloud", "run", "services")] == "metadata.name"
    assert keys[("gcloud", "monitoring", "policies")] == "displayName"
    assert {k for c, k in keys.items() if c[1] not in ("run", "monitoring")} == {"name"}
