"""A gRPC proxy between a store's client and its emulator that injects faults at the store boundary.

Clients are pointed at it with the emulator variable (``FIRESTORE_EMULATOR_HOST=<proxy.host>``, or the
Spanner emulator's), so it serves an in-process store and handler subprocesses alike. Requests and
responses are forwarded as raw bytes through grpcio's generic handlers, with the caller's invocation
metadata and deadline; each call is named by the store's wire description (:class:`GrpcWire`, e.g.
:data:`~scheduler_dedup.handler.stores.firestore.wire.FIRESTORE_WIRE`) with the step of the dedup protocol
it belongs to (:mod:`scheduler_dedup.handler.stores.wire`: claim, takeover, renewal, completion, failure,
release, read, query, other).

Fault kinds (what a store sees on a bad network, after the Jepsen/FoundationDB practice of
failing a call before it is sent, applying it and losing the answer, or delaying it):

- ``unavailable``: answer UNAVAILABLE without forwarding; nothing reaches the emulator.
- ``deadline``: answer DEADLINE_EXCEEDED without forwarding.
- ``lose_answer``: forward, let the emulator apply the call, then answer UNAVAILABLE.
- ``delay``: wait ``delay_seconds`` then forward (without the caller's deadline, so a write can
  land after its caller gave up, as a late packet would).
- ``refuse``: answer ``code`` (default FAILED_PRECONDITION) and ``message`` without forwarding.

Example::

    with FaultProxy(upstream=emulator.host, wire=FIRESTORE_WIRE) as proxy:
        os.environ["FIRESTORE_EMULATOR_HOST"] = proxy.host
        proxy.add(Fault(step="renewal", kind="lose_answer"))
"""

from __future__ import annotations

import hashlib
import random
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent import futures
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import grpc

from scheduler_dedup.handler.stores.wire import PROTOCOL_STEPS, STEPS, Call, GrpcWire

__all__ = ["KINDS", "PROTOCOL_STEPS", "STEPS", "Call", "Fault", "FaultPlan", "FaultProxy", "GrpcWire"]

