"""A deployed handler does not start beside a variable that redirects its store, credentials, metadata server, TLS
trust or proxy; the local tools, which set an emulator host themselves, still start. Over real start-up: a handler
process on the Firestore emulator, as Cloud Run would start it (``K_SERVICE`` set)."""

from __future__ import annotations

import re
from pathlib import Path

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
                                  "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH", "SPANNER_EMULATOR_HOST",
                                  # the fallbacks google-auth reads, TLS secrets and configuration, the resolver
                                  "CLOUDSDK_CONTEXT_AWARE_CERTIFICATE_CONFIG_FILE_PATH", "GOOGLE_API_CERTIFICATE_CONFIG",
                                  "CLOUDSDK_CONTEXT_AWARE_USE_CLIENT_CERTIFICATE", "GCE_METADATA_MTLS_MODE",
                                  "SSLKEYLOGFILE", "OPENSSL_CONF", "LOCALDOMAIN", "RES_OPTIONS", "HOSTALIASES"])
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


def _adc_file(home: Path) -> Path:
    path = home / ".config" / "gcloud" / "application_default_credentials.json"
    path.parent.mkdir(parents=True)
    path.write_text('{"type": "authorized_user", "client_id": "c", "client_secret": "s", "refresh_token": "r"}')
    return path


def test_home_is_judged_by_the_credentials_file_under_it(tmp_path: Path) -> None:
    """HOME is set on every process (the container runtime sets it), so a deployed handler judges what it does:
    Application Default Credentials read the well-known file under it before the runtime account."""
    deployed = {**BASE, "K_SERVICE": "s", "HOME": str(tmp_path)}
    assert not any("application_default_credentials" in p for p in startup_problems(deployed))
    path = _adc_file(tmp_path)
    assert any(str(path) in p and "runtime account" in p for p in startup_problems(deployed)), startup_problems(deployed)
    assert not any("application_default_credentials" in p for p in startup_problems({**BASE, "HOME": str(tmp_path)}))
    assert redirecting_variable("HOME")  # as a job's own variable, or in a stack, refused by name


def test_a_deployed_handler_with_a_credentials_file_in_its_home_does_not_start(harness, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = _adc_file(tmp_path)
    with pytest.raises(RuntimeError, match=re.escape(str(path))):
        harness.server(DEDUP_ALLOW_TEST_ENDPOINTS="", K_SERVICE="dedup-handler", HOME=str(tmp_path))
