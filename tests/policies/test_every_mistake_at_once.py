"""``check`` shows every mistake of a file in one run: a stack config's (each relation checked against the values
as written, not skipped because an earlier one was refused) and a policy config's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console

from scheduler_dedup.policies.offline.check import COMPONENT_CONFIG_RULE, check_stack_config, run_check
from scheduler_dedup.policies.offline.policy_config import PolicyConfigError, check_policy_config

ROOT = Path(__file__).resolve().parents[2]


def _stack(tmp_path: Path, **keys: int) -> Path:
    lines = ["config:", "  gcp:project: my-project-id", "  scheduler-dedup:jobSource: " + str(ROOT / "examples/hello_job"),
             "  scheduler-dedup:job: jobs:run", *(f"  scheduler-dedup:{k}: {v}" for k, v in keys.items())]
    path = tmp_path / "Pulumi.dev.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_three_related_mistakes_of_a_stack_file_show_in_one_run(tmp_path: Path) -> None:
    config = _stack(tmp_path, requestTimeoutSeconds=100, leaseSeconds=30, retryCount=0)
    messages = [f.message for f in check_stack_config(config, ROOT / "Pulumi.yaml") if f.rule == COMPONENT_CONFIG_RULE]
    fields = [m.split("refuses this config: ")[1].split(":")[0] for m in messages]
    assert fields == ["request_timeout_seconds", "lease_seconds", "retry.retry_count"], messages


def test_no_retry_at_all_is_not_said_to_get_409(tmp_path: Path) -> None:
    config = _stack(tmp_path, retryCount=0)
    [message] = [f.message for f in check_stack_config(config, ROOT / "Pulumi.yaml")]
    assert "never retries" in message and "409" not in message, message
    assert "no retry would come for it" in message, message


def test_a_policy_config_reports_every_error_at_once(tmp_path: Path) -> None:
    bad = {"dedup-lease-covers-deadline": "mandatry", "no-such-rule": "advisory",
           "scheduler-attempt-deadline-margin": {"minMarginSecnds": 5, "enforcementLevel": "disabeld"}}
    with pytest.raises(PolicyConfigError) as raised:
        check_policy_config(bad)
    text = str(raised.value)
    for named in ("mandatry", "no-such-rule", "minMarginSecnds", "disabeld"):
        assert named in text, text
    file = tmp_path / "policy.json"
    file.write_text(json.dumps(bad))
    console = Console(record=True, width=200)
    assert run_check(stack=None, config_file=ROOT / "Pulumi.example.yaml", policy_config=file, console=console) == 2
    out = console.export_text()
    assert "4 problems" in out and "did you mean 'mandatory'?" in out, out
