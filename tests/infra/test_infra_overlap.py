"""The overlap policy and the catch-up window as component inputs and stack keys: checked at preview with the
handler's own rule, and passed to the handler as ``DEDUP_OVERLAP`` / ``DEDUP_CATCH_UP_WINDOW_SECONDS``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from scheduler_dedup.infra.errors import DedupConfigError, DedupConfigErrors
from scheduler_dedup.infra.job.environment import handler_environment
from scheduler_dedup.infra.job.settings import resolve_settings
from tests.infra.served import handler_env, handler_of

HELLO = str(Path(__file__).resolve().parents[2] / "examples" / "hello_job")


def _args(**overrides: Any) -> dict[str, Any]:
    return {"schedule": "*/15 * * * *", "region": "us-central1", "job_source": HELLO, "job": "jobs:run", **overrides}


def test_skip_and_a_catch_up_window_reach_the_handler_environment() -> None:
    s = resolve_settings("nightly", _args(overlap="skip", catch_up_window_seconds=3600), default_project="p1")
    env = handler_environment(s)
    assert (env["DEDUP_OVERLAP"], env["DEDUP_CATCH_UP_WINDOW_SECONDS"]) == ("skip", "3600")


def test_the_defaults_set_nothing() -> None:
    env = handler_environment(resolve_settings("nightly", _args(), default_project="p1"))
    assert "DEDUP_OVERLAP" not in env and "DEDUP_CATCH_UP_WINDOW_SECONDS" not in env


def test_a_bad_policy_and_a_bad_window_fail_at_preview_together_naming_their_inputs() -> None:
    with pytest.raises(DedupConfigErrors) as info:
        resolve_settings("nightly", _args(overlap="forbid", catch_up_window_seconds=10**7), default_project="p1")
    assert [e.field for e in info.value.errors] == ["overlap", "catch_up_window_seconds"]
    assert "buffer_one" in str(info.value) and "604800" in str(info.value)
    with pytest.raises(DedupConfigError, match="overlap"):
        resolve_settings("nightly", _args(overlap=3), default_project="p1")


def test_the_stack_key_sets_the_policy(tmp_path: Path) -> None:
    from scheduler_dedup.infra.stack.mock_run import run_stack_config

    root = Path(__file__).resolve().parents[2]
    text = (root / "Pulumi.example.yaml").read_text().replace("scheduler-dedup:overlap: allow",
                                                               "scheduler-dedup:overlap: buffer_one")
    config = tmp_path / "Pulumi.example.yaml"
    config.write_text(text)
    resources = run_stack_config(config, project_file=root / "Pulumi.yaml")
    envs = handler_env(handler_of(resources))
    assert envs["DEDUP_OVERLAP"] == "buffer_one"


def test_replace_is_refused_at_preview_for_a_python_job_naming_the_fix() -> None:
    with pytest.raises(DedupConfigError) as info:
        resolve_settings("nightly", _args(overlap="replace"), default_project="p1")
    assert info.value.field == "overlap" and "cannot be cancelled" in str(info.value)
    assert "skip or buffer_one" in str(info.value)


def test_replace_reaches_the_handler_of_a_cloud_run_job_target() -> None:
    args = {"schedule": "*/15 * * * *", "region": "us-central1", "overlap": "replace",
            "cloud_run_job_target": {"job": "projects/p1/locations/us-central1/jobs/nightly"}}
    env = handler_environment(resolve_settings("nightly", args, default_project="p1"))
    assert env["DEDUP_OVERLAP"] == "replace" and env["DEDUP_TARGET_TYPE"] == "cloud_run_job"
