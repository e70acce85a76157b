"""The deploy archive: deterministic layout, and the package Cloud Run would build actually works.

The end-to-end test installs the archive's requirements.txt from PyPI into a fresh virtual
environment, starts the unpacked archive against each store's local server (the archive pins that store's client
only) as Cloud Run starts it (functions-framework) and as App Engine does (its ``app.yaml`` entrypoint, gunicorn
serving ``main:app``), and sends one Scheduler delivery twice to each: the job runs once.
"""

from __future__ import annotations

import io
import os
import signal
import socket
import subprocess
import sys
import time
import venv
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from scheduler_dedup.handler.config.settings import STORE_KINDS
from scheduler_dedup.infra.job.archive import (HANDLER_IMPORTS, HANDLER_REQUIREMENTS, STORE_REQUIREMENTS,
                                           build_deploy_archive, handler_source_dir, requirements_for)
from scheduler_dedup.infra.errors import DeployArchiveError
from scheduler_dedup.local.servers.store_servers import SERVER_KINDS, StoreServer, store_server
from tests.paths import HELLO_JOB, ROOT

HELLO = HELLO_JOB


def test_layout_main_handler_package_job_and_pinned_requirements() -> None:
    archive = build_deploy_archive(HELLO)
    handler_py = sorted(p.relative_to(handler_source_dir()).as_posix() for p in handler_source_dir().rglob("*.py")
                        if "__pycache__" not in p.parts)
    assert set(archive.entries) == {"main.py", "jobs.py", "requirements.txt", "app.yaml"} | {
        f"scheduler_dedup/handler/{p}" for p in handler_py
    }
    assert "scheduler_dedup/__init__.py" not in archive.entries  # namespace package
    with zipfile.ZipFile(io.BytesIO(archive.content)) as zf:
        assert zf.read("main.py") == (handler_source_dir() / "main.py").read_bytes()
        requirements = zf.read("requirements.txt").decode().splitlines()
        assert {line for line in requirements if line and not line.startswith("#")} == set(requirements_for("firestore"))
        assert all("==" in r for r in requirements_for("firestore"))
        assert {i.date_time for i in zf.infolist()} == {(1980, 1, 1, 0, 0, 0)}
        assert [i.filename for i in zf.infolist()] == sorted(archive.entries)


def test_an_archive_pins_the_client_of_its_own_store_only() -> None:
    """Each store's client goes into the deploy archive of a job on that store only, at the version tested here."""
    from importlib.metadata import version

    assert set(STORE_REQUIREMENTS) == set(STORE_KINDS)
    for store, pins in STORE_REQUIREMENTS.items():
        assert all(pin == f"{pin.split('==')[0]}=={version(pin.split('==')[0])}" for pin in pins), pins
        with zipfile.ZipFile(io.BytesIO(build_deploy_archive(HELLO, store=store).content)) as zf:
            lines = {line for line in zf.read("requirements.txt").decode().splitlines() if line and line[0] != "#"}
        assert lines == {*HANDLER_REQUIREMENTS, *pins}, store
        others = {p for other, p_ in STORE_REQUIREMENTS.items() if other != store for p in p_}
        assert not lines & others, store
    with pytest.raises(DeployArchiveError, match="store"):
        build_deploy_archive(HELLO, store="sqlite")


def test_app_yaml_is_app_engine_standard_python_with_the_gunicorn_entrypoint() -> None:
    import yaml

    from scheduler_dedup.infra.job.archive import APP_ENGINE_ENTRYPOINT, APP_ENGINE_RUNTIME

    with zipfile.ZipFile(io.BytesIO(build_deploy_archive(None).content)) as zf:
        app = yaml.safe_load(zf.read("app.yaml"))
        requirements = zf.read("requirements.txt").decode()
    assert app == {"runtime": APP_ENGINE_RUNTIME, "entrypoint": APP_ENGINE_ENTRYPOINT}
    assert APP_ENGINE_RUNTIME.startswith("python3")
    # App Engine runs it with $PORT set; the WSGI object is main:app, and gunicorn must be in requirements.txt.
    assert APP_ENGINE_ENTRYPOINT.startswith("gunicorn -b :$PORT ") and APP_ENGINE_ENTRYPOINT.endswith(" main:app")
    # the Cloud Run server's bounds, from the one place they are set (handler/service/server.py)
    assert "-c python:scheduler_dedup.handler.service.gunicorn_config " in APP_ENGINE_ENTRYPOINT
    from scheduler_dedup.handler.service import gunicorn_config
    from scheduler_dedup.handler.service.server import SERVER_SETTINGS, SERVER_THREADS

    assert (gunicorn_config.workers, gunicorn_config.threads, gunicorn_config.timeout) == (1, SERVER_THREADS, 0)
    assert {key: getattr(gunicorn_config, key) for key in SERVER_SETTINGS} == SERVER_SETTINGS
    assert any(line.startswith("gunicorn==") for line in requirements.splitlines())


