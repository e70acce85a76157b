"""The distribution installs one top-level import name, ``scheduler_dedup``, and nothing generic."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from tests.paths import ROOT


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel ``pip wheel`` builds of a copy of the sources.

    pip builds in the source tree (its ``build/`` and ``*.egg-info``), so two builds of the tree at once (two
    pytest-xdist workers) would share, and remove, each other's files: each build gets its own copy."""
    source = tmp_path_factory.mktemp("source") / "scheduler-dedup"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
        ".git", ".venv", "build", "dist", "site", "*.egg-info", "__pycache__", ".*_cache", ".demo"))
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(out), str(source)],
                   check=True, capture_output=True, timeout=600)
    (built,) = out.glob("scheduler_dedup-*.whl")
    return built


def test_wheel_has_only_the_scheduler_dedup_package(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    top_level = {name.split("/")[0] for name in names}
    assert top_level == {"scheduler_dedup", wheel.name.split("-")[0] + "-" + wheel.name.split("-")[1] + ".dist-info"}
    packages = {"/".join(name.split("/")[:2]) for name in names if name.startswith("scheduler_dedup/")}
    assert packages == {"scheduler_dedup/handler", "scheduler_dedup/infra", "scheduler_dedup/policies",
                        "scheduler_dedup/local"}
    assert "scheduler_dedup/handler/main.py" in names  # what functions-framework serves
    # A package folder missing from [tool.setuptools] packages still lands in the wheel today, with only a
    # "Package would be ignored" warning from setuptools: check the list itself, and the rules package's modules.
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    folders = [(package, ROOT / folder) for package, folder in config["package-dir"].items()]
    while folders:
        package, folder = folders.pop()
        assert package in config["packages"], f"{package} ({folder.relative_to(ROOT)}) is not in [tool.setuptools] packages"
        folders += [(f"{package}.{sub.name}", sub) for sub in folder.iterdir() if (sub / "__init__.py").is_file()]
    rules = [f"scheduler_dedup/policies/rules/{module.name}" for module in (ROOT / "policies" / "rules").glob("*.py")]
    assert "scheduler_dedup/policies/rules/__init__.py" in rules and set(rules) <= set(names)
    # pyproject's license = "Apache-2.0", and the wheel carries its full text (PEP 639 license files)
    [license_file] = [name for name in names if name.endswith(".dist-info/licenses/LICENSE")]
    text = zipfile.ZipFile(wheel).read(license_file).decode()
    assert "Apache License" in text and "Version 2.0, January 2004" in text and "END OF TERMS AND CONDITIONS" in text
    assert 'license = "Apache-2.0"' in (ROOT / "pyproject.toml").read_text()
    assert not any(name.startswith(("handler/", "infra/", "policies/", "local/", "tests/")) for name in names)


def test_every_package_is_in_the_wheel(wheel: Path) -> None:
    """Each folder of Python modules under a package (``handler/stores``...) is listed in pyproject's packages."""
    names = set(zipfile.ZipFile(wheel).namelist())
    for top in ("handler", "infra", "policies", "local"):
        for module in (ROOT / top).rglob("*.py"):
            rel = module.relative_to(ROOT).parts
            if "__pycache__" in rel or "examples" in rel or rel[:2] == ("infra", "provider"):
                continue  # examples are read as files; infra/provider is the Pulumi plugin host, run as a program
            assert f"scheduler_dedup/{module.relative_to(ROOT).as_posix()}" in names, module


#: Client libraries of the stores: only the store modules (and the component) may import them.
_STORE_LIBRARIES = ("google.cloud.firestore", "google.cloud.spanner", "google.api_core", "google.cloud.firestore_v1",
                    "google.cloud.spanner_v1", "redis")


def test_only_the_store_modules_import_a_stores_client_library() -> None:
    """The protocol, run history, the CLI, the demo and the campaign use the store contract only: outside
    ``handler/stores/`` and ``infra/`` no module imports Firestore's, Spanner's or Redis' client (or
    ``google.api_core``, whose exceptions are theirs)."""
    import ast

    offenders = []
    for top in ("handler", "local", "policies"):
        for module in (ROOT / top).rglob("*.py"):
            if "stores" in module.relative_to(ROOT).parts:
                continue
            for node in ast.walk(ast.parse(module.read_text(), str(module))):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                    [node.module or ""] if isinstance(node, ast.ImportFrom) else []
                for name in names:
                    if name == "google.cloud" and isinstance(node, ast.ImportFrom):
                        names += [f"google.cloud.{a.name}" for a in node.names]
                    if any(name == lib or name.startswith(lib + ".") for lib in _STORE_LIBRARIES):
                        offenders.append(f"{module.relative_to(ROOT)}:{node.lineno} imports {name}")
    assert not offenders, offenders


def test_redis_is_an_extra_and_a_redis_store_without_it_names_the_install_command(wheel: Path) -> None:
    """``redis`` is required only by the ``redis`` extra (a Firestore user installs no Redis client), and a handler on
    ``DEDUP_STORE=redis`` in a process without it fails with the command that installs it."""
    with zipfile.ZipFile(wheel) as archive:
        [metadata] = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        requires = [line for line in archive.read(metadata).decode().splitlines() if line.startswith("Requires-Dist:")]
    on_redis = [line for line in requires if line.split()[1].startswith("redis")]
    assert on_redis and all('extra == "redis"' in line for line in on_redis), requires
    program = (
        "import sys\n"
        "class NotInstalled:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'redis' or name.startswith('redis.'):\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "sys.meta_path.insert(0, NotInstalled())\n"
        "from scheduler_dedup.handler.config.settings import Settings\n"
        "from scheduler_dedup.handler.stores import open_store\n"
        "open_store(Settings.from_env({'GOOGLE_CLOUD_PROJECT': 'p', 'DEDUP_STORE': 'redis',\n"
        "                              'DEDUP_REDIS_URL': 'redis://127.0.0.1:1/0'}))\n")
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert "ConfigError" in done.stderr and "pip install 'scheduler-dedup[redis]'" in done.stderr, done.stderr
