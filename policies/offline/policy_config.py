"""Checking a policy config (the ``--policy-pack-config`` / ``--policy-config`` JSON) before any rule runs.

A typo in a policy config must not silently fall back to a default: ``"mandatry"`` would leave a rule at its
default level, ``"disabeld"`` would leave it on, ``"minMarginSecnds"`` would leave the threshold at 15 s, and
an unknown policy name would configure nothing. The format is Pulumi's
(https://www.pulumi.com/docs/iac/using-pulumi/crossguard/configuration/): top-level keys are policy names or
``all``; a value is an enforcement level string, or an object with ``enforcementLevel`` and the policy's
config properties (each rule's ``config_schema``).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from scheduler_dedup.policies.rules import RULES_BY_NAME, Rule

#: Enforcement levels Pulumi accepts (``remediate`` counts as mandatory here: no rule remediates).
LEVELS = ("advisory", "mandatory", "disabled", "remediate")

_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "number": (int, float), "integer": (int,), "string": (str,), "array": (list,), "boolean": (bool,),
    "object": (dict,),
}


class PolicyConfigError(ValueError):
    """A policy config names an unknown policy, level or property, or gives a value of the wrong type.

    Attributes:
        field: the dotted path of the offending entry, e.g. ``scheduler-attempt-deadline-margin.minMarginSecnds``.
    """

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field


def _suggest(value: str, known: list[str]) -> str:
    close = difflib.get_close_matches(value, known, n=1, cutoff=0.6)
    return f"did you mean {close[0]!r}?" if close else f"known: {', '.join(known)}"


def _check_level(field: str, level: Any) -> None:
    if level not in LEVELS:
        raise PolicyConfigError(field, f"{level!r} is not an enforcement level: {_suggest(str(level), list(LEVELS))}")


def _check_value(field: str, spec: Mapping[str, Any], value: Any) -> None:
    types = _JSON_TYPES.get(str(spec.get("type")), ())
    if types and (not isinstance(value, types) or (isinstance(value, bool) and bool not in types)):
        raise PolicyConfigError(field, f"{value!r} is not of type {spec.get('type')}")
    for bound, refused in (("minimum", lambda limit: value < limit), ("maximum", lambda limit: value > limit)):
        limit = spec.get(bound)
        if limit is not None and isinstance(value, (int, float)) and refused(limit):
            word = "below" if bound == "minimum" else "above"
            raise PolicyConfigError(field, f"{value!r} is {word} the {bound} {limit!r}: use a value from "
                                           f"{spec.get('minimum', '-inf')} to {spec.get('maximum', 'inf')}")
    if spec.get("type") == "array" and isinstance(value, list):
        item_types = _JSON_TYPES.get(str((spec.get("items") or {}).get("type")), ())
        if item_types and not all(isinstance(item, item_types) for item in value):
            raise PolicyConfigError(field, f"{value!r} must list values of type {(spec.get('items') or {}).get('type')}")


def check_policy_config(policy_config: Any, rules: Mapping[str, Rule] = RULES_BY_NAME) -> None:
    """Refuse anything in ``policy_config`` that no rule reads, naming every problem at once.

    Raises:
        PolicyConfigError: the config is not an object, names an unknown policy (``all`` is allowed), an
            unknown enforcement level, an unknown property of a policy, a value of the wrong type, a number
            outside the schema's ``minimum``/``maximum`` (a negative margin), or a low setting above its high one
            (``minSeconds`` above ``maxSeconds``); one line per problem, each naming the entry and the fix
            (:attr:`PolicyConfigError.errors` holds each).
    """
    errors = list(policy_config_problems(policy_config, rules))
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise PolicyConfigErrors(errors)


class PolicyConfigErrors(PolicyConfigError):
    """Several problems of one policy config, one line each (:attr:`errors`)."""

    def __init__(self, errors: list[PolicyConfigError]):
        ValueError.__init__(self, f"{len(errors)} problems:\n" + "\n".join(f"  {e}" for e in errors))
        self.field = errors[0].field
        self.errors = errors


def policy_config_problems(policy_config: Any, rules: Mapping[str, Rule] = RULES_BY_NAME) -> Iterator[PolicyConfigError]:
    """Every problem of ``policy_config`` (see :func:`check_policy_config`), in file order."""
    if not isinstance(policy_config, Mapping):
        yield PolicyConfigError("(policy config)", "must be a JSON object of policy name -> level or settings")
        return
    names = sorted(rules)
    for name, value in policy_config.items():
        if name != "all" and name not in rules:
            yield PolicyConfigError(str(name), f"no such policy in this pack: {_suggest(str(name), names)}")
            continue
        if isinstance(value, str) or name == "all":
            yield from _caught(lambda: _check_level(
                str(name), value.get("enforcementLevel") if isinstance(value, Mapping) else value))
            continue
        if not isinstance(value, Mapping):
            yield PolicyConfigError(str(name), f"{value!r} must be an enforcement level or an object")
            continue
        schema = rules[name].config_schema
        valid = True
        for key, setting in value.items():
            field = f"{name}.{key}"
            if key == "enforcementLevel":
                found = list(_caught(lambda: _check_level(field, setting)))
            elif key not in schema:
                known = sorted(["enforcementLevel", *schema])
                found = [PolicyConfigError(field, f"{name} has no setting {key!r}: {_suggest(str(key), known)}")]
            else:
                found = list(_caught(lambda: _check_value(field, schema[key], setting)))
            valid = valid and not found
            yield from found
        if not valid:
            continue  # the settings' order means nothing while one of them is wrong
        resolved = rules[name].resolve_config(value)
        for low, high in rules[name].ordered_settings:
            if isinstance(resolved.get(low), (int, float)) and isinstance(resolved.get(high), (int, float)) \
                    and resolved[low] > resolved[high]:
                yield PolicyConfigError(f"{name}.{low}", f"{resolved[low]!r} is above {high} ({resolved[high]!r}): "
                                                         f"no value could pass; make {low} at most {high}")


def _caught(check: Callable[[], None]) -> Iterator[PolicyConfigError]:
    try:
        check()
    except PolicyConfigError as error:
        yield error
