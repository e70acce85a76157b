"""CrossGuard adapters: the rules of :mod:`scheduler_dedup.policies.rules` as pulumi-policy policies.

:func:`build_policies` is what ``policies/__main__.py`` hands to ``PolicyPack``; it does not start the
policy server, so tests can build and inspect the policies. Each adapter turns the engine's property
proxies into plain data (:func:`~scheduler_dedup.policies.reading.model.unwrap`, unknowns become
``UNKNOWN``), fills in the rule's config defaults and reports each message with ``report_violation``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    Policy,
    PolicyConfigSchema,
    PolicyResource,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)

from scheduler_dedup.policies.reading.model import Resource, unwrap
from scheduler_dedup.policies.rules import RULES, Rule

PACK_NAME = "scheduler-dedup"
"""The policy pack's name (also in PulumiPolicy.yaml's directory name when published)."""

_LEVELS = {
    "mandatory": EnforcementLevel.MANDATORY,
    "advisory": EnforcementLevel.ADVISORY,
    "disabled": EnforcementLevel.DISABLED,
}


def _config(rule: Rule, given: Mapping[str, Any] | None) -> dict[str, Any]:
    return rule.resolve_config(unwrap(given) if given is not None else None)


def resource_from_args(args: ResourceValidationArgs) -> Resource:
    """A :class:`Resource` from the engine's arguments of a resource validation."""
    return Resource(type=args.resource_type, name=args.name, urn=args.urn, props=unwrap(args.props) or {},
                    parent=getattr(args.opts, "parent", None))


def resource_from_policy_resource(resource: PolicyResource) -> Resource:
    """A :class:`Resource` from one entry of a stack validation, keeping its parent and property dependencies."""
    dependencies = {key: [dep.urn for dep in deps] for key, deps in (resource.property_dependencies or {}).items()}
    return Resource(type=resource.resource_type, name=resource.name, urn=resource.urn,
                    props=unwrap(resource.props) or {}, parent=resource.parent.urn if resource.parent else None,
                    dependencies=dependencies)


def to_policy(rule: Rule) -> Policy:
    """The CrossGuard policy for ``rule``: same name, description, default level and config schema."""
    schema = PolicyConfigSchema(properties={k: dict(v) for k, v in rule.config_schema.items()}) if rule.config_schema else None
    if rule.scope == "resource":
        def validate_resource(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
            resource = resource_from_args(args)
            for message in rule.check(resource, _config(rule, args.get_config())):
                report_violation(str(message), None)

        return ResourceValidationPolicy(name=rule.name, description=rule.description, validate=validate_resource,
                                        enforcement_level=_LEVELS[rule.enforcement_level], config_schema=schema)

    def validate_stack(args: StackValidationArgs, report_violation: ReportViolation) -> None:
        resources = [resource_from_policy_resource(r) for r in args.resources]
        for subject, message in rule.check(resources, _config(rule, args.get_config())):
            report_violation(message, subject.urn if subject is not None else None)

    return StackValidationPolicy(name=rule.name, description=rule.description, validate=validate_stack,
                                 enforcement_level=_LEVELS[rule.enforcement_level], config_schema=schema)


def build_policies() -> list[Policy]:
    """Every rule of :data:`~scheduler_dedup.policies.rules.RULES` as a CrossGuard policy, in order."""
    return [to_policy(rule) for rule in RULES]
