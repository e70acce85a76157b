"""Every environment variable is declared once (handler/core/variables.py), with a default that is the real one."""

from __future__ import annotations

import re
from typing import Any

import pytest

from scheduler_dedup.handler.config.settings import Settings
from scheduler_dedup.handler.service.startup import read_startup_settings
from scheduler_dedup.handler.core.variables import VARIABLES, UndeclaredVariableError, declare, declared
from tests.paths import ROOT

#: An environment the handler starts with, caller verification on (so its variables' defaults are read too).
BASE = {"GOOGLE_CLOUD_PROJECT": "p1", "DEDUP_JOB": "jobs:run", "DEDUP_OIDC_AUDIENCE": "https://svc.a.run.app",
        "DEDUP_ALLOWED_CALLERS": "sched@p1.iam.gserviceaccount.com"}


def test_reading_an_undeclared_variable_fails_naming_where_to_declare_it() -> None:
    env = declared({"DEDUP_NOT_A_SETTING": "1", "DEDUP_LEASE_SECONDS": "60"})
    assert env.get("DEDUP_LEASE_SECONDS") == "60" and env.get("DEDUP_COLLECTION") is None
    for read in (lambda: env.get("DEDUP_NOT_A_SETTING"), lambda: env["DEDUP_NOT_A_SETTING"],
                 lambda: "DEDUP_NOT_A_SETTING" in env, lambda: env.get("DEDUP_MISSING", "x")):
        with pytest.raises(UndeclaredVariableError, match="scheduler_dedup.handler.core.variables"):
            read()
    assert sorted(env) == ["DEDUP_LEASE_SECONDS", "DEDUP_NOT_A_SETTING"]  # listing is not reading
    assert declared(env) is env


def test_the_settings_read_only_declared_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    """With one variable taken out of the registry, every settings object that reads it fails loudly."""
    from scheduler_dedup.handler.core import variables
    read_startup_settings(BASE)
    for name, reader in (("DEDUP_LEASE_SECONDS", Settings.from_env), ("DEDUP_TARGET_TYPE", read_startup_settings),
                         ("DEDUP_TRUST_CLOUD_RUN_IAM", read_startup_settings)):
        # a copy without it (deleting and restoring the entry would move it to the end of the reference page)
        monkeypatch.setattr(variables, "VARIABLES", {k: v for k, v in VARIABLES.items() if k != name})
        with pytest.raises(UndeclaredVariableError, match=name):
            reader(BASE)
        monkeypatch.undo()
    assert list(variables.VARIABLES) == list(VARIABLES)


def test_a_variable_is_declared_once() -> None:
    with pytest.raises(ValueError, match="declared twice"):
        declare("DEDUP_LEASE_SECONDS", "store", "again")


def _names_in_code() -> dict[str, str]:
    """Every ``DEDUP_*`` name our code mentions, and every name the handler reads with ``.get("...")`` or
    ``environ["..."]``: name -> first place."""
    found: dict[str, str] = {}
    reads = re.compile(r"""(?:environ|env)(?:\.get\(|\[)\s*["']([A-Z][A-Z0-9_]+)["']|getenv\(\s*["']([A-Z][A-Z0-9_]+)""")
    for top in ("handler", "infra", "policies", "local"):
        for path in sorted((ROOT / top).rglob("*.py")):
            text = path.read_text()
            for number, line in enumerate(text.splitlines(), 1):
                names = re.findall(r"\bDEDUP_[A-Z0-9]+(?:_[A-Z0-9]+)*\b", line)
                if top == "handler":
                    names += [a or b for a, b in reads.findall(line)]
                for name in names:
                    found.setdefault(name, f"{path.relative_to(ROOT)}:{number}")
    return found


