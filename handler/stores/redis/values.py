"""How a run record's fields are stored in Redis, and how large a record may be.

A record is one Redis hash (key ``{collection}:run:<run id>``). Each field of the record is a hash field
``f:<name>`` whose value is one tag byte and a payload, so that the Lua scripts (:mod:`.lua`) never parse
JSON and never round numbers:

==========  ======================================================================================
tag         payload
==========  ======================================================================================
``j``       the value as JSON text, UTF-8 (strings, numbers of any size, booleans, None, lists, maps)
``t``       an aware datetime as whole microseconds since 1970-01-01T00:00:00Z (a decimal integer)
==========  ======================================================================================

The scripts keep four fields of their own beside them: ``_v`` (the version: the commit time of the last write,
in microseconds, by the store's clock), ``_c`` (the commit time of the creation), ``_job`` and ``_st`` (the job
name and schedule time the history index holds the record under). Imports nothing from redis-py, so the fault
proxy's wire description (:mod:`.wire`) can decode what a script is asked to write.

**Size.** Redis takes strings of up to 512 MB (``proto-max-bulk-len``, https://redis.io/docs/latest/develop/data-types/strings/),
far more than a run record should hold: every duplicate delivery reads the whole record, the replica must
receive it before ``WAIT`` returns, and a Memorystore instance's memory is its whole capacity (with
``noeviction`` a full instance refuses every claim). So a record is kept to :data:`MAX_RECORD_BYTES`, the
same 1 MiB Firestore allows a document (https://firebase.google.com/docs/firestore/quotas), so a result that
fits one store fits the other; counted as field names plus stored values, in bytes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime, timedelta, timezone
from typing import Any

from scheduler_dedup.handler.core.stored_result import RESULT_FIELD

#: Largest run record, bytes: field names and stored values (see the module docstring for why 1 MiB).
MAX_RECORD_BYTES = 1_048_576
#: Prefix of a record's own fields in its hash (the scripts' fields start with ``_``).
FIELD_PREFIX = "f:"
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_ONE_US = timedelta(microseconds=1)


def micros(when: datetime) -> int:
    """Whole microseconds since the epoch of an aware datetime (a naive one is read as UTC)."""
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return (when - EPOCH) // _ONE_US


def from_micros(value: int | bytes | str) -> datetime:
    """The aware UTC datetime of whole microseconds since the epoch."""
    return EPOCH + timedelta(microseconds=int(value))


def encode(value: Any) -> bytes:
    """The stored form of one field value (see the module docstring).

    Raises:
        TypeError, ValueError: the value is not a JSON value or a datetime (nothing is sent).
    """
    if isinstance(value, datetime):
        return b"t%d" % micros(value)
    text = json.dumps(value, ensure_ascii=False, allow_nan=True, separators=(",", ":"))
    # surrogatepass: a str holding a lone surrogate (os.listdir's surrogateescape) is stored and read back as is.
    return b"j" + text.encode("utf-8", "surrogatepass")


def decode(raw: bytes) -> Any:
    """The value of one stored field.

    Raises:
        ValueError: not a stored form of :func:`encode`.
    """
    tag, payload = raw[:1], raw[1:]
    if tag == b"t":
        return from_micros(payload)
    if tag == b"j":
        return json.loads(payload.decode("utf-8", "surrogatepass"))
    raise ValueError(f"not a stored run record value: {raw[:40]!r}")


def record_size(fields: Mapping[str, Any]) -> int:
    """Bytes a record with ``fields`` takes as stored: each field name with its prefix and each stored value.
    Server-side values (the store's time, an increment) count as a 24-byte number.

    Raises:
        TypeError, ValueError: a value has no stored form.
    """
    size = 0
    for name, value in fields.items():
        size += len(FIELD_PREFIX) + len(name.encode("utf-8", "surrogatepass"))
        size += len(encode(value)) if isinstance(value, (datetime, str, int, float, bool, list, dict, type(None))) \
            else 24
    return size


def result_refusal(result: Any, record_fields: Mapping[str, Any]) -> str | None:
    """Why the record of a completed run holding ``result`` (its stored form) is too large, or None.

    Any JSON value is stored exactly (integers of any size, any nesting, any key), so size is the only limit.
    """
    try:
        size = record_size({**record_fields, RESULT_FIELD: result})
    except (TypeError, ValueError) as exc:
        return f"the result has no JSON form: {exc}"
    if size > MAX_RECORD_BYTES:
        return (f"the record with this result would be {size} bytes, over the {MAX_RECORD_BYTES}-byte bound "
                "scheduler-dedup keeps Redis run records to (Redis itself takes strings up to 512 MB, but every "
                "duplicate delivery reads the whole record and the replica must receive it)")
    return None
