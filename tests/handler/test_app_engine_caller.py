"""The App Engine caller check's setting and its one decision, without a server."""

from __future__ import annotations

import pytest

from scheduler_dedup.handler import ConfigError
from scheduler_dedup.handler.callers.app_engine import AppEngineCallerCheck, AppEngineCallerSettings
from scheduler_dedup.handler.service.startup import startup_problems


@pytest.mark.parametrize(("headers", "allowed"), [
    ({"X-Appengine-Cron": "true"}, True),
    ({"x-appengine-cron": "TRUE"}, True),  # header names are case-insensitive; App Engine strips any spelling
    ({"X-AppEngine-QueueName": "__cron"}, True),
    ({"X-Appengine-Cron": "true, true"}, True),  # a repeated header joined by the WSGI server
    ({}, False),
    ({"X-CloudScheduler": "true", "User-Agent": "AppEngine-Google; (+http://code.google.com/appengine)"}, False),
    ({"X-Appengine-Cron": "false"}, False),
    ({"X-Appengine-Cron": "1"}, False),
    ({"X-AppEngine-QueueName": "default"}, False),
    ({"X-Appengine-Cron-Fake": "true"}, False),
])
def test_only_app_engines_cron_headers_admit_a_request(headers: dict[str, str], allowed: bool) -> None:
    refusal = AppEngineCallerCheck().check(headers)
    assert (refusal is None) is allowed
    if refusal is not None:
        body, status = refusal
        assert status == 403 and body["status"] == "forbidden" and "DEDUP_APP_ENGINE_CALLER" in body["error"]


def test_the_setting_is_true_or_false_and_refuses_oidc_beside_it() -> None:
    assert AppEngineCallerSettings.from_env({}).required is False
    assert AppEngineCallerSettings.from_env({"DEDUP_APP_ENGINE_CALLER": " TRUE "}).required is True
    with pytest.raises(ConfigError, match="DEDUP_APP_ENGINE_CALLER='yes'"):
        AppEngineCallerSettings.from_env({"DEDUP_APP_ENGINE_CALLER": "yes"})
    with pytest.raises(ConfigError, match="DEDUP_OIDC_AUDIENCE are both set"):
        AppEngineCallerSettings.from_env({"DEDUP_APP_ENGINE_CALLER": "true", "DEDUP_OIDC_AUDIENCE": "https://x"})


def test_the_start_up_checks_the_component_and_pack_share_include_it() -> None:
    env = {"GOOGLE_CLOUD_PROJECT": "p1", "DEDUP_JOB": "jobs:run", "DEDUP_APP_ENGINE_CALLER": "true",
           "DEDUP_OIDC_AUDIENCE": "https://x.invalid", "DEDUP_ALLOWED_CALLERS": "s@p1.iam.gserviceaccount.com"}
    [problem] = startup_problems(env)
    assert problem.startswith("DEDUP_APP_ENGINE_CALLER=true and DEDUP_OIDC_AUDIENCE and DEDUP_ALLOWED_CALLERS")
    assert startup_problems({**env, "DEDUP_OIDC_AUDIENCE": "", "DEDUP_ALLOWED_CALLERS": ""}) == []


def test_on_app_engine_the_check_is_on_unless_a_reason_turns_it_off() -> None:
    on_app_engine = {"GAE_APPLICATION": "s~p1", "GAE_SERVICE": "default"}
    assert AppEngineCallerSettings.from_env(on_app_engine).required is True
    with pytest.raises(ConfigError, match="DEDUP_APP_ENGINE_OPEN_REASON"):
        AppEngineCallerSettings.from_env({**on_app_engine, "DEDUP_APP_ENGINE_CALLER": "false"})
    opened = AppEngineCallerSettings.from_env({**on_app_engine, "DEDUP_APP_ENGINE_CALLER": "false",
                                               "DEDUP_APP_ENGINE_OPEN_REASON": "IAP guards it"})
    assert opened.required is False and opened.open_reason == "IAP guards it"
    with pytest.raises(ConfigError, match="DEDUP_OIDC_AUDIENCE are both set"):  # implied true refuses OIDC too
        AppEngineCallerSettings.from_env({**on_app_engine, "DEDUP_OIDC_AUDIENCE": "https://x"})
