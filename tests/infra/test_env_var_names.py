"""One rule for an environment variable's name (``scheduler_dedup.handler.core.env_names``): the component refuses a
job's ``env`` / ``secret_env`` name Cloud Run refuses, ``run-local`` its ``--env`` / ``--secret-file`` name, and the
policy pack any Cloud Run service's or job's, each naming a name that works."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from scheduler_dedup.handler.core.env_names import env_name_problem
from scheduler_dedup.infra.errors import DedupConfigError, DedupConfigErrors
from scheduler_dedup.infra.job.settings import resolve_settings
from scheduler_dedup.local.commands.run_local import LocalRunError, env_pairs_env, secret_file_env
from scheduler_dedup.policies.reading.model import Resource
from scheduler_dedup.policies.rules import RULES_BY_NAME, evaluate
from tests.paths import HELLO_JOB

#: Names Cloud Run refuses (EnvVar.name: a C_IDENTIFIER) and the name each message offers instead.
REFUSED = [("1BAD", "_1BAD"), ("MY-VAR", "MY_VAR"), ("my.var", "my_var"), ("HAS SPACE", "HAS_SPACE"),
           ("ÜBER", "_BER")]


def _job_errors(**extra: Any) -> dict[str, str]:
    args = {"schedule": "0 3 * * *", "region": "us-central1", "job_source": str(HELLO_JOB), "job": "jobs:run", **extra}
    with pytest.raises(DedupConfigError) as info:
        resolve_settings("nightly", args, default_project="p1")  # type: ignore[arg-type]
    errors = info.value.errors if isinstance(info.value, DedupConfigErrors) else [info.value]
    return {e.field: str(e) for e in errors}


@pytest.mark.parametrize(("name", "instead"), REFUSED)
def test_a_name_that_is_no_c_identifier_is_refused_naming_one_that_works(name: str, instead: str) -> None:
    problem = env_name_problem(name)
    assert problem and "C_IDENTIFIER" in problem and f"use e.g. {instead}" in problem, problem
    assert env_name_problem(instead) is None


@pytest.mark.parametrize("name", ["REPORT_BUCKET", "_PRIVATE", "a1", "DB_PASSWORD_2"])
def test_names_cloud_run_takes_pass(name: str) -> None:
    assert env_name_problem(name) is None and env_name_problem(name, jobs_own=False) is None


def test_the_component_refuses_a_job_variable_starting_with_a_digit_in_env_and_secret_env() -> None:
    """The reported input: ``env: {1BAD: x}`` passed preview."""
    found = _job_errors(env={"1BAD": "x", "OK": "y"}, secret_env={"2FA_KEY": {"secret": "k"}})
    assert set(found) == {"env.1BAD", "secret_env.2FA_KEY"}, found
    assert "use e.g. _1BAD" in found["env.1BAD"] and "use e.g. _2FA_KEY" in found["secret_env.2FA_KEY"]


def test_run_local_refuses_the_same_names_in_env_and_secret_file(tmp_path: Path) -> None:
    with pytest.raises(LocalRunError) as info:
        env_pairs_env(["1BAD=x", "GOOD=y", "MY-VAR=z", "novalue"])
    lines = str(info.value).splitlines()
    assert len(lines) == 3 and lines[0].startswith("--env 1BAD:") and "use e.g. _1BAD" in lines[0], lines
    assert env_pairs_env(["GOOD=a=b"]) == {"GOOD": "a=b"}
    secret = tmp_path / "pw.txt"
    secret.write_text("s3cret")
    with pytest.raises(LocalRunError, match="--secret-file 1PW: '1PW' is not a name Cloud Run takes"):
        secret_file_env([f"1PW={secret}"])


def _service(names: list[str], typ: str = "gcp:cloudrunv2/service:Service", path: str = "template") -> Resource:
    containers = [{"image": "i", "envs": [{"name": n, "value": "v"} for n in names]}]
    props: dict[str, Any] = {"template": {"containers": containers}}
    if path == "template.template":
        props = {"template": {"template": {"containers": containers}}}
    return Resource(type=typ, name="svc", urn=f"urn:pulumi:s::p::{typ}::svc", props=props)


def test_the_pack_refuses_a_cloud_run_service_or_job_variable_named_so_but_not_the_handler_s_own() -> None:
    rule = [RULES_BY_NAME["cloud-run-env-names"]]
    findings = evaluate([_service(["DEDUP_LEASE_SECONDS", "GOOGLE_CLOUD_PROJECT", "1BAD", "PORT"])], rules=rule)
    messages = [f.message for f in findings]
    assert len(messages) == 2 and all(f.level == "mandatory" for f in findings), messages
    assert "'1BAD' is not a name Cloud Run takes" in messages[0] and "set by Cloud Run itself" in messages[1]
    job = _service(["9LIVES"], typ="gcp:cloudrunv2/job:Job", path="template.template")
    [finding] = evaluate([job], rules=rule)
    assert "template.template.containers[0].envs: '9LIVES'" in finding.message, finding.message
