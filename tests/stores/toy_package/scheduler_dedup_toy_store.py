"""A toy in-memory run store (tests only): a dict and a lock behind the store contract, in a distribution of its own.

It proves that a store from outside this repository is one registration: :data:`TOY` names its factory, values, wire
classifier and local server (all here), this folder's ``pyproject.toml`` declares it in the entry point group
``scheduler_dedup.stores``, ``tests/stores/toy_store.py`` installs that package and finds it through the entry point,
and the whole contract suite runs on it, faults on its "wire" included. Its "server" lives in this process: a client reaches it by its host name in
:data:`_NETWORK`, through the in-process fault proxy :class:`ToyFaultProxy` when a test asks for one, and each call
runs on a thread of its own, so a held call still lands after its client gave up on it, as on a real wire.
"""

from __future__ import annotations

import copy
import itertools
import json
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime, timedelta, timezone
from typing import Any, ClassVar

from scheduler_dedup.handler.core.errors import InvalidWriteError, StoreRefusedError, StoreUnavailableError
from scheduler_dedup.handler.core.record import RunRecord
from scheduler_dedup.handler.stores.base import SERVER_TIME, Increment, RunStore
from scheduler_dedup.handler.stores.kind import StoreKind
from scheduler_dedup.handler.stores.wire import STATUS_STEPS, Call
from scheduler_dedup.local.faults.grpc_proxy import FaultPlan
from scheduler_dedup.local.servers.store_servers import StoreServer

_HERE = __name__
#: The variable that names the toy server a client talks to (read from the process environment, as the Firestore and
#: Spanner clients read their emulator's).
HOST_VARIABLE = "TOY_STORE_HOST"
#: The largest result the toy holds, in bytes of its JSON (its own limit).
MAX_RESULT_BYTES = 1_048_576

#: The toy store's registration: every piece a store brings to run the contract suite; no deploy pieces (pins,
#: component, pack rules), which the registry's check reports.
TOY = StoreKind(
    id="toy", display_name="Toy", factory=f"{_HERE}:from_settings", schema=_HERE, values=_HERE,
    wire=f"{_HERE}:classify", local_server=f"{_HERE}:ToyServer", emulator_variable=HOST_VARIABLE,
    requirements=(), component="", pack_rules="",
)

_NETWORK: dict[str, "_Endpoint"] = {}
_NETWORK_LOCK = threading.Lock()
_NAMES = itertools.count(1)


class _Refused(Exception):
    """The endpoint refused the call without applying it."""


class _Endpoint:
    """Something a host name reaches: the store itself, or a fault proxy in front of it."""

    def handle(self, call: Call, apply: Callable[["_State"], Any]) -> Any:
        raise NotImplementedError


class _State(_Endpoint):
    """The toy server's records, ``(collection, run id) -> (fields, create time, update time)``, under one lock."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.records: dict[tuple[str, str], tuple[dict[str, Any], datetime, datetime]] = {}
        self._last = datetime.fromtimestamp(0, timezone.utc)

    def now(self) -> datetime:
        """The store's clock: never behind a commit time it issued."""
        return max(datetime.now(timezone.utc), self._last)

    def commit_time(self) -> datetime:
        """A new commit time, later than every one before (call under :attr:`lock`)."""
        self._last = max(datetime.now(timezone.utc), self._last + timedelta(microseconds=1))
        return self._last

    def handle(self, call: Call, apply: Callable[["_State"], Any]) -> Any:
        with self.lock:
            return apply(self)


def classify(method: str, run_id: str, fields: Mapping[str, Any] | None = None) -> Call:
    """The protocol step of one toy call (the toy's wire classifier): a create is a claim, a conditional update a
    takeover, completion or failure by the status it sets (else a renewal), a conditional delete a release."""
    if method == "create":
        step = "claim"
    elif method == "update":
        step = STATUS_STEPS.get(str((fields or {}).get("status")), "renewal") if "status" in (fields or {}) else "renewal"
    else:
        step = {"delete": "release", "get": "read", "query": "query"}.get(method, "other")
    return Call(method, step, run_id)


class ToyFaultProxy(FaultPlan):
    """The toy's fault proxy: a host of its own in :data:`_NETWORK` that forwards each call to the server with the
    planned fault applied (:class:`~scheduler_dedup.local.faults.grpc_proxy.FaultPlan`)."""

    def __init__(self, upstream: _State):
        super().__init__()
        self._upstream = upstream

    def start(self) -> "ToyFaultProxy":
        self.host = _attach(_ProxyEndpoint(self))
        return self

    def stop(self) -> None:
        self._stopping.set()
        _detach(self.host)

    def forward(self, call: Call, apply: Callable[[_State], Any]) -> Any:
        started = time.monotonic()
        decision = self._decide(call)
        try:
            if decision.kind == "unavailable":
                raise ConnectionError("fault proxy: unavailable (not sent)")
            if decision.kind == "deadline":
                self._stopping.wait(decision.delay_seconds)
                raise ConnectionError("fault proxy: no answer (not sent)")
            if decision.kind == "refuse":
                raise _Refused("fault proxy: refused (not sent)")
            if decision.kind == "delay" and self._stopping.wait(decision.delay_seconds):
                raise ConnectionError("fault proxy stopped")
            answer = self._upstream.handle(call, apply)
            if decision.kind == "lose_answer":
                raise ConnectionError("fault proxy: answer lost (applied)")
            return answer
        finally:
            self._observed(call, decision, started)