def _imports(path: Path) -> set[str]:
    """The top-level modules ``path`` imports (deferred imports included)."""
    import ast

    imported: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            imported.add(node.module.split(".")[0])
    return imported


def test_every_third_party_import_of_the_handler_is_pinned() -> None:
    imported = {name for path in handler_source_dir().rglob("*.py") for name in _imports(path)}
    third_party = {m for m in imported if m not in sys.stdlib_module_names and m != "__future__"}
    unknown = third_party - set(HANDLER_IMPORTS)
    assert not unknown, f"handler imports {unknown}: add them to HANDLER_IMPORTS and HANDLER_REQUIREMENTS"
    pinned = {r.split("==")[0] for r in (*HANDLER_REQUIREMENTS, *[r for rs in STORE_REQUIREMENTS.values() for r in rs])}
    # grpcio is no pin of its own: only a gRPC store's module imports grpc, and that store's client requires grpcio.
    from importlib.metadata import requires
    grpc_stores = {path.parent.name for path in (handler_source_dir() / "stores").glob("*/*.py")
                   if "grpc" in _imports(path)}
    assert grpc_stores and grpc_stores <= set(STORE_REQUIREMENTS), grpc_stores
    assert not any("grpc" in _imports(path) for path in handler_source_dir().rglob("*.py")
                   if path.parent.parent.name != "stores"), "only a store's modules may import grpc"
    for store in grpc_stores:
        client = STORE_REQUIREMENTS[store][0].split("==")[0]
        required = {r.split(";")[0].split("<")[0].split(">")[0].split("=")[0].split("!")[0].strip()
                    for r in requires(client) or [] if "extra ==" not in r}
        assert "grpcio" in required or "google-api-core[grpc]" in required, client
    assert {HANDLER_IMPORTS[m] for m in third_party} - {""} <= pinned | {"grpcio"}


def test_archive_is_deterministic_and_changes_with_content(tmp_path: Path) -> None:
    source = tmp_path / "job"
    source.mkdir()
    (source / "jobs.py").write_text("def run(run):\n    return None\n")
    first = build_deploy_archive(source)
    os.utime(source / "jobs.py", (0, 0))
    assert build_deploy_archive(source).sha256 == first.sha256
    (source / "jobs.py").write_text("def run(run):\n    return 1\n")
    assert build_deploy_archive(source).sha256 != first.sha256


@pytest.mark.parametrize("name", ["main.py", "app.yaml"])
def test_job_source_may_not_shadow_the_handler(tmp_path: Path, name: str) -> None:
    (tmp_path / name).write_text("")
    with pytest.raises(DeployArchiveError, match=name):
        build_deploy_archive(tmp_path)


def test_job_requirements_are_appended(tmp_path: Path) -> None:
    (tmp_path / "jobs.py").write_text("")
    (tmp_path / "requirements.txt").write_text("humanize==4.9.0\n")
    archive = build_deploy_archive(tmp_path)
    with zipfile.ZipFile(io.BytesIO(archive.content)) as zf:
        lines = zf.read("requirements.txt").decode().splitlines()
    assert "humanize==4.9.0" in lines and "requirements.txt" in archive.entries and HANDLER_REQUIREMENTS[0] in lines


