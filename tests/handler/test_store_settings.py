"""The store settings the handler, the component and the pack check alike (handler/service/startup.py): DEDUP_STORE and a
Spanner store's instance, database and table, each missing or contradictory setting named with its fix."""

from __future__ import annotations

import pytest

from scheduler_dedup.handler import ConfigError, Settings
from scheduler_dedup.handler.service.startup import startup_problems
from scheduler_dedup.handler.stores import open_store

SPANNER = {"GOOGLE_CLOUD_PROJECT": "p", "DEDUP_STORE": "spanner", "DEDUP_SPANNER_INSTANCE": "dedup-prod",
           "DEDUP_SPANNER_DATABASE": "runs"}


def test_a_spanner_store_reads_its_instance_database_and_table() -> None:
    s = Settings.from_env({**SPANNER, "DEDUP_COLLECTION": "nightly_runs"})
    assert (s.store, s.store_config.instance, s.store_config.database, s.collection) == ("spanner", "dedup-prod", "runs",
                                                                             "nightly_runs")
    assert Settings.from_env({"GOOGLE_CLOUD_PROJECT": "p"}).store == "firestore"


@pytest.mark.parametrize(("env", "match"), [
    ({"DEDUP_SPANNER_INSTANCE": ""}, "DEDUP_STORE=spanner needs DEDUP_SPANNER_INSTANCE"),
    ({"DEDUP_SPANNER_INSTANCE": "", "DEDUP_SPANNER_DATABASE": ""},
     "needs DEDUP_SPANNER_INSTANCE and DEDUP_SPANNER_DATABASE"),
    ({"DEDUP_DATABASE": "my-db"}, "names a Firestore database, but DEDUP_STORE=spanner"),
    ({"DEDUP_SPANNER_INSTANCE": "Prod_1"}, "is not a Spanner instance id"),
    ({"DEDUP_SPANNER_DATABASE": "a" * 31}, "is not a Spanner database id"),
    ({"DEDUP_COLLECTION": "scheduler-runs"}, "is not a Spanner table name"),
    ({"DEDUP_COLLECTION": "order"}, "reserved keyword"),
    ({"DEDUP_STORE": "mongodb"}, "is not a run store"),
])
def test_a_missing_or_contradictory_spanner_setting_is_named_with_its_fix(env: dict[str, str], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        Settings.from_env({**SPANNER, **env})
    assert any(match.split(" ")[0] in p for p in startup_problems({**SPANNER, **env})), "the pack and component agree"


def test_spanner_settings_without_dedup_store_spanner_are_refused() -> None:
    with pytest.raises(ConfigError, match="DEDUP_SPANNER_INSTANCE and DEDUP_SPANNER_DATABASE set, but "
                                          "DEDUP_STORE=firestore: set DEDUP_STORE=spanner"):
        Settings.from_env({**SPANNER, "DEDUP_STORE": ""})


def test_an_unknown_instance_at_preview_is_not_a_problem_yet() -> None:
    env = {k: v for k, v in SPANNER.items() if k != "DEDUP_SPANNER_INSTANCE"} | {"DEDUP_JOB": "jobs:run"}
    assert startup_problems(env, unknown=["DEDUP_SPANNER_INSTANCE"]) == []


def test_opening_a_spanner_store_without_its_client_library_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    real_import = builtins.__import__

    def no_spanner(name: str, *args: object, **kwargs: object) -> object:
        if name.startswith("google.cloud.spanner"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return real_import(name, *args, **kwargs)  # type: ignore[arg-type]

    import sys

    for module in [m for m in sys.modules if m.startswith("scheduler_dedup.handler.stores.spanner.store")]:
        monkeypatch.delitem(sys.modules, module)
    monkeypatch.setattr(builtins, "__import__", no_spanner)
    with pytest.raises(ConfigError, match=r"pip install 'scheduler-dedup\[spanner\]'"):
        open_store(Settings.from_env(SPANNER))
