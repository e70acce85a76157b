"""What a Spanner run record may hold, checked before it is written: the JSON ``result`` column and the fields' types.

**The result** goes in a ``JSON`` column (https://cloud.google.com/spanner/docs/working-with-json). Spanner refuses,
or would change, a JSON value that breaks one of these rules, and a refused completion would leave the run
``in_progress`` for the next delivery to run again, so :func:`result_refusal` checks them first:

- nesting: "JSON can be nested to a maximum of 80 levels". Each object or array is one level; counting the
  innermost scalar as a level too (the page does not say), at most :data:`MAX_CONTAINER_DEPTH` = 79 containers;
- numbers: signed integers in [INT64_MIN, INT64_MAX] and unsigned ones up to UINT64_MAX are kept; doubles are kept if
  they round-trip through their text, which every Python ``float`` does (its ``repr`` is the shortest text that
  round-trips). An integer outside those ranges is refused (the emulator silently turns it into a double);
- strings: UTF-8 (a ``str`` holding a lone surrogate cannot be sent);
- size: "the maximum permitted size of the normalized document is 10 MB", and a column holds at most 10 MB
  (https://cloud.google.com/spanner/quotas#tables: "Size of data per column"). The check counts the compact JSON
  text in UTF-8 (the normalised form drops whitespace and sorts keys, never longer) against 10,000,000 bytes,
  the smaller reading of "10 MB".

Spanner keeps object keys in lexicographic order and may write a number differently (10000 as 1e+4): the value
read back is equal, as JSON compares values.

**The other fields** must have the column's type (:mod:`.schema`): a value of another type is refused before
anything is sent (:func:`field_problem`).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from scheduler_dedup.handler.core.safe_text import is_utf8, utf8_safe
from scheduler_dedup.handler.core.stored_result import RESULT_FIELD
from scheduler_dedup.handler.stores.spanner.schema import COLUMNS_BY_NAME

#: Most objects and arrays on one path of a JSON value (https://cloud.google.com/spanner/docs/working-with-json:
#: "nested to a maximum of 80 levels", the innermost scalar counted as a level).
MAX_CONTAINER_DEPTH = 79
#: Largest JSON value, bytes of compact UTF-8 text (https://cloud.google.com/spanner/docs/working-with-json and
#: https://cloud.google.com/spanner/quotas: 10 MB, read as 10,000,000 bytes).
MAX_JSON_BYTES = 10_000_000
INT64_MIN, UINT64_MAX = -(2**63), 2**64 - 1


def _shown(path: str) -> str:
    path = utf8_safe(path)
    return path if len(path) <= 80 else path[:77] + "..."


def json_refusal(value: Any, field: str = RESULT_FIELD) -> str | None:
    """Why Spanner's ``JSON`` type cannot hold ``value`` (JSON values) as the value of ``field``, or None.

    Checks UTF-8 strings and keys, integer range and nesting depth; the size is :func:`result_refusal`'s concern.
    """
    stack: list[tuple[Any, str, int]] = [(value, field, 0)]
    while stack:
        item, path, depth = stack.pop()
        if isinstance(item, str):
            if not is_utf8(item):
                return (f"{_shown(path)} is a string that is not valid UTF-8 (it holds a lone surrogate, e.g. from "
                        "os.listdir's surrogateescape); Spanner stores UTF-8 text only")
        elif isinstance(item, bool) or item is None or isinstance(item, float):
            continue
        elif isinstance(item, int):
            if not INT64_MIN <= item <= UINT64_MAX:
                return (f"{_shown(path)} is {item}, outside the integers Spanner's JSON keeps (INT64_MIN to "
                        "UINT64_MAX)")
        elif isinstance(item, (dict, list)):
            if depth + 1 > MAX_CONTAINER_DEPTH:
                return (f"{_shown(path)} nests objects and arrays deeper than Spanner's JSON allows (80 levels, "
                        f"at most {MAX_CONTAINER_DEPTH} objects or arrays)")
            if isinstance(item, dict):
                for key, child in item.items():
                    if not is_utf8(key):
                        return (f"{_shown(path)} has a key that is not valid UTF-8 ({utf8_safe(key)[:40]!r}: a lone "
                                "surrogate); Spanner stores UTF-8 text only")
                    stack.append((child, f"{path}.{key}", depth + 1))
            else:
                stack.extend((child, f"{path}[{i}]", depth + 1) for i, child in enumerate(item))
        else:
            return f"{_shown(path)} is a {type(item).__name__}, not a JSON value"
    return None


def json_text(value: Any) -> str:
    """The compact JSON text of ``value`` (what the store sends for a ``JSON`` column)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def result_refusal(result: Any) -> str | None:
    """Why Spanner cannot store ``result`` (a stored form) in the ``result`` column, or None.

    The record's other fields are small and typed (each at most a few KiB), so only the result can break a limit.
    """
    refusal = json_refusal(result)
    if refusal is not None:
        return f"Spanner cannot store the result: {refusal}"
    size = len(json_text(result).encode())
    if size > MAX_JSON_BYTES:
        return (f"the result is {size} bytes of JSON, over Spanner's {MAX_JSON_BYTES}-byte limit of a JSON value "
                "(10 MB, https://cloud.google.com/spanner/docs/working-with-json)")
    return None


#: Python types each column type takes (None, SQL NULL, is taken by every column).
_PYTHON_TYPES: dict[str, tuple[type, ...]] = {
    "STRING(MAX)": (str,), "INT64": (int,), "FLOAT64": (float, int), "BOOL": (bool,), "TIMESTAMP": (datetime,),
}


def field_problem(name: str, value: Any) -> str | None:
    """Why ``value`` cannot be written to the column of record field ``name``, or None.

    ``value`` is a plain value (the contract's server-side values are checked by the store).
    """
    column = COLUMNS_BY_NAME.get(name)
    if column is None:
        return (f"the run records' table has no column {name!r} (its columns are {', '.join(COLUMNS_BY_NAME)}); "
                "a field the protocol does not write cannot be stored in Spanner")
    if value is None:
        return None
    if column.type == "JSON":
        return json_refusal(value, name)
    types = _PYTHON_TYPES[column.type]
    if isinstance(value, bool) and bool not in types:
        return f"{name} is {value!r}, but its column is {column.type}"
    if not isinstance(value, types):
        return f"{name} is a {type(value).__name__}, but its column is {column.type}"
    if isinstance(value, datetime) and value.tzinfo is None:
        return f"{name} is a naive datetime: Spanner TIMESTAMP values must be aware (UTC)"
    if isinstance(value, str) and not is_utf8(value):
        return f"{name} holds a lone surrogate; Spanner stores UTF-8 text only"
    if isinstance(value, int) and column.type == "INT64" and not INT64_MIN <= value <= 2**63 - 1:
        return f"{name} is {value}, outside INT64"
    return None

