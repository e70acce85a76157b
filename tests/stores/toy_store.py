"""The toy store, installed as a package of its own and found through its entry point, as a store from another
repository would be.

``toy_package/`` is a distribution outside scheduler-dedup (``scheduler_dedup_toy_store``, entry point ``toy`` of
group :data:`~scheduler_dedup.handler.stores.registry.ENTRY_POINT_GROUP`). On import this module installs it with pip
(``--no-deps --no-build-isolation``: no network) into a folder keyed by its content, once per content, puts that
folder on ``sys.path`` and takes :data:`TOY` from :func:`~scheduler_dedup.handler.stores.registry.installed`: the
entry point, not an import of ours. The contract suite's fixtures then register it for its own tests only.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from scheduler_dedup.handler.stores.registry import installed

PACKAGE = Path(__file__).parent / "toy_package"
DISTRIBUTION = "scheduler-dedup-toy-store"


def install_dir() -> Path:
    """The folder the toy package is installed into (``pip install --target``), installing it first if needed."""
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in sorted(PACKAGE.glob("*.*")))).hexdigest()[:16]
    target = Path(tempfile.gettempdir()) / f"scheduler-dedup-toy-store-{digest}"
    if target.is_dir():
        return target
    building = Path(tempfile.mkdtemp(prefix="toy-store-install-"))
    source = building / "source"
    shutil.copytree(PACKAGE, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                    "--no-index", "--target", str(building / "site"), str(source)],
                   check=True, capture_output=True, timeout=300, env={**os.environ, "PIP_NO_INPUT": "1"})
    try:
        os.rename(building / "site", target)  # atomic: a parallel worker that got there first wins
    except OSError:
        if not target.is_dir():
            raise
    shutil.rmtree(building, ignore_errors=True)
    return target


def _installed_toy() -> object:
    folder = str(install_dir())
    if folder not in sys.path:
        sys.path.append(folder)
        importlib.invalidate_caches()
    [toy] = [kind for kind in installed() if kind.id == "toy"]
    return toy


TOY = _installed_toy()
_module = importlib.import_module("scheduler_dedup_toy_store")
ToyRunStore = _module.ToyRunStore
ToyServer = _module.ToyServer
HOST_VARIABLE = _module.HOST_VARIABLE
