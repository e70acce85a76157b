"""What a job's result becomes: one JSON form, stored, answered and replayed alike, checked against the store first.

**The stored form.** A result is kept as JSON values, and the delivery that ran the job, every later
duplicate and every ``idempotent`` call answer exactly that form:

- ``dict`` (string keys; ``int``/``float``/``bool``/``None`` keys become strings, as in JSON), ``list``,
  ``str``, ``int``, finite ``float``, ``bool`` and ``None`` are kept as they are;
- a ``dict`` whose keys become the same JSON key (``{1: "a", "1": "b"}``) is not stored: keeping one of them
  would silently lose the other, so the result is dropped with a reason;
- a ``tuple`` becomes a list (a JSON array);
- a ``datetime.datetime`` or ``datetime.date`` becomes its ISO 8601 string (``datetime.isoformat()``: RFC 3339
  for an aware datetime);
- anything else (a ``set``, ``bytes``, ``Decimal``, an object, ``NaN``, ``Infinity``) is not stored: the result
  is ``None`` and ``result_dropped`` says why. JSON has no ``NaN``, and an answer body is always valid JSON.

**The store's limits.** The stored form is then checked against what the run store accepts
(:meth:`~scheduler_dedup.handler.stores.base.RunStore.result_refusal`: Firestore's value model and
document size, Spanner's JSON column and row limits...), because a refused completion write would leave the
run ``in_progress`` and let the next delivery run the job again. A result that does not fit is dropped with
the store's reason; the run is still recorded completed.
"""

from __future__ import annotations

import copy
import datetime as dt
import inspect
import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from scheduler_dedup.handler.core.safe_text import exception_text, utf8_safe

RESULT_FIELD = "result"


@dataclass(frozen=True)
class StoredResult:
    """A job's result as it is stored and answered.

    Attributes:
        value: the stored form (JSON values), or None when the result was dropped.
        dropped: why the result was not stored, or None.
    """

    value: Any
    dropped: str | None = None


def _json_default(value: Any) -> Any:
    if isinstance(value, (dt.datetime, dt.date)):
        return value.isoformat()
    raise TypeError(f"a {type(value).__name__} is not a JSON value")


class _KeyCollision(ValueError):
    pass


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # JSON text from json.dumps repeats a key only where distinct keys became one string (1 and "1").
    mapping = dict(pairs)
    if len(mapping) != len(pairs):
        repeated = next(key for key, count in Counter(key for key, _ in pairs).items() if count > 1)
        raise _KeyCollision(f"two keys of one map become the same JSON key {repeated[:40]!r} (e.g. 1 and \"1\"); "
                            "storing one would silently lose the other")
    return mapping


def json_form(value: Any) -> StoredResult:
    """The stored form of ``value`` (see the module docstring), or a dropped result saying why.

    Never raises: whatever a job returns, the run can be recorded.
    """
    try:
        text = json.dumps(value, allow_nan=False, default=_json_default)
        return StoredResult(json.loads(text, object_pairs_hook=_unique_keys))
    except _KeyCollision as exc:
        return StoredResult(None, utf8_safe(f"result cannot be stored as JSON: {exc}"))
    except (TypeError, ValueError, RecursionError) as exc:
        reason = exception_text(exc, 500).partition(": ")[2]
        if "Out of range float" in reason:
            reason = "it holds NaN or Infinity, which JSON cannot hold"
        return StoredResult(None, f"result is not JSON: {reason}")
    except Exception as exc:  # a user object whose own hooks raise: the run must still be recorded
        return StoredResult(None, f"result is not JSON: {exception_text(exc, 500)}")


def prepare_result(value: Any, refusal: Callable[[Any], str | None]) -> StoredResult:
    """The result to store for a completed run: its stored form if the store will take it, else a dropped result.

    Args:
        value: what the job returned.
        refusal: the store's check of a stored form (:meth:`RunStore.result_refusal` bound to the record):
            why it cannot be stored, or None.

    Never raises: should a check itself fail on some value, the result is dropped with that failure as the
    reason, so a run that executed is still recorded and never run again because of its result.
    """
    try:
        form = json_form(value)
        if form.dropped is not None:
            return form
        reason = refusal(form.value)
        if reason is not None:
            return StoredResult(None, reason)
        return form
    except Exception as exc:  # the run must be recorded whatever the result holds
        return StoredResult(None, f"the result could not be prepared for storing: {exception_text(exc, 500)}")


def replayable(value: Any) -> StoredResult:
    """A stored result read back from the store, as an answer may carry it (a fresh copy in JSON values).

    Records written by this version hold JSON values already. A value other code wrote goes through the same
    rules as a job's result (a timestamp becomes its ISO 8601 string, NaN drops the result with a reason), so
    no answer is invalid JSON.
    """
    return json_form(value) if value is not None else StoredResult(None)


def fresh_copy(value: Any) -> Any:
    """A deep copy of a stored form, so no two answers share a mutable object."""
    return copy.deepcopy(value)


def finished_value(value: Any) -> Any:
    """``value``, unless it is work not done yet (a coroutine, generator or other awaitable, whose body has not
    run): storing it would drop it as "not JSON" and record the run completed, so its work would never run, not
    even on a retry.

    Raises:
        TypeError: ``value`` is a coroutine, generator, async generator or awaitable (a coroutine is closed first,
            so Python warns of no "never awaited" coroutine); the run is released like any failure.
    """
    if inspect.iscoroutine(value) or inspect.isgenerator(value) or inspect.isasyncgen(value) \
            or inspect.isawaitable(value):
        close = getattr(value, "close", None)
        if inspect.iscoroutine(value) and callable(close):
            close()
        raise TypeError(f"the work returned a {type(value).__name__}, whose body has not run: await it or consume "
                        "it inside the work (decorate the async def itself), and return its result")
    return value
