"""Typed results of ``idempotent``: a dataclass or a Pydantic model, stored as JSON and rebuilt on every call.

The type comes from ``serializer=`` when given, else from the function's return annotation (``-> Receipt``, and for
an ``async def`` the type it returns when awaited). A dataclass is stored as :func:`dataclasses.asdict` and rebuilt
by its constructor, a field annotated with a dataclass rebuilt the same way (``list[Line]`` and ``dict[str, Line]``
fields too); a Pydantic model (when Pydantic is installed) is stored as ``model_dump(mode="json")`` and rebuilt by
``model_validate``. Any other annotation leaves the result in its stored JSON form
(:mod:`scheduler_dedup.handler.core.stored_result`).
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable
from typing import Any


class ResultTypeError(TypeError):
    """A stored result does not fit the result type (the type changed since it was stored, or a serializer= that is
    no dataclass or Pydantic model)."""


def _is_model(tp: Any) -> bool:
    """True for a Pydantic model class, without importing Pydantic."""
    return isinstance(tp, type) and callable(getattr(tp, "model_validate", None)) and hasattr(tp, "model_fields")


def _is_dataclass_type(tp: Any) -> bool:
    return isinstance(tp, type) and dataclasses.is_dataclass(tp)


def result_type(fn: Callable[..., Any], serializer: type | None) -> type | None:
    """The type ``fn``'s results are rebuilt as: ``serializer``, else its return annotation when that is a dataclass
    or a Pydantic model; None when results stay in their stored JSON form.

    Raises:
        TypeError: ``serializer`` is neither a dataclass nor a Pydantic model class.
    """
    if serializer is not None:
        if not (_is_dataclass_type(serializer) or _is_model(serializer)):
            raise TypeError(f"serializer={serializer!r} is neither a dataclass nor a Pydantic model class: pass the "
                            "type the function returns")
        return serializer
    try:
        annotation = typing.get_type_hints(fn).get("return")
    except Exception:  # noqa: BLE001 - an annotation that does not resolve: no type, results stay JSON
        return None
    return annotation if _is_dataclass_type(annotation) or _is_model(annotation) else None


def to_stored(value: Any) -> Any:
    """The JSON values a typed result is stored as (a value of another type is left to the stored form's rules)."""
    if _is_model(type(value)):
        return value.model_dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return value


def from_stored(tp: type, stored: Any) -> Any:
    """Rebuild a value of ``tp`` from its stored form; None stays None (a dropped result).

    Raises:
        ResultTypeError: ``stored`` does not fit ``tp``.
    """
    if stored is None:
        return None
    try:
        if _is_model(tp):
            return tp.model_validate(stored)  # type: ignore[attr-defined]
        return _dataclass(tp, stored)
    except ResultTypeError:
        raise
    except Exception as exc:
        raise ResultTypeError(f"the stored result does not fit {tp.__qualname__}: {exc}") from exc


def _dataclass(tp: Any, stored: Any) -> Any:
    if _is_model(tp):
        return tp.model_validate(stored)
    if _is_dataclass_type(tp):
        if not isinstance(stored, dict):
            raise ResultTypeError(f"the stored result is a {type(stored).__name__}, not an object of "
                                  f"{tp.__qualname__}'s fields")
        hints = typing.get_type_hints(tp)
        return tp(**{name: _dataclass(hints.get(name), value) for name, value in stored.items()})
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is list and args and isinstance(stored, list):
        return [_dataclass(args[0], item) for item in stored]
    if origin is dict and len(args) == 2 and isinstance(stored, dict):
        return {key: _dataclass(args[1], item) for key, item in stored.items()}
    return stored
