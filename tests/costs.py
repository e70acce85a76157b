"""Test layers by cost: every test is ``unit``, ``server``, ``processes`` or ``campaign``, and a test that starts
what its layer does not allow fails, naming the marker it needs.

- ``unit``: no local server and no process of ours; ``./scripts/test --fast`` runs these.
- ``server``: one real local store server (Firestore or Spanner emulator, redis-server), in-process clients.
- ``processes``: handler processes, CLI runs or several servers.
- ``campaign``: seeded fault campaigns and the demo (minutes each).

A test's layer is the highest of its own ``@pytest.mark.<layer>`` (or its module's ``pytestmark``) and what its
fixtures imply (:data:`SERVER_FIXTURES`, :data:`PROCESS_FIXTURES`, resolved through the whole fixture closure).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

LAYERS = ("unit", "server", "processes", "campaign")
#: Fixtures that start a real local store server (directly or through ``store_server_session``'s kinds).
SERVER_FIXTURES = frozenset({"firestore_emulator", "redis_server", "store_server_session"})
#: Fixtures that start handler processes.
PROCESS_FIXTURES = frozenset({"harness", "platform_harness"})
#: What a process's command names when it is a server, a handler or a long command of ours -> the least layer.
_STARTS = {
    "java": "server", "emulator_main": "server", "redis-server": "server",
    "scheduler_dedup.local.servers.serve_socket": "processes", "gunicorn": "processes", "functions-framework": "processes",
    "run-local": "processes", "runs": "processes", "demo": "campaign", "campaign": "campaign",
    "failover-campaign": "campaign", "scripts/demo": "campaign",
}

_current: list[str] = []  # the running test's layer, while it runs (setup, call and teardown)


def layer_of(item: pytest.Item) -> str:
    marked = [m.name for m in item.iter_markers() if m.name in LAYERS]
    fixtures = set(getattr(item, "fixturenames", ()))
    implied = ["processes"] if fixtures & PROCESS_FIXTURES else ["server"] if fixtures & SERVER_FIXTURES else []
    return max([*marked, *implied, "unit"], key=LAYERS.index)


def needed_layer(argv: Sequence[Any]) -> str | None:
    """The least layer a command belongs to, or None for a command any test may run."""
    words = [word for arg in argv for word in str(arg).split()]  # a shell's -c "gunicorn ..." too
    names = {Path(w).name for w in words[:1]} | set(words[1:3]) | {w for w in words if w.endswith("scripts/demo")}
    if words and Path(words[0]).name == "scheduler-dedup" and len(words) > 1:
        names.add(words[1])
    found = [_STARTS[n if not n.endswith("scripts/demo") else "scripts/demo"] for n in names
             if n in _STARTS or n.endswith("scripts/demo")]
    return max(found, key=LAYERS.index) if found else None


class _GuardedPopen(subprocess.Popen):  # type: ignore[type-arg]
    def __init__(self, args: Any, *rest: Any, **kwargs: Any) -> None:
        argv = [args] if isinstance(args, (str, bytes, os.PathLike)) else list(args)
        if kwargs.get("shell") and isinstance(args, str):
            argv = args.split()
        need = needed_layer(argv)
        if _current and need and LAYERS.index(need) > LAYERS.index(_current[-1]):
            raise RuntimeError(f"a test marked {_current[-1]!r} started {argv[:3]}: mark it "
                               f"@pytest.mark.{need} (tests/costs.py)")
        super().__init__(args, *rest, **kwargs)


def pytest_configure(config: pytest.Config) -> None:
    for name in LAYERS:
        config.addinivalue_line("markers", f"{name}: test layer by cost (tests/costs.py)")
    subprocess.Popen = _GuardedPopen  # type: ignore[misc]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        layer = layer_of(item)
        if not any(m.name == layer for m in item.iter_markers()):
            item.add_marker(layer)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    _current.append(layer_of(item))
    try:
        yield
    finally:
        _current.pop()
