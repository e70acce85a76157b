"""The Redis store's settings at start-up: what the handler, the component and the policy pack refuse, all alike."""

from __future__ import annotations

import pytest

from scheduler_dedup.handler.config.settings import Settings
from scheduler_dedup.handler.core.errors import ConfigError
from scheduler_dedup.handler.service.startup import startup_problems
from scheduler_dedup.handler.stores.redis.config import parse_redis_url

BASE = {"GOOGLE_CLOUD_PROJECT": "p", "DEDUP_JOB": "jobs:run", "DEDUP_STORE": "redis",
        "DEDUP_REDIS_URL": "rediss://10.0.0.3:6378/0", "DEDUP_REDIS_AUTH_FILE": "/secrets/redis/auth",
        "DEDUP_REDIS_CA_FILE": "/secrets/redis-ca/ca.pem"}


def test_a_memorystore_service_environment_starts() -> None:
    assert startup_problems(BASE) == []
    settings = Settings.from_env(BASE)
    assert settings.store == "redis" and settings.store_config.wait_timeout_ms == 500
    endpoint = parse_redis_url(settings.store_config.url or "")
    assert (endpoint.tls, endpoint.host, endpoint.port, endpoint.db) == (True, "10.0.0.3", 6378, 0)
    assert parse_redis_url("redis://127.0.0.1/3").port == 6379


@pytest.mark.parametrize(("change", "refusal"), [
    ({"DEDUP_REDIS_URL": "redis://:s3cret@10.0.0.3:6379/0"}, "DEDUP_REDIS_URL holds a password: remove it"),
    ({"DEDUP_REDIS_URL": "redis://default:s3cret@10.0.0.3:6379/0"}, "DEDUP_REDIS_AUTH_FILE to its path"),
    ({"DEDUP_REDIS_PASSWORD": "s3cret"}, "DEDUP_REDIS_PASSWORD would hold the AUTH string in plain sight"),
    ({"DEDUP_REDIS_URL": ""}, "DEDUP_STORE=redis needs DEDUP_REDIS_URL"),
    ({"DEDUP_REDIS_URL": "http://10.0.0.3"}, "must start with redis:// or rediss://"),
    ({"DEDUP_REDIS_URL": "redis://10.0.0.3/0?socket_timeout=1"}, "has a query"),
    ({"DEDUP_REDIS_URL": "redis://10.0.0.3/x"}, "use a number 0 to 15"),
    ({"DEDUP_REDIS_URL": "redis://10.0.0.3:6379/0"}, "DEDUP_REDIS_CA_FILE is set but DEDUP_REDIS_URL is redis://"),
    ({"DEDUP_REDIS_AUTH_FILE": "auth.txt"}, "DEDUP_REDIS_AUTH_FILE='auth.txt' is not an absolute path"),
    ({"DEDUP_REDIS_WAIT_TIMEOUT_MS": "0.5"}, "not a whole number of milliseconds"),
    ({"DEDUP_REDIS_WAIT_TIMEOUT_MS": "5000", "DEDUP_STORE_TIMEOUT_SECONDS": "2"}, "is not under DEDUP_STORE_TIMEOUT"),
    ({"DEDUP_STORE": "firestore"}, "DEDUP_REDIS_URL is set but DEDUP_STORE=firestore"),
])
def test_a_wrong_or_unsafe_setting_is_refused_naming_the_fix(change: dict[str, str], refusal: str) -> None:
    env = {**BASE, **change}
    with pytest.raises(ConfigError, match=refusal.replace("?", r"\?")):
        Settings.from_env(env)
    assert any(refusal in problem for problem in startup_problems(env))


@pytest.mark.parametrize("url", [
    "redis://:Zq9/Xk7@10.0.0.3:6379/0", "redis://default:Zq9?Xk7@10.0.0.3:6379/0", "redis://:Zq9#Xk7@10.0.0.3/0",
    "redis://:Zq9@Xk7@10.0.0.3/0", "redis://10.0.0.3/0?auth=Zq9Xk7", "redis://10.0.0.3/0#Zq9Xk7",
])
def test_a_refused_url_never_echoes_a_secret_in_it(url: str) -> None:
    """An AUTH string holding ``/``, ``?``, ``#`` or ``@`` (base64, a generated one) breaks the URL apart; the refusal
    still names it a password, and neither it nor a query or fragment value is in the message."""
    env = {**BASE, "DEDUP_REDIS_URL": url}
    with pytest.raises(ConfigError) as refused:
        Settings.from_env(env)
    problems = " ".join(startup_problems(env))
    for text in (str(refused.value), problems):
        assert "Zq9" not in text and "Xk7" not in text, text
    if "@" in url:
        assert "holds a password" in str(refused.value)


def test_wait_can_be_turned_off() -> None:
    assert Settings.from_env({**BASE, "DEDUP_REDIS_WAIT_TIMEOUT_MS": "0"}).store_config.wait_timeout_ms == 0


def test_an_unknown_url_at_preview_is_not_refused() -> None:
    env = {k: v for k, v in BASE.items() if k != "DEDUP_REDIS_URL"}
    assert startup_problems(env, unknown=["DEDUP_REDIS_URL"]) == []
