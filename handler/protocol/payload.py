"""The payload fingerprint: what a call under an idempotency key must match to be replayed.

The fingerprint is the SHA-256 (64 hex characters) of the payload's **canonical JSON**: object keys sorted, no
whitespace (separators ``,`` and ``:``), UTF-8 text with non-ASCII characters kept as they are (not ``\\u``
escaped), ``NaN`` and ``Infinity`` refused. Values that are not JSON are first turned into JSON values: a
dataclass instance by :func:`dataclasses.asdict`, a Pydantic model by ``model_dump(mode="json")``, a ``tuple`` into
a list and a ``datetime``/``date`` into its ISO 8601 string, and an integral float into its integer
(``1.0`` is ``1``, as JSON has one number type); anything else (a ``set``, ``bytes``, ``Decimal``, an
object) is refused with a ``TypeError``, since its ``repr`` is no stable fingerprint. Two payloads that are equal as
JSON values have one fingerprint, whatever the order of their keys.

The record keeps the fingerprint in :data:`FINGERPRINT_FIELD` (every store keeps it through the store contract). A
record without one (written before payloads were checked, or by a call given no ``payload``) matches any payload.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
from typing import Any

from scheduler_dedup.handler.core.errors import PayloadMismatchError

#: The record field holding the fingerprint of the payload of the call that claimed the key.
FINGERPRINT_FIELD = "payload_fingerprint"


def _json_default(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    dump = getattr(value, "model_dump", None)  # a Pydantic model, without importing Pydantic
    if callable(dump) and hasattr(type(value), "model_fields"):
        return dump(mode="json")
    if isinstance(value, (dt.datetime, dt.date)):
        return value.isoformat()
    raise TypeError(f"the payload holds a {type(value).__name__}, which has no JSON form: make payload= return "
                    "JSON values (dict, list, str, int, float, bool, None), dataclasses or Pydantic models")


def canonical_json(payload: Any) -> bytes:
    """The canonical JSON of ``payload`` (see the module docstring), UTF-8.

    Raises:
        TypeError: a value has no JSON form.
        ValueError: it holds ``NaN`` or ``Infinity``.
    """
    text = json.dumps(payload, ensure_ascii=False, allow_nan=False, default=_json_default)
    value = json.loads(text, parse_float=_json_number)  # JSON has one number type: 1.0 is the number 1
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "surrogatepass")


def _json_number(text: str) -> int | float:
    """A JSON number with a fraction or exponent as its canonical value: an integral one (``1.0``, ``-0.0``,
    ``1e3``) as the integer, as RFC 8785 (JSON Canonicalization Scheme) writes it; any other as a float."""
    number = float(text)
    return int(number) if number.is_integer() else number


def fingerprint(payload: Any) -> str:
    """SHA-256 (64 hex characters) of :func:`canonical_json` of ``payload``.

    Raises:
        TypeError, ValueError: as :func:`canonical_json`.
    """
    return hashlib.sha256(canonical_json(payload)).hexdigest()


def bytes_fingerprint(body: bytes) -> str:
    """The fingerprint of a request body: that of its JSON value when it is JSON (so key order and whitespace do
    not count), else the SHA-256 of the bytes themselves."""
    try:
        return fingerprint(json.loads(body))
    except ValueError:
        return hashlib.sha256(body).hexdigest()


def check_payload(run_id: str, stored: Any, given: str | None) -> None:
    """Refuse a call whose payload fingerprint ``given`` differs from the one a record holds (``stored``).

    A record without a fingerprint, or a call without one, is no mismatch (see the module docstring).

    Raises:
        PayloadMismatchError: both are fingerprints, and they differ.
    """
    if given is not None and isinstance(stored, str) and stored and stored != given:
        raise PayloadMismatchError(run_id, stored, given)
