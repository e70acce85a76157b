"""The policy pack's rules: one function per rule, in one module per domain, each declared with
:func:`~.base.rule` beside its function and listed in :data:`RULES`.

- :mod:`.scheduler`: the Cloud Scheduler job (schedule, OIDC token, attempt deadline, retry config, direct
  Google API targets);
- :mod:`.handler_service`: the service running the dedup handler (its settings, proxy audience, lease, crash
  recovery, CPU allocation);
- :mod:`.iam`: IAM grants (public invoker, basic roles);
- :mod:`.store`: every run-record store (record retention);
- :mod:`.alerting`: the missed-run watchdog and its alert;
- :mod:`.names`: every resource's name against Google's naming rules;
- :mod:`.stores`: each store's own rules, one module per store, named by its registration's ``pack_rules``
  (:data:`scheduler_dedup.handler.stores.registry.STORES`): Firestore's TTL policy and its owner, run-check index,
  location; Memorystore's tier, eviction, AUTH, transit encryption, persistence, replica; Spanner's row deletion
  policy, its retention from the DDL, database-scoped data role, drop protection;
- :mod:`.base`: what they share (:class:`Rule`, the :func:`~.base.rule` decorator, readings several domains compare).

Each rule reads resource properties in the Pulumi engine's names (camelCase inputs of pulumi-gcp, e.g.
``httpTarget.oidcToken.serviceAccountEmail``), treats missing values as the provider/API default and
unknown values (:data:`~scheduler_dedup.policies.reading.model.UNKNOWN`, during preview) as "cannot tell yet,
no violation", and returns messages that say what to change.

Resource rules have the signature ``(resource: Resource, config: Mapping[str, Any]) -> list[str]``;
stack rules ``(resources: Sequence[Resource], config) -> list[tuple[Resource | None, str]]``. ``config``
is the rule's configuration with its schema defaults filled in (see :meth:`Rule.resolve_config`).

This package imports neither pulumi nor pulumi_policy: the offline check and the tests call the rule
functions directly, and :mod:`scheduler_dedup.policies.pack` adapts them to CrossGuard policies.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scheduler_dedup.handler.stores.kind import load
from scheduler_dedup.handler.stores.registry import STORES

from scheduler_dedup.policies.reading.model import Resource
from scheduler_dedup.policies.rules import alerting, handler_service, iam, names, scheduler, store
from scheduler_dedup.policies.rules.base import Check, Level, ResourceCheck, Rule, StackCheck, rules_of  # re-exported
from scheduler_dedup.policies.rules.store import job_retry_window_seconds  # re-exported


# ---------------------------------------------------------------- the list

RULES: list[Rule] = [
    *(declared for domain in (scheduler, handler_service, iam, store, alerting, names) for declared in rules_of(domain)),
    *(declared for kind in STORES if kind.pack_rules for declared in rules_of(load(kind.pack_rules))),
]
"""Every rule of the pack, in report order: the domains', then each registered store's."""

RULES_BY_NAME: dict[str, Rule] = {rule.name: rule for rule in RULES}


# ---------------------------------------------------------------- evaluation without the engine

@dataclass(frozen=True)
class Finding:
    """One violation: which rule, at which level, on which resource (None: the stack), and what to change."""

    rule: str
    level: Level
    resource: Resource | None
    message: str

    @property
    def resource_label(self) -> str:
        """``name (type)`` of the resource, or ``(stack)``."""
        return f"{self.resource.name} ({self.resource.type})" if self.resource else "(stack)"


def enforcement_levels(policy_config: Mapping[str, Any] | None) -> dict[str, Level]:
    """Each rule's level after a Pulumi policy config (``{"all": "advisory", "rule": {"enforcementLevel": ...}}``)."""
    config = policy_config or {}
    levels: dict[str, Level] = {}
    for rule in RULES:
        level: Any = rule.enforcement_level
        for key in ("all", rule.name):
            value = config.get(key)
            candidate = value.get("enforcementLevel") if isinstance(value, Mapping) else value
            if candidate in ("mandatory", "advisory", "disabled", "remediate"):
                level = "mandatory" if candidate == "remediate" else candidate
        levels[rule.name] = level
    return levels


def evaluate(resources: Sequence[Resource], policy_config: Mapping[str, Any] | None = None,
             rules: Iterable[Rule] = RULES) -> list[Finding]:
    """Run ``rules`` over ``resources`` the way the policy engine would and return every violation.

    ``policy_config`` has the format of ``pulumi preview --policy-pack-config`` files: rule name (or
    ``all``) -> enforcement level string, or -> object with ``enforcementLevel`` and config properties.
    """
    levels = enforcement_levels(policy_config)
    findings: list[Finding] = []
    for rule in rules:
        level = levels.get(rule.name, rule.enforcement_level)
        if level == "disabled":
            continue
        given = (policy_config or {}).get(rule.name)
        config = rule.resolve_config(given if isinstance(given, Mapping) else None)
        if rule.scope == "resource":
            for resource in resources:
                for message in rule.check(resource, config):
                    findings.append(Finding(rule.name, level, resource, str(message)))
        else:
            for subject, message in rule.check(resources, config):
                findings.append(Finding(rule.name, level, subject, message))
    return findings
