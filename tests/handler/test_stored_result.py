"""The value-model check agrees with the real emulator: what it accepts Firestore stores, what it drops Firestore refuses."""

from __future__ import annotations

from typing import Any

import pytest
from google.api_core import exceptions as gexc
from google.cloud import firestore

from scheduler_dedup.handler.core.stored_result import json_form, prepare_result
from scheduler_dedup.handler.stores.firestore.values import MAX_DOCUMENT_BYTES, document_size, result_refusal
from scheduler_dedup.local.servers.firestore_emulator import FirestoreEmulator

COLLECTION = "probe"


def nest(levels: int, leaf: Any = 1, array_every: int = 0) -> Any:
    """``levels`` levels of maps, every ``array_every``-th wrapped as a one-element array (when > 0)."""
    value = leaf
    for level in range(levels):
        value = [value] if array_every and level % array_every == array_every - 1 else {"a": value}
    return value


CASES: dict[str, Any] = {
    "int64-max": 2**63 - 1,
    "int64-min": -(2**63),
    "int64-max+1": 2**63,
    "uint64-max": {"object_id": 18446744073709551615},
    "20-maps": nest(20),
    "21-maps": nest(21),
    "30-maps": nest(30),
    "20-levels-with-arrays": nest(20, array_every=3),
    "21-levels-with-arrays": nest(21, array_every=3),
    "array-in-array": [[1, 2], [3]],
    "array-in-map-in-array": [{"x": [1, 2]}],
    "reserved-key": {"__meta__": 1},
    "reserved-nested-key": {"a": {"__x__": 1}},
    "dunder-prefix-only": {"__meta": 1},
    "empty-key": {"": 1},
    "dotted-and-backtick-keys": {"a.b": 1, "c": {"d.e": 2}},
    "field-path-1500-bytes": {"k" * 1493: 1},
    "field-path-1501-bytes": {"k" * 1494: 1},
    "nested-path-over-1500": {"a" * 750: {"b" * 750: 1}},
    "960kb-of-integers": {"ids": [0] * 120000},
    "1.36mb-of-integers": {"ids": [0] * 170000},
    "string-over-1mib": "x" * MAX_DOCUMENT_BYTES,
    "unicode": {"ключ": "значение"},
}


@pytest.fixture(scope="module")
def client(firestore_emulator: FirestoreEmulator) -> firestore.Client:
    return firestore.Client(project=firestore_emulator.project)


def firestore_accepts(client: firestore.Client, doc_id: str, fields: dict[str, Any], value: Any) -> bool:
    doc = client.collection(COLLECTION).document(doc_id)
    doc.set(fields)
    try:
        doc.update({"result": value})
    except (gexc.InvalidArgument, ValueError):
        return False
    return True


@pytest.mark.parametrize("name", list(CASES))
def test_the_check_and_the_emulator_agree(client: firestore.Client, name: str) -> None:
    value = CASES[name]
    fields = {"status": "in_progress", "attempt_id": "a" * 32, "job_name": "j"}
    doc_id = f"case-{name}"
    stored = prepare_result(value, lambda form: result_refusal(form, collection=COLLECTION, document_id=doc_id,
                                                                  record_fields=fields))
    accepted = firestore_accepts(client, doc_id, fields, value)
    assert (stored.dropped is None) == accepted, (name, stored.dropped, accepted)
    if stored.dropped is None:
        assert stored.value == value


def test_document_size_counts_as_the_storage_size_page_does() -> None:
    # The example of https://firebase.google.com/docs/firestore/storage-size ("tasks" in "users/jeff"
    # aside, a top-level document): strings are UTF-8 bytes + 1, integers and timestamps 8, booleans 1.
    assert document_size("tasks", "my_task_id", {"type": "Personal", "done": False, "priority": 1}) == (
        6 + 11 + 16) + (5 + 9) + (5 + 1) + (9 + 8) + 32


@pytest.mark.parametrize(("value", "stored"), [
    ((1, 2), [1, 2]),
    ({1: "a", None: "b"}, {"1": "a", "null": "b"}),
    ({"x": float("inf")}, None),
    ({"s": {1, 2}}, None),
    (b"raw", None),
])
def test_the_stored_form_is_json(value: Any, stored: Any) -> None:
    form = json_form(value)
    assert form.value == stored
    assert (form.dropped is None) == (stored is not None)
