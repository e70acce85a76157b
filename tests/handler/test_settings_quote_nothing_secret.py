"""A refused setting names what is wrong with it, never a piece of it that may be a secret."""

from __future__ import annotations

import pytest

from scheduler_dedup.handler.config.settings import Settings
from scheduler_dedup.handler.core.errors import ConfigError
from scheduler_dedup.handler.service.startup import startup_problems

BASE = {"GOOGLE_CLOUD_PROJECT": "p", "DEDUP_JOB": "jobs:run", "DEDUP_STORE": "redis",
        "DEDUP_REDIS_AUTH_FILE": "/secrets/redis/auth", "DEDUP_REDIS_CA_FILE": "/secrets/redis-ca/ca.pem"}


@pytest.mark.parametrize("url", [
    "rediss://10.0.0.3:6378/0?Zq9Xk7",  # a bare query: the AUTH string pasted where a query goes
    "rediss://10.0.0.3:6378/0?Zq9Xk7=",
    "rediss://10.0.0.3:6378/0?Zq9Xk7&socket_timeout=1",
    "rediss://10.0.0.3:6378/0?x=1&Zq9Xk7",
])
def test_a_bare_query_in_the_redis_url_is_not_quoted(url: str) -> None:
    env = {**BASE, "DEDUP_REDIS_URL": url}
    with pytest.raises(ConfigError, match="DEDUP_REDIS_URL has a query") as refused:
        Settings.from_env(env)
    problems = " ".join(startup_problems(env))
    for text in (str(refused.value), problems):
        assert "Zq9" not in text and "Xk7" not in text, text


def test_a_query_of_known_redis_options_is_still_named() -> None:
    env = {**BASE, "DEDUP_REDIS_URL": "rediss://10.0.0.3:6378/0?socket_timeout=1"}
    with pytest.raises(ConfigError, match=r"a query \(socket_timeout\)"):
        Settings.from_env(env)