KINDS = ("unavailable", "deadline", "lose_answer", "delay", "refuse")
# Metadata gRPC sets itself and refuses from the application.
_RESERVED_METADATA = ("user-agent", "te", "content-type", "grpc-")
#: Messages of any size both ways (gRPC's default receive limit is 4 MiB; a Spanner result may be 10 MB).
_UNLIMITED = [("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)]
#: How long a forwarded call may take when the caller sent no deadline, seconds.
_DEFAULT_UPSTREAM_TIMEOUT = 60.0


@dataclass(frozen=True)
class Fault:
    """One planned fault.

    Attributes:
        kind: one of :data:`KINDS`.
        step: the protocol step to hit (one of :data:`STEPS`), or None for any.
        method: the RPC method name (``"Commit"``, ``"BatchGetDocuments"``...), or None for any.
        document: a document id (the run id) to hit, or None for any.
        nth: hit from the ``nth`` matching call (1-based) counted since the fault was added.
        count: how many consecutive matching calls are hit from there.
        delay_seconds: for ``delay``, how long to hold the call before forwarding it, seconds.
        code: for ``refuse``, the status answered.
        message: for ``refuse``, the status message answered (e.g. the store's own text for a configuration
            error), or ``""`` for the proxy's own.
    """

    kind: str
    step: str | None = None
    method: str | None = None
    document: str | None = None
    nth: int = 1
    count: int = 1
    delay_seconds: float = 30.0
    code: grpc.StatusCode = grpc.StatusCode.FAILED_PRECONDITION
    message: str = ""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"Fault kind {self.kind!r} is unknown: use one of {', '.join(KINDS)}")
        if self.step is not None and self.step not in STEPS:
            raise ValueError(f"Fault step {self.step!r} is unknown: use one of {', '.join(STEPS)} or None")
        if self.nth < 1 or self.count < 1:
            raise ValueError(f"Fault nth={self.nth} count={self.count}: both must be at least 1")

    def matches(self, call: "Call") -> bool:
        """True if ``call`` is one this fault counts (step, method and document agree)."""
        return ((self.step is None or self.step == call.step)
                and (self.method is None or self.method == call.method)
                and (self.document is None or self.document == call.document))


@dataclass
class _Armed:
    fault: Fault
    seen: int = 0


@dataclass(frozen=True)
class _RandomPlan:
    rate: float
    seed: int
    kinds: tuple[str, ...]
    steps: tuple[str, ...]
    delay_seconds: tuple[float, float]
    documents: Callable[[str], bool] | None


@dataclass
class _Decision:
    kind: str | None
    delay_seconds: float = 0.0
    code: grpc.StatusCode = grpc.StatusCode.FAILED_PRECONDITION
    message: str = ""


class FaultPlan:
    """The faults planned for a proxy's calls and the record of what it met: what every fault proxy shares (this
    gRPC one, and the RESP one of :mod:`scheduler_dedup.local.faults.resp_proxy`).

    Attributes:
        host: ``"127.0.0.1:PORT"`` the proxy serves on (set by ``start``).
        calls: every call seen, in order, as ``(step, method)``.
        injected: every fault injected, in order, as dicts with ``step``, ``kind``, ``method``,
            ``call_index`` (index into ``calls``), ``document`` and ``time`` (``time.monotonic()`` when
            the call arrived, before the fault took effect).

    Thread-safe.
    """

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []
        self.injected: list[dict[str, Any]] = []
        self._injected_by_document: dict[str, list[dict[str, Any]]] = {}
        self._lock = threading.Lock()
        self._faults: list[_Armed] = []
        self._random: _RandomPlan | None = None
        self._random_counts: dict[tuple[str, str], int] = {}
        self._observers: list[Callable[[Call, str | None, float], None]] = []
        self._stopping = threading.Event()
        self.port = 0
        self.host = ""

    def start(self) -> "FaultPlan":
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Any:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    # -- planning faults ------------------------------------------------------------------------

    def add(self, fault: Fault) -> Fault:
        """Arm ``fault``; its ``nth`` counts matching calls from now on. Returns it."""
        with self._lock:
            self._faults.append(_Armed(fault))
        return fault

    def clear(self) -> None:
        """Disarm every fault (planned and random) and forget ``calls`` and ``injected``."""
        with self._lock:
            self._faults.clear()
            self._random = None
            self._random_counts.clear()
            self.calls.clear()
            self.injected.clear()
            self._injected_by_document.clear()

    def set_random(self, rate: float, seed: int, kinds: Sequence[str] = KINDS, steps: Sequence[str] = PROTOCOL_STEPS,
                   delay_seconds: float | tuple[float, float] = 30.0,
                   documents: Callable[[str], bool] | None = None) -> None:
        """Hit each call of ``steps`` with probability ``rate`` with a kind drawn from ``kinds``.

        The draw for a call depends only on ``seed``, the call's document id, its step and how
        many calls of that step on that document came before it, so the faults one run meets do
        not depend on other runs played at the same time: replaying one seed replays its faults.

        Args:
            rate: probability per call, 0 to 1.
            seed: the seed.
            kinds: fault kinds drawn from (``refuse`` answers FAILED_PRECONDITION).
            steps: the steps that may be hit.
            delay_seconds: hold time of a ``delay`` fault, seconds; or ``(least, most)`` to draw it
                uniformly (with the same seeded draw).
            documents: a predicate on the document id; only calls it accepts are hit (None: all).

        Raises:
            ValueError: ``rate`` outside 0..1 or an unknown kind or step.
        """
        if not 0 <= rate <= 1:
            raise ValueError(f"rate={rate} is not a probability: use 0 to 1")
        unknown = [k for k in kinds if k not in KINDS] + [s for s in steps if s not in STEPS]
        if unknown:
            raise ValueError(f"unknown kinds or steps {unknown}: kinds are {KINDS}, steps {STEPS}")
        with self._lock:
            delays = delay_seconds if isinstance(delay_seconds, tuple) else (delay_seconds, delay_seconds)
            self._random = _RandomPlan(rate, seed, tuple(kinds), tuple(steps), delays, documents)
            self._random_counts.clear()

    def observe(self, callback: Callable[[Call, str | None, float], None]) -> None:
        """Call ``callback(call, fault_kind_or_None, seconds)`` when each call ends, from its serving thread.

        ``seconds`` is how long the proxy held the call (a ``delay`` included, the emulator's time
        included): a call held longer than the client's timeout is a store the client could not reach.
        """
        with self._lock:
            self._observers.append(callback)

    def _decide(self, call: Call) -> _Decision:
        with self._lock:
            index = len(self.calls)
            self.calls.append((call.step, call.method))
            decision = _Decision(None)
            for armed in self._faults:
                if not armed.fault.matches(call):
                    continue
                armed.seen += 1
                f = armed.fault
                if decision.kind is None and f.nth <= armed.seen < f.nth + f.count:
                    decision = _Decision(f.kind, f.delay_seconds, f.code, f.message)
            plan = self._random
            if decision.kind is None and plan is not None and call.step in plan.steps and call.document \
                    and (plan.documents is None or plan.documents(call.document)):
                key = (call.document, call.step)
                n = self._random_counts.get(key, 0)
                self._random_counts[key] = n + 1
                digest = hashlib.sha256(f"{plan.seed}:{call.document}:{call.step}:{n}".encode()).digest()
                draw = random.Random(digest)
                if draw.random() < plan.rate:
                    decision = _Decision(draw.choice(plan.kinds), draw.uniform(*plan.delay_seconds),
                                         grpc.StatusCode.FAILED_PRECONDITION)
            if decision.kind is not None:
                entry = {"step": call.step, "kind": decision.kind, "method": call.method, "call_index": index,
                         "document": call.document, "time": time.monotonic()}
                self.injected.append(entry)
                self._injected_by_document.setdefault(call.document, []).append(entry)
        return decision

    def injected_on(self, document: str) -> list[dict[str, Any]]:
        """The faults injected so far into calls on one document (run id), in order, as in ``injected``."""
        with self._lock:
            return list(self._injected_by_document.get(document, ()))

    def _observed(self, call: Call, decision: _Decision, started: float) -> None:
        with self._lock:
            observers = list(self._observers)
        seconds = time.monotonic() - started
        for callback in observers:
            callback(call, decision.kind, seconds)


class FaultProxy(FaultPlan):
    """A gRPC proxy on ``127.0.0.1:<free port>`` in front of a store's emulator, injecting faults.

    Args:
        upstream: the emulator's ``host:port`` (``FirestoreEmulator.host``).
        wire: the store's gRPC service and how its calls map to protocol steps (``FIRESTORE_WIRE``...).
        max_workers: server threads; each call in flight (a delayed one included) holds one.

    Attributes:
        host: ``"127.0.0.1:PORT"``, the value for the emulator variable (``FIRESTORE_EMULATOR_HOST``...).
        calls, injected: see :class:`FaultPlan`.

    Use as a context manager, or call :meth:`start` and :meth:`stop`. Thread-safe.
    """

    def __init__(self, upstream: str, wire: GrpcWire, max_workers: int = 64):
        super().__init__()
        self.upstream = upstream
        self.wire = wire
        self._max_workers = max_workers
        self._server: grpc.Server | None = None
        self._channel: grpc.Channel | None = None

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> "FaultProxy":
        """Bind a free port and start serving.

        Raises:
            RuntimeError: no port could be bound.
        """
        self._channel = grpc.insecure_channel(self.upstream, options=_UNLIMITED)
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=self._max_workers,
                                                              thread_name_prefix="fault-proxy"),
                                   handlers=[_Forwarder(self)], options=_UNLIMITED)
        self.port = self._server.add_insecure_port("127.0.0.1:0")
        if not self.port:
            raise RuntimeError("fault proxy could not bind a port on 127.0.0.1")
        self.host = f"127.0.0.1:{self.port}"
        self._server.start()
        return self

    def stop(self) -> None:
        """Stop serving: calls held by a ``delay`` are released and answered UNAVAILABLE."""
        self._stopping.set()
        server, self._server = self._server, None
        if server is not None:
            server.stop(grace=None).wait(10)
        channel, self._channel = self._channel, None
        if channel is not None:
            channel.close()

    def __enter__(self) -> "FaultProxy":
        return self.start()

    # -- serving --------------------------------------------------------------------------------

    def _before(self, decision: _Decision, context: grpc.ServicerContext) -> None:
        """Apply the part of a fault that happens before forwarding (may abort the call)."""
        if decision.kind == "unavailable":
            context.abort(grpc.StatusCode.UNAVAILABLE, "fault proxy: unavailable (not sent)")
        if decision.kind == "deadline":
            context.abort(grpc.StatusCode.DEADLINE_EXCEEDED, "fault proxy: deadline exceeded (not sent)")
        if decision.kind == "refuse":
            context.abort(decision.code, decision.message or "fault proxy: refused (not sent)")
        if decision.kind == "delay" and self._stopping.wait(decision.delay_seconds):
            context.abort(grpc.StatusCode.UNAVAILABLE, "fault proxy: stopped while delaying")

    def _upstream_args(self, decision: _Decision, context: grpc.ServicerContext) -> dict[str, Any]:
        remaining = context.time_remaining()
        if decision.kind == "delay" or remaining is None or remaining > _DEFAULT_UPSTREAM_TIMEOUT:
            timeout = _DEFAULT_UPSTREAM_TIMEOUT
        else:
            timeout = max(remaining, 0.001)
        metadata = [(k, v) for k, v in context.invocation_metadata()
                    if not k.startswith(":") and not k.startswith(_RESERVED_METADATA)]
        return {"timeout": timeout, "metadata": metadata}

    def _forward(self, method: str, request: bytes, context: grpc.ServicerContext, streamed: bool) -> Any:
        """Apply the call's fault decision and forward it upstream: the response bytes, or the list of a
        server-streaming call's responses (read whole, so a lost answer loses all of them)."""
        started = time.monotonic()
        call = self.wire.classify(method, request)
        decision = self._decide(call)
        try:
            self._before(decision, context)
            assert self._channel is not None
            args = self._upstream_args(decision, context)
            try:
                if streamed:
                    response: Any = list(self._channel.unary_stream(self.wire.service + method)(request, **args))
                else:
                    response = self._channel.unary_unary(self.wire.service + method)(request, **args)
            except grpc.RpcError as exc:
                context.abort(exc.code(), exc.details() or "")
            if decision.kind == "lose_answer":
                context.abort(grpc.StatusCode.UNAVAILABLE, "fault proxy: applied, answer lost")
            return response
        finally:
            self._observed(call, decision, started)

    def unary_unary(self, method: str, request: bytes, context: grpc.ServicerContext) -> bytes:
        response: bytes = self._forward(method, request, context, streamed=False)
        return response

    def unary_stream(self, method: str, request: bytes, context: grpc.ServicerContext) -> Iterator[bytes]:
        yield from self._forward(method, request, context, streamed=True)

    def stream_stream(self, method: str, requests: Iterable[bytes], context: grpc.ServicerContext) -> Iterator[bytes]:
        self._decide(Call(method, "other", ""))
        assert self._channel is not None
        stub = self._channel.stream_stream(self.wire.service + method)
        responses = stub(iter(requests), metadata=self._upstream_args(_Decision(None), context)["metadata"])
        context.add_callback(responses.cancel)
        try:
            yield from responses
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.CANCELLED:
                context.abort(exc.code(), exc.details() or "")


class _Forwarder(grpc.GenericRpcHandler):
    """Routes every method of the store's service to the proxy as raw bytes (no (de)serialisers)."""

    def __init__(self, proxy: FaultProxy):
        self.proxy = proxy

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
        full = handler_call_details.method
        wire = self.proxy.wire
        if not full.startswith(wire.service):
            return None
        method = full[len(wire.service):]
        if method in wire.stream_stream:
            return grpc.stream_stream_rpc_method_handler(lambda it, ctx: self.proxy.stream_stream(method, it, ctx))
        if method in wire.unary_stream:
            return grpc.unary_stream_rpc_method_handler(lambda req, ctx: self.proxy.unary_stream(method, req, ctx))
        return grpc.unary_unary_rpc_method_handler(lambda req, ctx: self.proxy.unary_unary(method, req, ctx))