@pytest.fixture()
def reserved_port() -> Iterator[int]:
    """A port on 127.0.0.1 that only a server setting SO_REUSEADDR (gunicorn does) can bind while this holds it.

    The socket is bound (SO_REUSEADDR) but never listens: the kernel hands the port to no one else, and a
    server that binds it with SO_REUSEADDR and listens succeeds (Linux refuses only an active listener's
    port). A port merely found free and closed could be taken by another process before the server binds
    it, and a readiness connect would then succeed against that other listener.
    """
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        yield int(sock.getsockname()[1])


@pytest.fixture(params=SERVER_KINDS)
def archive_store(request: pytest.FixtureRequest) -> Iterator[StoreServer]:
    """Each store's real local server (Firestore's is the session's emulator, wiped)."""
    if request.param == "firestore":
        server: StoreServer = request.getfixturevalue("emulator")
        server.prepare("scheduler_runs")
        yield server
        return
    with store_server(request.param) as server:
        server.prepare("scheduler_runs")
        yield server


@pytest.fixture()
def installed_archive(tmp_path: Path, archive_store: StoreServer) -> Iterator[tuple[Path, Path]]:
    """The archive of the store's handler unpacked into ``app/`` and its requirements installed into a fresh venv
    ``venv/``."""
    app = tmp_path / "app"
    with zipfile.ZipFile(io.BytesIO(build_deploy_archive(HELLO, store=archive_store.kind).content)) as zf:
        zf.extractall(app)
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True, clear=True).create(env_dir)
    python = env_dir / "bin" / "python"
    result = subprocess.run(
        [str(python), "-m", "pip", "install", "--disable-pip-version-check", "-q", "-r", str(app / "requirements.txt")],
        capture_output=True, text=True, timeout=540,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    yield app, env_dir


@pytest.mark.processes
@pytest.mark.timeout(900)
def test_unpacked_archive_serves_one_run_and_skips_its_duplicate(
    installed_archive: tuple[Path, Path], archive_store: StoreServer, tmp_path: Path, reserved_port: int
) -> None:
    app, env_dir = installed_archive
    port = reserved_port
    log = tmp_path / "job-runs.log"
    env = {
        "PATH": f"{env_dir / 'bin'}:/usr/bin:/bin",
        "HOME": str(tmp_path),
        **archive_store.endpoint_env(),
        "DEDUP_JOB": "jobs:run",
        "HELLO_JOB_LOG": str(log),
    }
    server = subprocess.Popen(
        [str(env_dir / "bin" / "functions-framework"), "--source", "main.py", "--target", "handle_scheduled_job",
         "--host", "127.0.0.1", "--port", str(port)],
        cwd=app, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        url = f"http://127.0.0.1:{port}/"
        for _ in range(300):  # readiness poll, bounded; not a timing assertion
            if server.poll() is not None:
                pytest.fail(f"functions-framework exited: {server.stdout.read() if server.stdout else ''}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.2)
        headers = {
            "X-CloudScheduler-JobName": "projects/demo/locations/us-central1/jobs/hello",
            "X-CloudScheduler-ScheduleTime": "2026-10-16T12:00:00Z",
        }
        first = requests.post(url, headers=headers, timeout=60)
        assert first.status_code == 200, first.text
        assert first.json()["status"] == "processed", first.text
        second = requests.post(url, headers=headers, timeout=60)
        assert second.status_code == 200, second.text
        assert second.json()["status"] == "duplicate", second.text
        lines = log.read_text().splitlines()
        assert len(lines) == 1, lines
        assert "2026-10-16T12:00:00+00:00" in lines[0]
    finally:
        _stop(server)
    _serve_as_app_engine_once(app, env, port, log)


def _stop(server: subprocess.Popen[str]) -> None:
    server.terminate()
    try:
        server.wait(timeout=20)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()
    if sys.exc_info()[0] is not None and server.stdout:
        print(server.stdout.read()[-5000:])


def _serve_as_app_engine_once(app: Path, env: dict[str, str], port: int, log: Path) -> None:
    """The same unpacked archive and venv, started as App Engine starts it: app.yaml's entrypoint by a shell with
    $PORT set (gunicorn from requirements.txt serving main:app), sent an App Engine target's delivery twice."""
    import yaml

    entrypoint = yaml.safe_load((app / "app.yaml").read_text())["entrypoint"]
    server = subprocess.Popen(["/bin/sh", "-c", entrypoint], cwd=app, text=True, start_new_session=True,
                              env={**env, "PORT": str(port), "DEDUP_APP_ENGINE_CALLER": "true"},
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        for _ in range(300):  # readiness poll, bounded; not a timing assertion
            if server.poll() is not None:
                pytest.fail(f"the app.yaml entrypoint exited: {server.stdout.read() if server.stdout else ''}")
            try:
                if requests.get(f"http://127.0.0.1:{port}/favicon.ico", timeout=2).status_code == 404:
                    break  # functions-framework's own 404: the app is loaded
            except requests.RequestException:
                pass
            time.sleep(0.2)
        headers = {"User-Agent": "AppEngine-Google; (+http://code.google.com/appengine)", "X-CloudScheduler": "true",
                   "X-CloudScheduler-JobName": "hello", "X-CloudScheduler-ScheduleTime": "2026-10-17T12:00:00Z",
                   "X-Dedup-Project": "demo", "X-Dedup-Location": "us-central1", "X-Appengine-Cron": "true",
                   "Content-Type": "application/octet-stream"}
        url = f"http://127.0.0.1:{port}/tasks/hello"
        first = requests.post(url, headers=headers, data=b"nightly", timeout=60)
        assert first.status_code == 200 and first.json()["status"] == "processed", first.text
        second = requests.post(url, headers=headers, data=b"nightly", timeout=60)
        assert second.status_code == 200 and second.json()["status"] == "duplicate", second.text
        forged = requests.post(url, headers={k: v for k, v in headers.items() if k != "X-Appengine-Cron"}, timeout=60)
        assert forged.status_code == 403, forged.text
        lines = log.read_text().splitlines()
        assert len(lines) == 2 and "2026-10-17T12:00:00+00:00" in lines[1], lines
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGTERM)  # the shell's gunicorn and its worker
        _stop(server)


def test_every_pinned_version_is_within_the_range_pyproject_allows() -> None:
    """scripts/_bootstrap.sh installs :func:`tested_pins` after the project: a pin outside pyproject.toml's range would
    make that install break the project's own requirement (or the archive ship what the package refuses)."""
    import tomllib

    from packaging.requirements import Requirement

    from scheduler_dedup.infra.job.archive import tested_pins

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = [Requirement(r) for r in project["dependencies"]]
    declared += [Requirement(r) for extra in project.get("optional-dependencies", {}).values() for r in extra]
    ranges = {r.name.lower(): r.specifier for r in declared if r.specifier}
    for pin in tested_pins():
        name, version = pin.split("==")
        if name.lower() in ranges:
            assert ranges[name.lower()].contains(version), f"{pin} is outside pyproject.toml's {ranges[name.lower()]}"


def test_archives_go_to_the_users_own_cache_and_old_ones_are_removed(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The default folder is private to its user (a shared /tmp folder was 0755, another user's to write), and an
    archive unused for a day is removed by the next write, so previews do not pile zips up."""
    from scheduler_dedup.infra.job import archive as archive_module

    cache = tmp_path / "cache" / "archives"
    monkeypatch.setattr(archive_module, "ARCHIVE_CACHE", cache)
    built = build_deploy_archive(HELLO)
    written = built.write()
    assert written == cache / f"{built.sha256}.zip" and written.read_bytes() == built.content
    assert cache.stat().st_mode & 0o077 == 0, oct(cache.stat().st_mode)  # created private
    old, recent = cache / f"{'0' * 64}.zip", cache / f"{'1' * 64}.zip"
    for path, age in ((old, archive_module.ARCHIVE_KEEP_SECONDS + 60), (recent, 60)):
        path.write_bytes(b"zip")
        os.utime(path, (time.time() - age, time.time() - age))
    assert built.write() == written
    assert not old.exists() and recent.exists()
    os.utime(written, (time.time() - 2 * archive_module.ARCHIVE_KEEP_SECONDS,) * 2)
    assert built.write() == written and written.exists()  # written again: used, so kept
    elsewhere = built.write(tmp_path / "mine")  # a folder of the caller's own: written there, nothing pruned
    assert elsewhere.parent == tmp_path / "mine" and recent.exists()
