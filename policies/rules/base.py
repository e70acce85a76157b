"""What every domain module of the rules shares: the :class:`Rule` record, the :func:`rule` decorator that declares
one on its function, the config and message helpers, and the readings that rules of several domains compare (a
service's request timeout, a job's attempt deadline, a handler's env seconds, whether a job is the handler's
watchdog)."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Literal, TypeVar

from scheduler_dedup.handler.callers.audience import served_path
from scheduler_dedup.handler.core.paths import CHECK_PATH

from scheduler_dedup.policies.reading.readings import Seconds, read_attempt_deadline, read_seconds
from scheduler_dedup.policies.reading.model import Resource, get, is_unknown, number
from scheduler_dedup.policies.reading.topology import (
    Pairing,
    env_value,
    service_env,
    service_timeout,
    service_timeout_field,
)


Level = Literal["mandatory", "advisory", "disabled"]
ResourceCheck = Callable[[Resource, Mapping[str, Any]], list[str]]
StackCheck = Callable[[Sequence[Resource], Mapping[str, Any]], list[tuple[Resource | None, str]]]
Check = Callable[[Any, Mapping[str, Any]], list[Any]]


@dataclass(frozen=True)
class Rule:
    """One rule of the pack.

    Attributes:
        name: the policy name (stable; used in config files and reports).
        description: one sentence on what the rule checks and why.
        enforcement_level: default level, ``"mandatory"`` or ``"advisory"``.
        check: the rule function, a ``ResourceCheck`` or a ``StackCheck`` according to ``scope``.
        scope: ``"resource"`` (called per resource) or ``"stack"`` (called once with every resource).
        config_schema: JSON-schema ``properties`` of the rule's configuration, each with a ``default`` (and, for
            numbers, the ``minimum``/``maximum`` that make sense; Pulumi and the offline check refuse others).
        ordered_settings: pairs ``(low, high)`` of settings where ``low`` must not exceed ``high``.
    """

    name: str
    description: str
    enforcement_level: Level
    check: Check
    scope: Literal["resource", "stack"]
    config_schema: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    ordered_settings: tuple[tuple[str, str], ...] = ()

    def resolve_config(self, given: Mapping[str, Any] | None) -> dict[str, Any]:
        """The schema defaults overlaid with ``given`` (keys outside the schema and ``enforcementLevel`` dropped)."""
        config = {key: spec.get("default") for key, spec in self.config_schema.items()}
        for key, value in (given or {}).items():
            if key in self.config_schema:
                config[key] = value
        return config


#: Every rule declared with :func:`rule`, in the order declared.
_DECLARED: list[Rule] = []
_C = TypeVar("_C", bound=Callable[..., Any])


def rule(*, name: str, description: str, enforcement: Level,
         config_schema: Mapping[str, Mapping[str, Any]] | None = None,
         ordered_settings: tuple[tuple[str, str], ...] = ()) -> Callable[[_C], _C]:
    """Declare the decorated function a rule of the pack, with its name, description and default level beside it.

    Its scope follows from its first parameter: ``resource: Resource`` (called per resource) or
    ``resources: Sequence[Resource]`` (called once with the stack). The other arguments are :class:`Rule`'s.
    :func:`rules_of` lists a module's rules; the function itself is returned unchanged.

    Raises:
        TypeError: the first parameter is neither, or another rule has the name already.
    """
    def declare(check: _C) -> _C:
        parameters = list(inspect.signature(check).parameters.values())
        annotation = parameters[0].annotation if parameters else None
        text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", str(annotation))
        scope: Literal["resource", "stack"] | None = (
            "resource" if text == "Resource" else "stack" if text == "Sequence[Resource]" else None)
        if scope is None:
            raise TypeError(f"rule {name}: {check.__qualname__}'s first parameter is {text!r}: take "
                            "resource: Resource (one resource) or resources: Sequence[Resource] (the stack)")
        if any(other.name == name for other in _DECLARED):
            raise TypeError(f"rule {name} is declared twice: give {check.__qualname__} a name of its own")
        _DECLARED.append(Rule(name, description, enforcement, check, scope, dict(config_schema or {}),
                              ordered_settings))
        return check
    return declare


def rules_of(module: ModuleType) -> list[Rule]:
    """The rules ``module`` declares with :func:`rule`, in the order it declares them."""
    return [declared for declared in _DECLARED if declared.check.__module__ == module.__name__]


def _seconds_cfg(config: Mapping[str, Any], key: str) -> float:
    value = number(config.get(key))
    return float(value) if isinstance(value, float) else 0.0


def _fmt(seconds: float) -> str:
    return f"{seconds:g}s"


# ---------------------------------------------------------------- readings shared by several domains

def _deadline_and_timeout(pairing: Pairing) -> tuple[Seconds, Seconds]:
    return read_attempt_deadline(pairing.job.props), _timeout(pairing.service)


def _timeout(service: Resource) -> Seconds:
    """The service's request timeout (``template.timeout`` and its equivalents, see :func:`service_timeout`)."""
    path, default = service_timeout_field(service)
    raw = get(service.props, path)
    reading = read_seconds({"t": service_timeout(service)}, "t", default, "Cloud Run's")
    if reading.unknown or reading.problem:
        return Seconds(None, path, reading.problem and f"{path} {reading.problem[2:]}", reading.unknown)
    shown = f"{_fmt(default)} (the platform's default)" if raw is None else reading.shown
    return Seconds(reading.value, shown)


def _env_seconds(service: Resource, name: str, default: float) -> tuple[Any, str | None]:
    raw = env_value(service_env(service), name, None)
    if raw is None:
        return default, None
    if is_unknown(raw):
        return raw, None
    value = number(raw)
    if not isinstance(value, float) or value != value or value in (float("inf"), float("-inf")):
        return None, (f"service {service.name}: env {name}={raw!r} is not a number of seconds: set it to e.g. "
                      f"{default:g}")
    return value, None


def _env_shown(service: Resource, name: str, value: float) -> str:
    """``value`` of env ``name`` as a message quotes it: as written, or marked as the handler's default."""
    written = env_value(service_env(service), name, None) is not None
    return f"{value:g}" if written else f"{value:g} (the handler's default)"


def _calls_run_check(job_resource: Resource) -> bool | None:
    """True when the job calls the handler's run check (a watchdog), None when its URI is not known yet."""
    uri = get(job_resource.props, "httpTarget.uri")
    if is_unknown(uri):
        return None
    return isinstance(uri, str) and served_path(uri).rstrip("/") == CHECK_PATH