class _ProxyEndpoint(_Endpoint):
    def __init__(self, proxy: ToyFaultProxy):
        self._proxy = proxy

    def handle(self, call: Call, apply: Callable[[_State], Any]) -> Any:
        return self._proxy.forward(call, apply)


def _attach(endpoint: _Endpoint) -> str:
    host = f"toy-{next(_NAMES)}"
    with _NETWORK_LOCK:
        _NETWORK[host] = endpoint
    return host


def _detach(host: str) -> None:
    with _NETWORK_LOCK:
        _NETWORK.pop(host, None)


def _checked(fields: Mapping[str, Any]) -> None:
    """Refuse values the toy does not hold (naive datetimes, objects that are no JSON value), before sending."""
    def ok(value: Any) -> bool:
        if value is None or value is SERVER_TIME or isinstance(value, (bool, int, float, str, Increment)):
            return True
        if isinstance(value, datetime):
            return value.tzinfo is not None
        if isinstance(value, list):
            return all(ok(v) for v in value)
        if isinstance(value, dict):
            return all(isinstance(k, str) and ok(v) for k, v in value.items())
        return False

    bad = sorted(name for name, value in fields.items() if not ok(value))
    if bad:
        raise InvalidWriteError(f"the toy store holds no such value in {', '.join(bad)}", store="Toy", sent=False)


def _resolved(fields: Mapping[str, Any], old: Mapping[str, Any], commit: datetime) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, value in fields.items():
        if value is SERVER_TIME:
            out[name] = commit
        elif isinstance(value, Increment):
            base = old.get(name, 0)
            if not isinstance(base, int) or isinstance(base, bool):
                raise InvalidWriteError(f"{name} is not a number to increment", store="Toy")
            out[name] = base + value.amount
        else:
            out[name] = copy.deepcopy(value)
    return out


