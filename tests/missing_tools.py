"""A test skipped because a tool is missing on this machine (a browser, the docs extra) fails under ``CI=true``:
a CI run installs what the suite needs (scripts/_bootstrap.sh does), so there such a skip hides a test that never
ran. Such a skip's reason starts with :data:`PREFIX` (:func:`missing`)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

PREFIX = "missing tool: "


def missing(what: str) -> str:
    """The reason of a skip for a missing tool: ``what`` says which, and how to install it."""
    return PREFIX + what


def in_ci() -> bool:
    """Whether this is a CI run: ``CI`` is ``true`` (or ``1``), as GitHub Actions, GitLab CI and most runners set it."""
    return os.environ.get("CI", "").strip().lower() in ("true", "1")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    if not (report.skipped and in_ci() and isinstance(report.longrepr, tuple)):
        return
    reason = str(report.longrepr[2]).removeprefix("Skipped: ")
    if reason.startswith(PREFIX):
        report.outcome = "failed"
        report.longrepr = (f"{reason}\nCI=true: a CI run must install it, not skip the test "
                           "(scripts/_bootstrap.sh installs it where it may: root and apt-get)")
