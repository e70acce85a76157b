"""The session's store servers, watched: one that exits mid-suite is named at once (which server, which
pytest-xdist worker, its exit code and its log's last lines), restarted between tests on the same port, and where
the restart fails the tests that need it fail at once with that reason, not with "Connection refused".

The deaths are in the report of the test they happened in (its own long traceback replaced by the death:
the first cause), a line as the run goes, and the first section of the terminal summary ("servers that died").
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from scheduler_dedup.local.servers.store_servers import ProcessStoreServer

#: The name of a report's user property that names a server's death; the controller collects these.
SECTION = "server died"


@dataclass
class _Watched:
    server: ProcessStoreServer
    fixtures: frozenset[str]  # the fixtures a test asks for when it needs this server
    broken: str | None = None  # why the tests that need it fail at once (its restart failed)


@dataclass
class _State:
    watched: list[_Watched] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)  # deaths not yet in a report
    named: set[tuple[int, int]] = field(default_factory=set)  # (id(server), pid) of deaths already named
    seen: list[str] = field(default_factory=list)  # on the controller: every death reported, in order


_state = _State()


def worker() -> str:
    """This process's pytest-xdist worker id (``gw0``...), or ``main`` in a run without workers."""
    return os.environ.get("PYTEST_XDIST_WORKER", "main")


def watch(server: ProcessStoreServer, *fixtures: str) -> ProcessStoreServer:
    """Watch ``server`` (a session's server) until :func:`unwatch`; ``fixtures`` are those that give it to a test."""
    _state.watched.append(_Watched(server, frozenset(fixtures)))
    return server


def unwatch(server: ProcessStoreServer) -> None:
    """Stop watching ``server`` (it is being stopped on purpose)."""
    _state.watched[:] = [w for w in _state.watched if w.server is not server]


def ready(server: ProcessStoreServer) -> None:
    """For a function-scoped fixture, before the test: fail the test at once when ``server`` died and could not be
    restarted (the reason names it); a server not watched is left alone."""
    for watched in _state.watched:
        if watched.server is server and watched.broken:
            pytest.fail(watched.broken, pytrace=False)


def _describe(server: ProcessStoreServer, code: int, tail: str) -> str:
    how = f"killed by signal {-code}" if code < 0 else f"exit code {code}"
    lines = "\n".join("    " + line for line in tail.strip().splitlines()[-15:]) or "    (its log is empty)"
    return (f"{server.display_name} on {server.host} (pid {server.started_pid}) of worker {worker()} exited: "
            f"{how}; its log ends:\n{lines}")


def _sweep() -> list[_Watched]:
    """Name every watched server that has died since the last look (into the pending deaths); return the dead."""
    dead = []
    for watched in _state.watched:
        status = watched.server.exit_status()
        if status is None:
            continue
        dead.append(watched)
        key = (id(watched.server), watched.server.started_pid or 0)
        if key not in _state.named:
            _state.named.add(key)
            _state.pending.append(_describe(watched.server, *status))
    return dead


def _needs(item: pytest.Item, watched: _Watched) -> bool:
    names = set(getattr(item, "fixturenames", ()))
    params = getattr(getattr(item, "callspec", None), "params", {})
    if "store_server_session" in names and params.get("store_server_session") == watched.server.kind:
        return True
    return bool(names & watched.fixtures)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Between tests, the safe time: restart each session server that died; one that cannot restart fails the tests
    that need it, now and after, with the death and the restart's error."""
    for watched in _sweep():
        death = _describe(watched.server, *(watched.server.exit_status() or (0, "")))
        try:
            watched.server.restart()
        except Exception as exc:  # noqa: BLE001 (any failure to restart is the reason the tests fail)
            watched.broken = f"{death}\nand it could not be restarted: {exc}"
            _state.pending.append(f"{watched.server.display_name} of worker {worker()} was not restarted: {exc}")
        else:
            _state.pending.append(f"{watched.server.display_name} of worker {worker()} restarted on "
                                  f"{watched.server.host} before {item.nodeid}")
    for watched in _state.watched:
        if watched.broken and _needs(item, watched):
            pytest.fail(watched.broken, pytrace=False)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Deaths seen up to this report go in it; a failed report whose server died has the death as its long
    representation (the first cause), with only the end of its own traceback."""
    outcome = yield
    report = outcome.get_result()
    _sweep()
    deaths, _state.pending[:] = list(_state.pending), []
    for text in deaths:  # user properties travel from a pytest-xdist worker to the controller, unprinted
        report.user_properties.append((SECTION, text))
    if report.failed and deaths and call.excinfo is not None and not call.excinfo.errisinstance(pytest.fail.Exception):
        own = str(report.longrepr).strip().splitlines()[-3:]
        report.longrepr = "\n".join([*deaths, "the test's own error (its end):", *("    " + line for line in own)])


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """On the controller (or a run without workers): print each death as it arrives, and keep it for the summary."""
    config = _config[0] if _config else None
    for title, text in report.user_properties:
        if title != SECTION:
            continue
        _state.seen.append(text)
        reporter = config.pluginmanager.get_plugin("terminalreporter") if config else None
        if reporter is not None:
            reporter.ensure_newline()
            reporter.write_line(f"server watch ({report.nodeid}): {text.splitlines()[0]}", red=True, bold=True)


_config: list[pytest.Config] = []


def pytest_configure(config: pytest.Config) -> None:
    _config[:] = [config]


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> Iterator[None]:
    """The servers that died, before the failures' tracebacks: the first cause first."""
    if _state.seen:
        terminalreporter.write_sep("=", "servers that died", red=True, bold=True)
        for text in _state.seen:
            terminalreporter.write_line(text)
    yield
