"""The store registry: one registration per store, every list of stores derived from it, and the check that a store
brings every piece (the toy store of :mod:`.toy_store`, an installed package found through its entry point; the
contract suite runs on it too)."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

from scheduler_dedup.handler.config.settings import STORE_KINDS, Settings
from scheduler_dedup.handler.core.errors import ConfigError
from scheduler_dedup.handler.stores import EMULATOR_VARIABLES, open_store, registry
from scheduler_dedup.handler.stores.registry import STORES, problems, register, registered

from .toy_store import TOY, ToyRunStore, ToyServer, install_dir


def test_every_registered_store_brings_every_piece() -> None:
    """What a fourth store must pass: each piece named, each dotted path importable (client libraries included)."""
    for kind in STORES:
        assert problems(kind) == [], kind.id


def test_every_list_of_stores_derives_from_the_registry() -> None:
    from scheduler_dedup.infra.job.archive import STORE_REQUIREMENTS
    from scheduler_dedup.infra.stores.store import HANDLER_STORE, STORE_KINDS as COMPONENT_KINDS
    from scheduler_dedup.local.servers.store_servers import SERVER_KINDS
    from scheduler_dedup.handler.stores.kind import load
    from scheduler_dedup.policies.rules import RULES
    from scheduler_dedup.policies.rules.base import rules_of

    ids = tuple(kind.id for kind in STORES)
    assert STORE_KINDS == SERVER_KINDS == tuple(STORE_REQUIREMENTS) == ids == ("firestore", "redis", "spanner")
    # one canonical id per store, and the component's name for it declared as its alias
    assert COMPONENT_KINDS == ("firestore", "memorystore", "spanner")
    assert HANDLER_STORE == {"firestore": "firestore", "memorystore": "redis", "spanner": "spanner"}
    assert registry.by_component_kind("memorystore") is registry.REDIS
    assert EMULATOR_VARIABLES == {"firestore": "FIRESTORE_EMULATOR_HOST", "spanner": "SPANNER_EMULATOR_HOST"}
    for kind in STORES:  # each store's rules come into the pack through its registration
        own = rules_of(load(kind.pack_rules))
        assert own and all(rule in RULES for rule in own), kind.id


def test_an_installed_store_registers_through_its_entry_point_on_import() -> None:
    """A process whose path holds the installed toy package (and nothing of the tests) knows the store at once:
    ``DEDUP_STORE=toy`` opens it, the settings list it, and the registry names where it came from."""
    program = (
        "from scheduler_dedup.handler.stores import registry, open_store\n"
        "from scheduler_dedup.handler.config.settings import Settings\n"
        "print(registry.store_ids())\n"
        "import scheduler_dedup_toy_store as toy\n"
        "with toy.ToyServer() as server:\n"
        "    import os; os.environ.update(server.endpoint_env())\n"
        "    store = open_store(Settings.from_env({**server.endpoint_env(), 'GOOGLE_CLOUD_PROJECT': 'p', "
        "'DEDUP_STORE': 'toy'}))\n"
        "    print(type(store).__name__, store.create('r1', {'status': 'in_progress'}) is not None)\n")
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(install_dir())}, cwd="/")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["('firestore', 'redis', 'spanner', 'toy')", "ToyRunStore True"]
    # this process imported the registry before the package was on its path: the toy is registered by the tests only
    assert "toy" not in registry.store_ids()


def test_an_installed_store_whose_module_imports_our_local_servers_survives_the_import_cycle() -> None:
    """The toy package's module imports ``scheduler_dedup.local.servers.store_servers``, which imports the registry,
    which loads the entry point: a process whose first import is ``store_servers`` met a half-imported module and
    failed to start. The entry point is deferred until the imports are done, then registered."""
    program = ("import scheduler_dedup.local.servers.store_servers\n"
               "from scheduler_dedup.handler.stores import registry\n"
               "print(registry.find('toy') is not None, registry.store_ids())\n")
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(install_dir())}, cwd="/")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["True ('firestore', 'redis', 'spanner', 'toy')"]


def test_a_toy_store_is_one_registration_line() -> None:
    env = {"GOOGLE_CLOUD_PROJECT": "p", "DEDUP_STORE": "toy"}
    with pytest.raises(ConfigError, match=r"DEDUP_STORE=.toy. is not a run store: use one of firestore, redis \(or memorystore\), spanner"):
        Settings.from_env(env)
    with registered(TOY), ToyServer() as server:
        settings = Settings.from_env({**env, "DEDUP_COLLECTION": "toys"})
        assert settings.store == "toy" and settings.store_config is None
        with pytest.raises(ConfigError, match=r"did you mean .toy.\? use one of firestore, redis \(or memorystore\), spanner, toy"):
            Settings.from_env({**env, "DEDUP_STORE": "tyo"})
        store = server.connect("toys")
        assert isinstance(store, ToyRunStore) and store.collection == "toys"
        assert store.create("r1", {"status": "in_progress", "attempt_id": "a" * 32}) is not None
        record = store.get("r1")
        assert record is not None and record.attempt_id == "a" * 32
        # every dotted piece it names resolves: what it lacks is only what a deploy needs
        assert problems(TOY, resolve=True) == problems(TOY, resolve=False)
    assert registry.find("toy") is None
    with pytest.raises(ConfigError, match="not a run store"):
        open_store(Settings(project="p", store="toy"))


def test_a_store_missing_a_piece_fails_the_registry_check_naming_it() -> None:
    """The toy brings what the contract suite needs but nothing to deploy: the check names each missing piece and
    where to set it, as it would for a fourth store registered half-done."""
    assert problems(TOY) == [
        "store 'toy' brings no requirements (its pinned client library, for the deploy archive): set requirements= "
        "in its StoreKind (handler/stores/toy/__init__.py)",
        "store 'toy' brings no component (module of its DedupStore children (infra/stores/)): set component= in its "
        "StoreKind (handler/stores/toy/__init__.py)",
        "store 'toy' brings no pack_rules (module of its policy pack rules (policies/rules/stores/)): set pack_rules= "
        "in its StoreKind (handler/stores/toy/__init__.py)",
    ]
    broken = dataclasses.replace(registry.SPANNER, id="spanner2", component_kind="",
                                 factory="scheduler_dedup.handler.stores.spanner.store:no_such_factory",
                                 wire="scheduler_dedup.handler.stores.nowhere:WIRE", requirements=("redis>=8",))
    found = problems(broken)
    assert any("unpinned requirement" in p and "NAME==VERSION" in p for p in found), found
    assert any("its factory 'scheduler_dedup.handler.stores.spanner.store:no_such_factory' names nothing "
               "importable" in p for p in found), found
    assert any("its wire 'scheduler_dedup.handler.stores.nowhere:WIRE' names nothing importable" in p
               for p in found), found


def test_a_store_id_or_alias_is_registered_once() -> None:
    for clash in (dataclasses.replace(TOY, id="redis", component_kind="toy"),
                  dataclasses.replace(TOY, component_kind="memorystore")):
        with pytest.raises(ValueError, match="clashes with the registered store 'redis'"):
            register(clash)
    assert [kind.id for kind in STORES] == ["firestore", "redis", "spanner"]


def test_reading_settings_imports_no_store_client_and_no_pulumi() -> None:
    """Naming every store costs nothing at cold start: the settings of a Redis handler import neither the Redis,
    Firestore nor Spanner client, and nothing of pulumi."""
    code = ("import sys\n"
            "from scheduler_dedup.handler.config.settings import Settings\n"
            "s = Settings.from_env({'GOOGLE_CLOUD_PROJECT': 'p', 'DEDUP_STORE': 'redis',"
            " 'DEDUP_REDIS_URL': 'redis://10.0.0.3:6379/0'})\n"
            "assert type(s.store_config).__name__ == 'RedisConfig'\n"
            "loaded = [m for m in ('redis', 'google.cloud.firestore', 'google.cloud.spanner_v1', 'grpc', 'pulumi')"
            " if m in sys.modules]\n"
            "print(loaded)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
