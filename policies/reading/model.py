"""Resource properties as the rules see them: plain dicts in engine (camelCase) names, with unknowns marked.

The Pulumi engine sends each resource's properties with its input names in camelCase
(``httpTarget.oidcToken.serviceAccountEmail``, ``attemptDeadline``, ``template.timeout``). During
``pulumi preview`` a value that depends on another resource's output is not known yet; pulumi-policy
delivers it as one of seven sentinel strings (``pulumi_policy.proxy.UNKNOWN_*_VALUE``) and wraps the
properties in a proxy whose item access raises ``UnknownValueError``. :func:`unwrap` turns that proxy
back into plain ``dict``/``list`` values with the :data:`UNKNOWN` marker in place of each sentinel, so
rules never trip over the proxy and can decide for themselves what an unknown value means. This module
does not import pulumi or pulumi_policy.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import urlsplit


class _Unknown:
    """The type of :data:`UNKNOWN`: a value the engine will only know after the update."""

    _instance: "_Unknown | None" = None

    def __new__(cls) -> "_Unknown":
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNKNOWN"

    def __bool__(self) -> bool:
        return False


UNKNOWN: Final = _Unknown()
"""Marker for a property whose value is not known during preview (an output of another resource)."""

# pulumi-policy's sentinels for unknown values (pulumi_policy/proxy.py, UNKNOWN_*_VALUE); the same
# strings the Pulumi engine uses. tests/policies check they match the installed pulumi-policy.
UNKNOWN_SENTINELS: Final = frozenset({
    "1c4a061d-8072-4f0a-a4cb-0ff528b18fe7",  # boolean
    "3eeb2bf0-c639-47a8-9e75-3b44932eb421",  # number
    "04da6b54-80e4-46f7-96ec-b56ff0331ba9",  # string
    "6a19a0b0-7e62-4c92-b797-7f8e31da9cc2",  # array
    "030794c1-ac77-496b-92df-f27374a8bd58",  # asset
    "e48ece36-62e2-4504-bad9-02848725956a",  # archive
    "dd056dcd-154b-4c76-9bd3-c8f88648b5ff",  # object
})


def is_unknown(value: Any) -> bool:
    """True when ``value`` is :data:`UNKNOWN` or one of the engine's unknown sentinels."""
    return value is UNKNOWN or (isinstance(value, str) and value in UNKNOWN_SENTINELS)


def unwrap(value: Any) -> Any:
    """Plain data from engine properties: pulumi-policy proxies and sentinels become dicts, lists and :data:`UNKNOWN`.

    Reads the proxies' targets without triggering ``UnknownValueError`` (pulumi-policy exposes the
    wrapped container under the key ``"__target"``), so it never raises on unknown values.
    """
    if is_unknown(value):
        return UNKNOWN
    if isinstance(value, (str, bytes, int, float, bool)) or value is None:
        return value
    if isinstance(value, Mapping):
        target = _proxy_target(value)
        items = target.items() if isinstance(target, Mapping) else value.items()
        return {str(k): unwrap(v) for k, v in items}
    if isinstance(value, Sequence):
        target = _proxy_target(value)
        return [unwrap(v) for v in (target if isinstance(target, list) else list(value))]
    return value


def _proxy_target(container: Any) -> Any:
    """The container a pulumi-policy ``_DictProxy``/``_ListProxy`` wraps, or None for plain containers."""
    if type(container).__name__ not in ("_DictProxy", "_ListProxy", "_DictSecretsProxy", "_ListSecretsProxy"):
        return None
    try:
        return container["__target"]
    except Exception:  # noqa: BLE001 - a proxy of another shape: fall back to iterating it
        return None


def get(props: Any, path: str) -> Any:
    """The value at a dotted ``path`` (``"httpTarget.oidcToken.audience"``; list indexes as digits).

    Returns None when a step is missing and :data:`UNKNOWN` when a step is unknown.
    """
    current = props
    for step in path.split("."):
        if is_unknown(current):
            return UNKNOWN
        if isinstance(current, Mapping):
            current = current.get(step)
        elif isinstance(current, list) and step.isdigit() and int(step) < len(current):
            current = current[int(step)]
        else:
            return None
        if current is None:
            return None
    return UNKNOWN if is_unknown(current) else current


_DURATION_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)s\s*$")


class InvalidDuration(ValueError):
    """A duration that is neither a number of seconds nor a protobuf duration string like ``"180s"``."""


def duration_seconds(value: Any) -> float | None | Any:
    """Seconds in a protobuf duration string (``"180s"``, ``"0.5s"``) or a number, as the Scheduler and Run APIs take them.

    Returns None for a missing value, :data:`UNKNOWN` for an unknown one.

    Raises:
        InvalidDuration: the value is not a duration in seconds (for example ``"3m"``).
    """
    if value is None or value == "":
        return None
    if is_unknown(value):
        return UNKNOWN
    if isinstance(value, bool):
        raise InvalidDuration(f"{value!r} is not a duration")
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        match = _DURATION_RE.match(value)
        if match:
            return float(match.group(1))
        try:
            return float(value)
        except ValueError:
            pass
    raise InvalidDuration(f"{value!r} is not a duration in seconds: write it like \"180s\"")


def number(value: Any) -> float | None | Any:
    """A float from a number or numeric string; None when missing or not a number; :data:`UNKNOWN` when unknown."""
    if value is None:
        return None
    if is_unknown(value):
        return UNKNOWN
    if isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def host(url: str) -> str | None:
    """The lower-cased host name of ``url`` (no port), or None when ``url`` is not absolute."""
    parts = urlsplit(url.strip())
    return parts.hostname.lower() if parts.hostname else None


def policy_bindings(policy_data: Any) -> list[dict[str, Any]] | Any:
    """The ``bindings`` of an IAM ``policyData`` JSON document; :data:`UNKNOWN` when unknown, [] when missing or invalid."""
    if is_unknown(policy_data):
        return UNKNOWN
    if isinstance(policy_data, str):
        try:
            policy_data = json.loads(policy_data)
        except ValueError:
            return []
    if isinstance(policy_data, Mapping):
        bindings = policy_data.get("bindings")
        if isinstance(bindings, list):
            return [dict(b) for b in bindings if isinstance(b, Mapping)]
    return []


@dataclass(frozen=True)
class Resource:
    """One resource as a rule sees it.

    Attributes:
        type: Pulumi type token, e.g. ``gcp:cloudscheduler/job:Job``.
        name: logical name.
        urn: the URN (offline: a URN built from the name and type).
        props: properties in engine (camelCase) names, unknowns as :data:`UNKNOWN`.
        parent: URN of the parent resource, if any.
        dependencies: property name -> URNs of the resources that property's value came from
            (the engine's property dependencies; empty offline).
    """

    type: str
    name: str
    urn: str
    props: Mapping[str, Any]
    parent: str | None = None
    dependencies: Mapping[str, Sequence[str]] = field(default_factory=dict)
