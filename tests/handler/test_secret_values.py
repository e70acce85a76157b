"""Which values the handler learns as the job's secrets (names as Sentry's default scrubber judges them, the
component's lists), and how the scrubber then finds them."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from scheduler_dedup.handler.config.secret_values import secret_values
from scheduler_dedup.handler.core.safe_text import REDACTED, hide_values, scrub_secrets

pytestmark = pytest.mark.unit


def test_secret_names_listed_names_and_files_are_learnt_and_the_handlers_own_settings_are_not(tmp_path: Path) -> None:
    key = tmp_path / "key"
    key.write_text("line-one-secret\nline-two-secret\n")
    env = {"DB_PASSWORD": "pw-value-1", "GITHUB_TOKEN": "tok-value-2", "Stripe_Api_Key": "key-value-3",
           "MY_DSN": "dsn-value-4", "DEDUP_SECRET_ENV": "MY_DSN", "DEDUP_SECRET_FILES": f"{key},{tmp_path}/absent",
           "DEDUP_TARGET_AUTH": "oidc-mode", "REPORT_BUCKET": "acme-reports"}
    values = secret_values(env)
    for value in ("pw-value-1", "tok-value-2", "key-value-3", "dsn-value-4", "line-one-secret", "line-two-secret"):
        assert value in values or any(value in v for v in values), value
    assert "oidc-mode" not in values and "acme-reports" not in values


def test_a_registered_value_is_scrubbed_plain_percent_and_base64_encoded() -> None:
    secret = "n0t/a+shaped value"
    assert hide_values([secret, "abc"]) == 1  # "abc" is too short to search for
    encoded = base64.b64encode(secret.encode()).decode()
    text = f"a {secret} b n0t%2Fa%2Bshaped%20value c {encoded} d abc"
    scrubbed = scrub_secrets(text)
    assert "shaped" not in scrubbed and scrubbed.count(REDACTED) == 3 and scrubbed.endswith("d abc"), scrubbed