def test_every_variable_the_code_names_is_declared() -> None:
    """A ``DEDUP_*`` name in the code (read, set by the component, checked by the pack) or a variable the handler
    reads is on the reference page: declare it in scheduler_dedup.handler.core.variables."""
    found = _names_in_code()
    assert "DEDUP_LEASE_SECONDS" in found and "GOOGLE_CLOUD_PROJECT" in found, "the scan finds nothing"
    undeclared = {name: where for name, where in found.items() if name not in VARIABLES}
    assert not undeclared, undeclared


@pytest.mark.parametrize("name", [v.name for v in VARIABLES.values() if v.default is not None and v.reader == "handler"])
def test_the_documented_default_is_the_handlers_default(name: str) -> None:
    """Setting a variable to its documented default changes nothing the handler reads."""
    unset = read_startup_settings(BASE)
    assert name not in BASE
    assert read_startup_settings({**BASE, name: VARIABLES[name].default or ""}) == unset


def _service_env_names(**args: Any) -> set[str]:
    from scheduler_dedup.infra import DedupScheduledJob
    from scheduler_dedup.infra.stack.mock_run import run_program

    resources = run_program(lambda: DedupScheduledJob("nightly", {"schedule": "0 3 * * *", "region": "europe-west1",
                                                                  **args}), {"gcp:project": "p1"})
    [service] = [r for r in resources if r.type in ("gcp:cloudrunv2/service:Service",
                                                    "gcp:cloudfunctionsv2/function:Function",
                                                    "gcp:appengine/standardAppVersion:StandardAppVersion")]
    if "envVariables" in service.inputs:  # App Engine (app_engine): the version's environment
        return set(service.inputs["envVariables"])
    if "serviceConfig" in service.inputs:  # a source deploy's function
        return set(service.inputs["serviceConfig"]["environmentVariables"])
    return {env["name"] for env in service.inputs["template"]["containers"][0]["envs"]}


def test_the_variables_documented_as_set_by_the_component_are_the_ones_it_sets() -> None:
    store = {"project": "p1", "database_id": "shared", "collections": ["scheduler_runs"],
             "ttl_owner": "stack acme/scheduler-dedup/store"}
    memorystore = {"kind": "memorystore", "project": "p1", "collections": ["scheduler_runs"],
                   "redis_host": "10.0.0.3", "redis_port": 6378, "auth_secret": "runs-auth", "ca_secret": "runs-ca",
                   "network": "projects/p1/global/networks/default",
                   "subnetwork": "projects/p1/regions/europe-west1/subnetworks/default"}
    spanner = {"kind": "spanner", "project": "p1", "instance_id": "acme-prod", "database_id": "runs",
               "collections": ["scheduler_runs"]}
    env = (_service_env_names(image="europe-docker.pkg.dev/p1/jobs/report:1", job="report:run")
           | _service_env_names(image="europe-docker.pkg.dev/p1/jobs/report:1", job="report:run", overlap="skip",
                                catch_up_window_seconds=3600)
           | _service_env_names(http_target={"url": "https://export-abc.a.run.app/run"}, store=store)
           | _service_env_names(image="europe-docker.pkg.dev/p1/jobs/report:1", job="report:run", store=memorystore)
           | _service_env_names(image="europe-docker.pkg.dev/p1/jobs/report:1", job="report:run", store=spanner)
           | _service_env_names(cloud_build_trigger_target={"trigger": "projects/p1/locations/global/triggers/t"},
                                app_engine={"service": "dedup"})
           | _service_env_names(image="europe-docker.pkg.dev/p1/jobs/report:1", job="report:run", paused=True)
           | _service_env_names(image="europe-docker.pkg.dev/p1/jobs/report:1", job="report:run",
                                secret_env={"DB_PASSWORD": {"secret": "db-password", "version": "3"}},
                                secret_files=[{"secret": "sa-key", "path": "/secrets/sa/key.json"}]) - {"DB_PASSWORD"})
    documented = {v.name for v in VARIABLES.values() if v.component}
    assert env == documented, (sorted(env - documented), sorted(documented - env))
