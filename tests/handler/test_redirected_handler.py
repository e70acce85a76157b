"""A deployed handler does not start beside a variable that redirects its store, credentials, metadata server, TLS
trust or proxy; the local tools, which set an emulator host themselves, still start. Over real start-up: a handler
process on the Firestore emulator, as Cloud Run would start it (``K_SERVICE`` set)."""

from __future__ import annotations

import pytest

from scheduler_dedup.handler.core.env_names import REDIRECTING_ENV, redirecting_variable
from scheduler_dedup.handler.service.startup import startup_problems

BASE = {"GOOGLE_CLOUD_PROJECT": "p1", "DEDUP_JOB": "jobs:run"}


def test_a_deployed_handler_on_an_emulator_does_not_start(harness) -> None:  # type: ignore[no-untyped-def]
    """The harness's server runs on the Firestore emulator (FIRESTORE_EMULATOR_HOST): deployed, it stops at start-up."""
    with pytest.raises(RuntimeError, match="'FIRESTORE_EMULATOR_HOST' redirects the Firestore run store"):
        harness.server(DEDUP_ALLOW_TEST_ENDPOINTS="", K_SERVICE="dedup-handler")


def test_the_same_handler_started_locally_serves(harness) -> None:  # type: ignore[no-untyped-def]
    server = harness.server(DEDUP_ALLOW_TEST_ENDPOINTS="")
    assert server.proc is not None and server.proc.poll() is None


@pytest.mark.parametrize("name", ["FIRESTORE_EMULATOR_HOST", "GCE_METADATA_HOST", "GOOGLE_APPLICATION_CREDENTIALS",
                                  "REQUESTS_CA_BUNDLE", "HTTPS_PROXY", "https_proxy", "No_Proxy",
                                  "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH", "SPANNER_EMULATOR_HOST"])
@pytest.mark.parametrize("deployed", [{"K_SERVICE": "s"}, {"GAE_APPLICATION": "s~p1", "DEDUP_APP_ENGINE_CALLER": "true"}],
                         ids=["cloud-run", "app-engine"])
def test_each_redirecting_variable_stops_a_deployed_handler(name: str, deployed: dict[str, str]) -> None:
    env = {**BASE, **deployed, name: "10.0.0.1:8080"}
    assert any(f"{name!r} redirects" in p for p in startup_problems(env)), startup_problems(env)
    assert not any("redirects" in p for p in startup_problems({**env, "DEDUP_ALLOW_TEST_ENDPOINTS": "1"}))
    assert not any("redirects" in p for p in startup_problems({**BASE, name: "10.0.0.1:8080"}))  # local


def test_every_listed_variable_names_its_source() -> None:
    assert all(source.startswith("https://") for _, source in REDIRECTING_ENV.values())
    assert redirecting_variable("REPORT_BUCKET") is None and redirecting_variable("all_proxy")