class ToyRunStore(RunStore):
    """Run records of one collection in a toy server, reached by its host name."""

    kind: ClassVar[str] = "toy"
    display_name: ClassVar[str] = "Toy"

    def __init__(self, host: str, collection: str, timeout_seconds: float):
        self.host = host
        self.collection = collection
        self.timeout_seconds = timeout_seconds

    def _call(self, method: str, run_id: str, fields: Mapping[str, Any] | None, apply: Callable[[_State], Any],
              timeout_seconds: float | None = None) -> Any:
        """Send one call, each try on a thread of its own, retrying a try that failed on the wire (as the real
        clients retry transient errors) until the store timeout; the answer, or the contract's error."""
        timeout = self.timeout_seconds if timeout_seconds is None else timeout_seconds
        deadline = time.monotonic() + timeout
        while True:
            with _NETWORK_LOCK:
                endpoint = _NETWORK.get(self.host)
            if endpoint is None:
                raise StoreUnavailableError(f"no toy store answers at {self.host}", store="Toy")
            answer: dict[str, Any] = {}
            done = threading.Event()

            def send(endpoint: _Endpoint = endpoint, answer: dict[str, Any] = answer,
                     done: threading.Event = done) -> None:
                try:
                    answer["value"] = endpoint.handle(classify(method, run_id, fields), apply)
                except BaseException as exc:  # handed to the caller
                    answer["error"] = exc
                finally:
                    done.set()

            threading.Thread(target=send, name="toy-call", daemon=True).start()
            if not done.wait(max(0.0, deadline - time.monotonic())):
                raise StoreUnavailableError(f"the toy store did not answer within {timeout:g} s", store="Toy")
            error = answer.get("error")
            if isinstance(error, ConnectionError):
                if time.monotonic() + 0.05 < deadline:
                    time.sleep(0.05)
                    continue
                raise StoreUnavailableError(str(error), store="Toy") from error
            if isinstance(error, _Refused):
                raise StoreRefusedError(str(error), store="Toy") from error
            if error is not None:
                raise error
            return answer.get("value")

    def _record(self, run_id: str, entry: tuple[dict[str, Any], datetime, datetime], read_time: datetime) -> RunRecord:
        data, created, updated = entry
        return RunRecord(run_id=run_id, status=str(data.get("status", "")), attempt_id=str(data.get("attempt_id", "")),
                         lease_seconds=float(data.get("lease_seconds", 0) or 0), update_time=updated,
                         read_time=read_time, data=copy.deepcopy(data), create_time=created)

    def create(self, run_id: str, fields: Mapping[str, Any]) -> datetime | None:
        _checked(fields)

        def apply(state: _State) -> datetime | None:
            if (self.collection, run_id) in state.records:
                return None
            commit = state.commit_time()
            state.records[(self.collection, run_id)] = (_resolved(fields, {}, commit), commit, commit)
            return commit
        return self._call("create", run_id, fields, apply)

    def get(self, run_id: str, *, timeout_seconds: float | None = None) -> RunRecord | None:
        def apply(state: _State) -> RunRecord | None:
            entry = state.records.get((self.collection, run_id))
            return None if entry is None else self._record(run_id, entry, state.now())
        return self._call("get", run_id, None, apply, timeout_seconds)

    def update_if_unchanged(self, run_id: str, fields: Mapping[str, Any], update_time: datetime) -> datetime | None:
        _checked(fields)

        def apply(state: _State) -> datetime | None:
            entry = state.records.get((self.collection, run_id))
            if entry is None or entry[2] != update_time:
                return None
            commit = state.commit_time()
            state.records[(self.collection, run_id)] = ({**entry[0], **_resolved(fields, entry[0], commit)},
                                                        entry[1], commit)
            return commit
        return self._call("update", run_id, fields, apply)

    def delete_if_unchanged(self, run_id: str, update_time: datetime) -> bool:
        def apply(state: _State) -> bool:
            entry = state.records.get((self.collection, run_id))
            if entry is None or entry[2] != update_time:
                return False
            del state.records[(self.collection, run_id)]
            return True
        return bool(self._call("delete", run_id, None, apply))

    def server_now(self) -> datetime:
        return datetime.now(timezone.utc)  # the toy server's clock is this process's

    def result_refusal(self, result: Any, run_id: str, record_fields: Mapping[str, Any]) -> str | None:
        size = len(json.dumps(result, ensure_ascii=False).encode())
        if size > MAX_RESULT_BYTES:
            return (f"the result is {size} bytes of JSON, over the toy store's limit of {MAX_RESULT_BYTES} bytes "
                    "(its own, tests/stores/toy_store.py)")
        return None

    def job_run_pages(self, job_name: str, *, since: datetime | None, until: datetime | None, page_size: int,
                      timeout_seconds: float | None = None) -> Iterator[list[RunRecord]]:
        after: tuple[datetime, str] | None = None
        while True:
            def apply(state: _State, after: tuple[datetime, str] | None = after) -> list[RunRecord]:
                now = state.now()
                found = sorted(((entry[0]["schedule_time"], rid), entry) for (collection, rid), entry in
                               state.records.items() if collection == self.collection
                               and entry[0].get("job_name") == job_name
                               and isinstance(entry[0].get("schedule_time"), datetime)
                               and (since is None or entry[0]["schedule_time"] >= since)
                               and (until is None or entry[0]["schedule_time"] < until)
                               and (after is None or (entry[0]["schedule_time"], rid) < after))
                return [self._record(key[1], entry, now) for key, entry in reversed(found[-page_size:])]
            page: list[RunRecord] = self._call("query", "", None, apply, timeout_seconds)
            yield page
            if len(page) < page_size:
                return
            after = (page[-1].data["schedule_time"], page[-1].run_id)

    def runs_with_id_prefix(self, prefix: str, limit: int, *, timeout_seconds: float | None = None) -> list[RunRecord]:
        def apply(state: _State) -> list[RunRecord]:
            now = state.now()
            ids = sorted(rid for collection, rid in state.records if collection == self.collection
                         and rid.startswith(prefix))[:limit]
            return [self._record(rid, state.records[(self.collection, rid)], now) for rid in ids]
        return self._call("query", "", None, apply, timeout_seconds)


def from_settings(settings: Any, collection: str) -> ToyRunStore:
    """The toy store the process environment's :data:`HOST_VARIABLE` names, on ``collection``."""
    return ToyRunStore(os.environ.get(HOST_VARIABLE, ""), collection, settings.store_timeout_seconds)


class ToyServer(StoreServer):
    """The toy's "server": its records in this process, reachable by host name while started."""

    kind: ClassVar[str] = "toy"
    display_name: ClassVar[str] = "Toy store"

    def __init__(self, project: str = "demo-scheduler-dedup"):
        self.project = project
        self.host = ""
        self._state = _State()

    def start(self) -> "ToyServer":
        self.host = _attach(self._state)
        return self

    def stop(self) -> None:
        _detach(self.host)

    @property
    def pid(self) -> int | None:
        return None  # no process of its own

    def endpoint_env(self, host: str | None = None) -> dict[str, str]:
        return {"DEDUP_STORE": self.kind, HOST_VARIABLE: host or self.host, "GOOGLE_CLOUD_PROJECT": self.project}

    def prepare(self, collection: str) -> None:
        """Nothing to create: a collection is a part of the record keys."""

    def wipe(self) -> None:
        with self._state.lock:
            self._state.records.clear()

    def fault_proxy(self, max_workers: int = 64) -> FaultPlan:
        return ToyFaultProxy(self._state).start()
