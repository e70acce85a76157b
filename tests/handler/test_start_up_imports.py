"""The handler imports what a delivery needs, when it needs it: a cold start pays for no module the configuration
does not use (bench/cold_start.py times it; these tests only look at ``sys.modules``).

Each test imports the entry point in a fresh interpreter and lists the modules it loaded: the service module alone,
then ``main`` with its start-up (settings, job, store opened and probed) on Redis and on Firestore, each store
pointed at a closed port so the probe fails fast and only warns.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.paths import ROOT

pytestmark = pytest.mark.unit

#: Libraries a python job on Redis never needs: Google's clients and auth, gRPC, an HTTP client, and the crypto
#: google-auth signs and verifies with (redis-py itself only looks whether the ``cryptography`` package exists).
GOOGLE_AND_HTTP = ("google.auth", "google.oauth2", "google.api_core", "google.cloud.firestore", "google.cloud.spanner",
                   "grpc", "requests", "urllib3", "cryptography.hazmat", "cryptography.x509")
#: Our modules that a delivery of a python job without caller verification never runs: built on first use (the run
#: check) or only when configured (proxy targets, OIDC verification, trust mode's premise).
NOT_FOR_A_DELIVERY = ("scheduler_dedup.handler.monitoring.run_check", "scheduler_dedup.handler.monitoring.run_history",
                      "scheduler_dedup.handler.monitoring.job_state", "scheduler_dedup.handler.targets.build_target",
                      "scheduler_dedup.handler.targets.call",
                      "scheduler_dedup.handler.callers.oidc", "scheduler_dedup.handler.callers.trust_premise")
#: Every store's client module: only the configured store's is imported, when it is opened.
STORE_CLIENTS = ("scheduler_dedup.handler.stores.firestore.store", "scheduler_dedup.handler.stores.redis.store",
                 "scheduler_dedup.handler.stores.spanner.store", "redis")


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _loaded(module: str, env: dict[str, str]) -> set[str]:
    """The modules a fresh interpreter holds after ``import module`` with ``env`` (added to a bare environment)."""
    code = f"import json, sys\nimport {module}\nsys.stderr.write('MODULES ' + json.dumps(sorted(sys.modules)))\n"
    base = {name: os.environ[name] for name in ("PATH", "HOME", "LANG") if name in os.environ}
    done = subprocess.run([sys.executable, "-c", code], env={**base, **env}, capture_output=True, text=True,
                          timeout=120, cwd=ROOT / "examples" / "hello_job")
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(ln for ln in done.stderr.splitlines() if ln.startswith("MODULES "))
    return set(json.loads(line.removeprefix("MODULES ")))


def _imported(modules: set[str], names: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == name or m.startswith(name + ".") for name in names))


def _job_env(store_env: dict[str, str]) -> dict[str, str]:
    """A python job as the component configures it (schedule, Scheduler job), caller verification off."""
    return {"GOOGLE_CLOUD_PROJECT": "demo-start-up", "DEDUP_JOB": "jobs:run", "DEDUP_SCHEDULE": "* * * * *",
            "DEDUP_SCHEDULER_JOB": "projects/demo-start-up/locations/us-central1/jobs/start-up",
            "DEDUP_STORE_TIMEOUT_SECONDS": "1", "PYTHONPATH": str(ROOT / "examples" / "hello_job"), **store_env}


def test_the_service_module_imports_no_client_and_no_optional_part() -> None:
    modules = _loaded("scheduler_dedup.handler.service.app", {})
    assert "scheduler_dedup.handler.service.delivery" in modules
    assert _imported(modules, GOOGLE_AND_HTTP + NOT_FOR_A_DELIVERY + STORE_CLIENTS) == []


def test_a_handler_on_redis_starts_without_google_libraries_or_an_http_client(tmp_path: Path) -> None:
    auth = tmp_path / "auth"
    auth.write_text("secret\n")
    modules = _loaded("scheduler_dedup.handler.main", _job_env({
        "DEDUP_STORE": "redis", "DEDUP_REDIS_URL": f"redis://127.0.0.1:{_closed_port()}/0",
        "DEDUP_REDIS_AUTH_FILE": str(auth)}))
    assert "scheduler_dedup.handler.stores.redis.store" in modules and "jobs" in modules  # it did start up
    assert _imported(modules, GOOGLE_AND_HTTP + NOT_FOR_A_DELIVERY) == []
    assert _imported(modules, ("scheduler_dedup.handler.stores.firestore.store",
                               "scheduler_dedup.handler.stores.spanner.store")) == []


def test_a_handler_on_firestore_starts_with_its_client_and_nothing_it_does_not_use() -> None:
    modules = _loaded("scheduler_dedup.handler.main", _job_env({
        "DEDUP_STORE": "firestore", "FIRESTORE_EMULATOR_HOST": f"127.0.0.1:{_closed_port()}"}))
    assert "google.cloud.firestore" in modules and "jobs" in modules  # opened (and probed) at start-up
    assert _imported(modules, NOT_FOR_A_DELIVERY) == []
    assert _imported(modules, ("scheduler_dedup.handler.stores.redis.store", "scheduler_dedup.handler.stores.spanner.store",
                               "redis", "google.cloud.spanner")) == []
