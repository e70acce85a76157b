"""Typed results of ``idempotent``: a dataclass or a Pydantic model, stored as JSON and rebuilt on every call.

The type comes from ``serializer=`` when given, else from the function's return annotation (``-> Receipt``, and for
an ``async def`` the type it returns when awaited). A dataclass is stored as :func:`dataclasses.asdict` and rebuilt
by its constructor, a field annotated with a dataclass rebuilt the same way (``list[Line]`` and ``dict[str, Line]``
fields too); a Pydantic model (when Pydantic is installed) is stored as ``model_dump(mode="json")`` and rebuilt by
``model_validate``; a ``datetime``/``date`` field is rebuilt from its ISO 8601 string; ``Optional[...]``, unions,
lists, tuples and dicts of these are rebuilt member by member. Any other annotation leaves the result in its
stored JSON form (:mod:`scheduler_dedup.handler.core.stored_result`).
"""

from __future__ import annotations

import collections.abc
import dataclasses
import datetime as dt
import types
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


def result_type(fn: Callable[..., Any], serializer: type | None) -> Any:
    """The type ``fn``'s results are rebuilt as: ``serializer``, else its return annotation when that is, or holds,
    a dataclass or a Pydantic model (``Receipt``, ``Optional[Receipt]``, ``list[Receipt]``, ``dict[str, Receipt]``);
    None when results stay in their stored JSON form.

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
    return annotation if _holds_typed(annotation) else None


def _holds_typed(tp: Any) -> bool:
    """True if ``tp`` is a dataclass or Pydantic model class, or a union, list, tuple or dict of one."""
    if _is_dataclass_type(tp) or _is_model(tp):
        return True
    return any(_holds_typed(arg) for arg in typing.get_args(tp) if arg is not Ellipsis)


def to_stored(value: Any) -> Any:
    """The JSON values a result is stored as: dataclasses and Pydantic models, also inside lists, tuples and dicts,
    as their fields (any other value is left to the stored form's rules)."""
    if _is_model(type(value)):
        return value.model_dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, (list, tuple)):
        return [to_stored(item) for item in value]
    if isinstance(value, dict):
        return {key: to_stored(item) for key, item in value.items()}
    return value


def from_stored(tp: Any, stored: Any) -> Any:
    """Rebuild a value of ``tp`` from its stored form; None stays None (a dropped result, or an Optional's None).

    Raises:
        ResultTypeError: ``stored`` does not fit ``tp``.
    """
    if stored is None:
        return None
    try:
        return _rebuild(tp, stored)
    except ResultTypeError:
        raise
    except Exception as exc:
        raise ResultTypeError(f"the stored result does not fit {getattr(tp, '__qualname__', tp)}: {exc}") from exc


def _rebuild(tp: Any, stored: Any) -> Any:
    """``stored`` as ``tp``: dataclasses by their constructor (their fields by their own annotations), Pydantic
    models by ``model_validate``, a datetime or date field from its ISO 8601 string, through unions, lists, tuples
    and dicts; any other annotation leaves the value as stored."""
    if stored is None:
        return None
    if _is_model(tp):
        return tp.model_validate(stored)
    if _is_dataclass_type(tp):
        if not isinstance(stored, dict):
            raise ResultTypeError(f"the stored result is a {type(stored).__name__}, not an object of "
                                  f"{tp.__qualname__}'s fields")
        hints = typing.get_type_hints(tp)
        init = {field.name for field in dataclasses.fields(tp) if field.init}
        return tp(**{name: _rebuild(hints.get(name), value) for name, value in stored.items() if name in init})
    if tp is dt.datetime and isinstance(stored, str):
        return dt.datetime.fromisoformat(stored)
    if tp is dt.date and isinstance(stored, str):
        return dt.date.fromisoformat(stored)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        return _rebuild_union([arg for arg in args if arg is not type(None)], stored)
    if origin in (list, collections.abc.Sequence) and args and isinstance(stored, list):
        return [_rebuild(args[0], item) for item in stored]
    if origin is tuple and args and isinstance(stored, list):
        kinds = [args[0]] * len(stored) if len(args) == 2 and args[1] is Ellipsis else list(args)
        return tuple(_rebuild(kind, item) for kind, item in zip(kinds, stored, strict=False))
    if origin in (dict, collections.abc.Mapping) and len(args) == 2 and isinstance(stored, dict):
        return {key: _rebuild(args[1], item) for key, item in stored.items()}
    return stored


def _rebuild_union(members: list[Any], stored: Any) -> Any:
    """``stored`` as the first member of a union it fits (``Optional[X]`` is X or None)."""
    failures = []
    for member in sorted(members, key=lambda member: not _holds_typed(member)):  # typed members first
        try:
            return _rebuild(member, stored)
        except Exception as exc:  # noqa: BLE001 - another member may fit
            failures.append(exc)
    if failures and len(failures) == len(members):
        raise failures[0]
    return stored
