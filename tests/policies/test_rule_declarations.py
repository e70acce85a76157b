"""Each rule is declared beside its function (``@rule``), and the pack's list is what the modules declare: the
domains' rules and each registered store's, none twice, every one of them CrossGuard's too."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from scheduler_dedup.handler.stores.kind import load
from scheduler_dedup.handler.stores.registry import STORES
from scheduler_dedup.policies.reading.model import Resource
from scheduler_dedup.policies.rules import RULES, RULES_BY_NAME
from scheduler_dedup.policies.rules.base import rule, rules_of


def test_the_pack_lists_every_declared_rule_once_with_its_stores_rules_last() -> None:
    assert len(RULES_BY_NAME) == len(RULES)
    store_rules = [r for kind in STORES for r in rules_of(load(kind.pack_rules))]
    assert RULES[-len(store_rules):] == store_rules
    assert {r.check.__module__.rsplit(".", 1)[1] for r in store_rules} == {"firestore", "memorystore", "spanner"}
    for declared in RULES:  # the scope follows the function's first parameter
        first = next(iter(declared.check.__code__.co_varnames))
        assert (declared.scope, first) in (("resource", "resource"), ("stack", "resources")), declared.name


def test_a_rule_function_that_takes_neither_a_resource_nor_the_stack_is_refused() -> None:
    with pytest.raises(TypeError, match="take resource: Resource .* or resources: Sequence"):
        @rule(name="toy-rule", description="d", enforcement="advisory")
        def toy(props: Mapping[str, Any], config: Mapping[str, Any]) -> list[str]:
            return []


def test_a_rule_name_is_declared_once() -> None:
    with pytest.raises(TypeError, match="scheduler-job-name is declared twice"):
        @rule(name="scheduler-job-name", description="d", enforcement="advisory")
        def again(resources: Sequence[Resource], config: Mapping[str, Any]) -> list[tuple[Resource | None, str]]:
            return []
