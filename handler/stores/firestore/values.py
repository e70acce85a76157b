"""Firestore's value model and document size: what a run record may hold, checked before it is written.

**Firestore's value model.** The stored form is then checked against what Firestore accepts, because a
refused completion write would leave the run ``in_progress`` and let the next delivery run the job again
(limits: https://firebase.google.com/docs/firestore/quotas#collections_documents_and_fields; array rules:
https://firebase.google.com/docs/firestore/manage-data/data-types):

- integers are 64-bit signed (the client refuses others before sending);
- maps and arrays nest at most 20 levels (:data:`MAX_DEPTH`; each map or array is one level);
- an array cannot hold an array directly;
- map keys are non-empty and do not match ``__.*__`` (reserved names);
- strings and map keys are UTF-8: a ``str`` holding a lone surrogate (``os.listdir``'s ``surrogateescape``
  output for undecodable bytes) cannot be stored;
- a field path (``result.key.key...``) is at most 1,500 bytes (:data:`MAX_FIELD_PATH_BYTES`);
- the whole record is at most 1 MiB (1,048,576 bytes) as Firestore counts it: the document name, each field
  name and each value, sized as https://firebase.google.com/docs/firestore/storage-size describes
  (:func:`document_size`; an integer is 8 bytes, a string its UTF-8 bytes + 1).

Each rule was checked against the Firestore emulator (``tests/handler/test_stored_result.py``). Where the
exact count is unclear (quoted field names, the overhead of a nested map) the check counts the larger size,
so what it accepts Firestore accepts; a refusal it misses is still caught, as the completion write is then
retried without the result.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from scheduler_dedup.handler.core.safe_text import is_utf8, utf8_safe
from scheduler_dedup.handler.core.stored_result import RESULT_FIELD

#: Largest document, bytes (https://firebase.google.com/docs/firestore/quotas).
MAX_DOCUMENT_BYTES = 1_048_576
#: Deepest nesting of maps and arrays in a field value (https://firebase.google.com/docs/firestore/quotas).
MAX_DEPTH = 20
#: Longest field path, bytes (https://firebase.google.com/docs/firestore/quotas).
MAX_FIELD_PATH_BYTES = 1500
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

_RESERVED_NAME = re.compile(r"^__.*__$", re.DOTALL)
_SIMPLE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Sizes of values that are not JSON but appear in run records (timestamps, server-side transforms).
_FIXED_SIZE = 8


def _segment_bytes(name: str) -> int:
    raw = len(name.encode())
    if _SIMPLE_NAME.match(name):
        return raw
    return raw + 2 + name.count("`") + name.count("\\")  # quoted: `name`, with ` and \ escaped


def _shown(path: str) -> str:
    path = utf8_safe(path)
    return path if len(path) <= 80 else path[:77] + "..."


def value_model_refusal(value: Any, field: str = RESULT_FIELD) -> str | None:
    """Why Firestore would refuse ``value`` (a stored form) as the value of ``field``, or None if it fits.

    Checks UTF-8 strings and keys, integer range, nesting depth, arrays in arrays, reserved and empty map
    keys and field path length; the document size is :func:`document_size`'s concern.
    """
    # (value, path for messages, nesting levels above, field path bytes so far, parent is an array)
    stack: list[tuple[Any, str, int, int, bool]] = [(value, field, 0, _segment_bytes(field), False)]
    while stack:
        item, path, depth, path_bytes, in_array = stack.pop()
        if isinstance(item, str):
            if not is_utf8(item):
                return f"{_shown(path)} is a string that is not valid UTF-8 (it holds a lone surrogate, " \
                       "e.g. from os.listdir's surrogateescape); Firestore stores UTF-8 strings only"
            continue
        if isinstance(item, bool) or item is None or isinstance(item, float):
            continue
        if isinstance(item, int):
            if not INT64_MIN <= item <= INT64_MAX:
                return f"{_shown(path)} is {item}, outside Firestore's 64-bit integer range"
            continue
        if isinstance(item, dict):
            if depth + 1 > MAX_DEPTH:
                return f"{_shown(path)} nests maps and arrays deeper than Firestore's {MAX_DEPTH} levels"
            for key, child in item.items():
                if not is_utf8(key):
                    return f"{_shown(path)} has a key that is not valid UTF-8 ({utf8_safe(key)[:40]!r}: a lone " \
                           "surrogate, e.g. from os.listdir's surrogateescape); Firestore stores UTF-8 names only"
                if key == "":
                    return f"{_shown(path)} has an empty key, which Firestore refuses as a field name"
                if _RESERVED_NAME.match(key):
                    return f"{_shown(path)} has the key {key[:40]!r}: Firestore reserves field names matching __.*__"
                child_bytes = path_bytes + 1 + _segment_bytes(key)
                if child_bytes > MAX_FIELD_PATH_BYTES:
                    return (f"the field path {_shown(path + '.' + key)} is over Firestore's {MAX_FIELD_PATH_BYTES}-byte "
                            "limit")
                stack.append((child, f"{path}.{key}", depth + 1, child_bytes, False))
            continue
        if isinstance(item, list):
            if in_array:
                return f"{_shown(path)} is an array directly inside an array, which Firestore cannot store"
            if depth + 1 > MAX_DEPTH:
                return f"{_shown(path)} nests maps and arrays deeper than Firestore's {MAX_DEPTH} levels"
            stack.extend((child, f"{path}[{i}]", depth + 1, path_bytes, True) for i, child in enumerate(item))
            continue
        return f"{_shown(path)} is a {type(item).__name__}, not a JSON value"
    return None


def _string_size(text: str) -> int:
    return len(text.encode()) + 1


def value_size(value: Any) -> int:
    """Bytes Firestore counts for one field value (https://firebase.google.com/docs/firestore/storage-size).

    Strings: UTF-8 bytes + 1; integers, floats, timestamps and server-side transforms: 8; booleans and null:
    1; arrays: the sum of their values; maps: their keys' string sizes and values, plus 32 (a map is sized
    "the same way as a document"; the 32 bytes of a document's overhead are counted to be safe).
    """
    size = 0
    stack = [value]
    while stack:
        item = stack.pop()
        if item is None or isinstance(item, bool):
            size += 1
        elif isinstance(item, str):
            size += _string_size(item)
        elif isinstance(item, (bytes, bytearray)):
            size += len(item)
        elif isinstance(item, Mapping):
            size += 32 + sum(_string_size(str(k)) for k in item)
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
        else:  # int, float, datetime, SERVER_TIMESTAMP, Increment...
            size += _FIXED_SIZE
    return size


def document_size(collection: str, document_id: str, fields: Mapping[str, Any]) -> int:
    """Bytes Firestore counts for a top-level document (https://firebase.google.com/docs/firestore/storage-size).

    The document name (collection id and document id as strings, plus 16), each field name as a string,
    each value (:func:`value_size`), plus 32.
    """
    name = _string_size(collection) + _string_size(document_id) + 16
    return name + sum(_string_size(k) + value_size(v) for k, v in fields.items()) + 32


def result_refusal(result: Any, *, collection: str, document_id: str, record_fields: Mapping[str, Any]) -> str | None:
    """Why Firestore would refuse the record of a completed run holding ``result`` (a stored form), or None.

    Args:
        result: the result's stored form.
        collection: the run records' collection id.
        document_id: the run's record id.
        record_fields: every other field the completed record will hold (without ``result``).
    """
    refusal = value_model_refusal(result)
    if refusal is not None:
        return f"Firestore cannot store the result: {refusal}"
    size = document_size(collection, document_id, {**record_fields, RESULT_FIELD: result})
    if size > MAX_DOCUMENT_BYTES:
        return (f"the record with this result would be {size} bytes as Firestore counts them, "
                f"over its {MAX_DOCUMENT_BYTES}-byte document limit")
    return None
