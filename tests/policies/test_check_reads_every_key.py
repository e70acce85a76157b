"""``check`` reports a stack config key the program never reads (it would have no effect), on the user's own program
and the root stack's, with every other mistake of the file in the same run; and it prints each of the program's
warnings once, in the table."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest
from rich.console import Console

from scheduler_dedup.policies.offline.check import (COMPONENT_CONFIG_RULE, PROGRAM_WARNING_RULE, UNREAD_CONFIG_RULE,
                                                    check_stack_config, run_check)

ROOT = Path(__file__).resolve().parents[2]

#: A program of the user's own that reads two keys of its config, its own namespace's and ours.
READING_PROGRAM = '''
import pulumi
from scheduler_dedup.infra import DedupScheduledJob

own, ours = pulumi.Config(), pulumi.Config("scheduler-dedup")
DedupScheduledJob("nightly", {"schedule": own.require("schedule"), "region": "europe-west1",
                              "job_source": "jobs/", "job": "report:run", "min_instance_count": 1,
                              "retry": {"retry_count": ours.get_int("retryCount") or 3}})
'''


def _own_program(tmp_path: Path, config: str, main: str | None = None) -> Path:
    program = tmp_path / "mystack"
    shutil.copytree(ROOT / "examples" / "reuse", program)
    if main is not None:
        (program / "__main__.py").write_text(main)
    (program / "Pulumi.dev.yaml").write_text("config:\n  gcp:project: acme-prod\n" + config)
    return program


def _rows(program: Path, rule: str) -> list[str]:
    return [f.message for f in check_stack_config(program / "Pulumi.dev.yaml", program / "Pulumi.yaml") if f.rule == rule]


def test_root_stack_keys_on_a_program_that_takes_its_settings_in_code_are_each_reported(tmp_path: Path) -> None:
    """The reported input: examples/reuse sets its inputs in __main__.py; its stack file sets two root-stack keys."""
    program = _own_program(tmp_path, '  scheduler-dedup:schedule: "0 4 * * *"\n  scheduler-dedup:retrycount: 5\n')
    unread = _rows(program, UNREAD_CONFIG_RULE)
    assert [m.split()[2] for m in unread] == ["scheduler-dedup:schedule", "scheduler-dedup:retrycount"], unread
    assert all("never reads it" in m and "its settings are in its code" in m for m in unread), unread


def test_an_unread_key_names_the_key_the_program_reads_instead(tmp_path: Path) -> None:
    program = _own_program(tmp_path, '  nightly-report:schedule: "0 4 * * *"\n  scheduler-dedup:retrycount: 5\n'
                                     '  scheduler-dedup:schedule: "0 5 * * *"\n  nightly-report:regoin: x\n',
                           READING_PROGRAM)
    unread = {m.split()[2]: m for m in _rows(program, UNREAD_CONFIG_RULE)}
    assert set(unread) == {"scheduler-dedup:retrycount", "scheduler-dedup:schedule", "nightly-report:regoin"}, unread
    assert "did you mean scheduler-dedup:retryCount?" in unread["scheduler-dedup:retrycount"]
    assert "it reads nightly-report:schedule: rename the key" in unread["scheduler-dedup:schedule"]
    assert ("the keys it reads: nightly-report:schedule, scheduler-dedup:retryCount"
            in unread["nightly-report:regoin"]), unread


def test_a_refused_config_and_an_unread_key_show_in_one_run(tmp_path: Path) -> None:
    program = _own_program(tmp_path, '  nightly-report:schedule: "0 25 * * *"\n  scheduler-dedup:retrycount: 5\n',
                           READING_PROGRAM)
    assert any("schedule" in m and "25" in m for m in _rows(program, COMPONENT_CONFIG_RULE))
    [unread] = _rows(program, UNREAD_CONFIG_RULE)
    assert "scheduler-dedup:retrycount" in unread and "before it stopped" in unread, unread


def test_a_store_stack_does_not_silently_drop_a_job_stack_key(tmp_path: Path) -> None:
    config = tmp_path / "Pulumi.store.yaml"
    config.write_text((ROOT / "Pulumi.example-store.yaml").read_text() + '  scheduler-dedup:schedule: "0 3 * * *"\n')
    findings = check_stack_config(config, ROOT / "Pulumi.yaml")
    assert [f.message.split()[2] for f in findings if f.rule == UNREAD_CONFIG_RULE] == ["scheduler-dedup:schedule"]


def test_every_example_stack_reads_every_key_it_sets() -> None:
    for config in sorted(ROOT.glob("Pulumi.example*.yaml")):
        if "storeStack" in config.read_text():
            continue  # needs the store stack's outputs: tests/policies/test_policy_offline.py checks those
        assert [f for f in check_stack_config(config, ROOT / "Pulumi.yaml") if f.rule == UNREAD_CONFIG_RULE] == []


def test_each_advisory_is_printed_once_in_the_table(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The reported input: the component's warnings went to stderr as well as being the pack's advisory rows."""
    config = tmp_path / "Pulumi.dev.yaml"
    config.write_text(f"config:\n  gcp:project: my-project-id\n  scheduler-dedup:jobSource: {ROOT / 'examples/hello_job'}\n"
                      "  scheduler-dedup:job: jobs:run\n  scheduler-dedup:schedule: '*/5 * * * *'\n"
                      "  scheduler-dedup:timeZone: US/Eastern\n  scheduler-dedup:attemptDeadlineSeconds: 600\n"
                      "  scheduler-dedup:env:\n    API_TOKEN: abcdefghijklmnopqrstuvwxyz0123456789\n")
    caplog.set_level(logging.WARNING)
    console = Console(record=True, width=400)
    assert run_check(stack=None, config_file=config, console=console) == 0
    out = " ".join(console.export_text().split())
    assert [r.getMessage()[:60] for r in caplog.records if r.levelno >= logging.WARNING] == []  # nothing on stderr
    for words in ("is an alias (a tz database link)", "Scale-in would kill the job", "fires as little as 300 s apart"):
        assert out.count(words) == 1, (words, out)
    # a warning no rule gives is a row of its own, in stack config keys
    assert out.count("env.API_TOKEN looks like a credential") == 1 and PROGRAM_WARNING_RULE in out, out
    assert "scheduler-dedup:secretEnv" in out, out
