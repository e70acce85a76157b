"""One rule for a job's ``module:function``: the handler's ``DEDUP_JOB`` check, the pack's start-up check, the
component's ``job`` input and ``run-local --job`` accept and refuse the same specs."""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduler_dedup.handler.core.errors import ConfigError
from scheduler_dedup.handler.core.job_spec import job_spec_problem
from scheduler_dedup.handler.protocol.job import check_job_spec
from scheduler_dedup.handler.service.startup import startup_problems
from scheduler_dedup.infra.errors import DedupConfigError
from scheduler_dedup.infra.job.target import resolve_target
from scheduler_dedup.local.commands.run_local import LocalRunError, check_inputs

#: Specs the handler's pattern took and the component's refused (empty or digit-led module parts), and others.
REFUSED = ["reports..nightly:run", "reports.:run", "reports.1st:run", "jobs:run:again", ":run",
           "jobs:", "jobs", "jobs:run()", "jobs :run", "1jobs:run"]
#: The ones the component's pattern took and the handler's refused (non-ASCII identifiers) are accepted by all.
ACCEPTED = ["jobs:run", "reports.nightly:run", "_private._mod:_fn", "jöbs:rün", "berichte.nächtlich:lauf"]


def _refusals(spec: str, tmp_path: Path) -> dict[str, bool]:
    """Whether each reader of the spec refuses it."""
    refused: dict[str, bool] = {}
    try:
        check_job_spec(spec)
        refused["handler"] = False
    except ConfigError:
        refused["handler"] = True
    env = {"GOOGLE_CLOUD_PROJECT": "p", "DEDUP_JOB": spec}
    refused["pack"] = any(p.startswith("DEDUP_JOB=") for p in startup_problems(env))
    try:
        resolve_target({"image": "us-docker.pkg.dev/p/r/i:1", "job": spec})
        refused["component"] = False
    except DedupConfigError as exc:
        assert exc.field == "job", exc
        refused["component"] = True
    try:
        check_inputs(tmp_path, spec, "*/5 * * * *", "Etc/UTC", ())
        refused["run-local"] = False
    except LocalRunError as exc:
        refused["run-local"] = "is not module:function" in str(exc)
    return refused


@pytest.mark.parametrize("spec", REFUSED)
def test_every_reader_refuses_a_malformed_spec_and_says_why(spec: str, tmp_path: Path) -> None:
    assert _refusals(spec, tmp_path) == dict.fromkeys(("handler", "pack", "component", "run-local"), True)
    problem = job_spec_problem(spec)
    assert problem
    with pytest.raises(ConfigError) as info:
        check_job_spec(spec)
    assert problem in str(info.value) and "DEDUP_JOB=jobs:run" in str(info.value)


@pytest.mark.parametrize("spec", ACCEPTED)
def test_every_reader_accepts_a_dotted_module_and_a_function(spec: str, tmp_path: Path) -> None:
    assert job_spec_problem(spec) is None
    assert _refusals(spec, tmp_path) == dict.fromkeys(("handler", "pack", "component", "run-local"), False)


def test_a_trailing_newline_is_refused_where_it_is_not_stripped(tmp_path: Path) -> None:
    """Both patterns ended in ``$``, which matches before a final newline: the handler took ``jobs:run\\n`` and then
    failed to import it. The component strips its string inputs, so it passes ``jobs:run`` on."""
    assert _refusals("jobs:run\n", tmp_path) == {"handler": True, "pack": True, "component": False, "run-local": True}


def test_the_reasons_name_the_bad_part() -> None:
    assert job_spec_problem("reports..nightly:run") == "'reports..nightly' has an empty part between dots"
    assert job_spec_problem("reports.1st:run") == "'1st' of the module is not a Python identifier"
    assert job_spec_problem("jobs:run\n") == "'run\\n' is not a Python identifier"
    assert job_spec_problem("jobs") == "no ':' between module and function"
